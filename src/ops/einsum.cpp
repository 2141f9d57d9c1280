// SPDX-License-Identifier: MIT OR Apache-2.0
// einsum: parses the equation, takes diagonals for repeated letters, then contracts operands
// pairwise (the pair with the smallest result first) as batched matrix products built from
// permute + reshape + MatMul. Size-1 dims broadcast against the other operand's size.
#include <algorithm>
#include <array>
#include <numeric>

#include "kiln/matmul.h"
#include "ops/dispatch.h"

namespace kiln {

namespace {

// Note [einsum labels]: letters get ids in ASCII order (A-Z = 0..25, a-z = 26..51) so that the
// implicit output, sorted by id, matches torch.einsum; ellipsis dims get ids 52, 53, ...
// (right-aligned across operands, as broadcasting aligns dims).
constexpr int kEll = 52;

int letter_id(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

char label_char(int id) { return id < 26 ? static_cast<char>('A' + id) : static_cast<char>('a' + id - 26); }

struct Term {
  std::vector<int> subs;  // letter ids, -1 for the ellipsis
  bool ellipsis = false;
};

/// Parses one side of the equation (letters and at most one "...").
Term parse_term(const std::string& eq, const std::string& s, size_t base) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      KILN_CHECK(s.compare(i, 3, "...") == 0, "einsum",
                 "einsum(\"" << eq << "\"): found '.' at index " << base + i << " that is not part of any ellipsis");
      KILN_CHECK(!t.ellipsis, "einsum", "einsum(\"" << eq << "\"): found more than one ellipsis ('...') in one term");
      t.ellipsis = true;
      t.subs.push_back(-1);
      i += 2;
      continue;
    }
    int id = letter_id(c);
    KILN_CHECK(id >= 0, "einsum",
               "einsum(\"" << eq << "\"): invalid subscript '" << c << "' at index " << base + i
                           << " (subscripts must be letters in [a-zA-Z])");
    t.subs.push_back(id);
  }
  return t;
}

/// One operand during the contraction: a tensor and the label of each of its dims.
struct Operand {
  Tensor t;
  std::vector<int> labels;
};

int64_t pos_of(const std::vector<int>& labels, int l) {
  auto it = std::find(labels.begin(), labels.end(), l);
  return it == labels.end() ? -1 : static_cast<int64_t>(it - labels.begin());
}

/// Sums x over the dims whose labels satisfy pred (keeps the dtype), updating labels.
template <class Pred>
void sum_out(Operand& x, Pred pred, bool promote = false) {
  Dims dims;
  std::vector<int> rest;
  for (size_t i = 0; i < x.labels.size(); ++i) {
    if (pred(x.labels[i]))
      dims.push_back(static_cast<int64_t>(i));
    else
      rest.push_back(x.labels[i]);
  }
  if (dims.empty()) return;
  x.t = promote ? sum(x.t, dims, false) : sum(x.t, dims, false, x.t.dtype());
  x.labels = rest;
}

/// Drops size-1 dims of x whose labels satisfy pred.
template <class Pred>
void squeeze_if(Operand& x, Pred pred) {
  Dims dims;
  std::vector<int> rest;
  for (size_t i = 0; i < x.labels.size(); ++i) {
    if (x.t.size(static_cast<int64_t>(i)) == 1 && pred(x.labels[i]))
      dims.push_back(static_cast<int64_t>(i));
    else
      rest.push_back(x.labels[i]);
  }
  if (dims.empty()) return;
  x.t = x.t.squeeze(dims);
  x.labels = rest;
}

/// Contracts a and b; labels for which keep(l) is true survive (batch or free dims), the
/// others are summed. The result's labels are batch, then a's free, then b's free labels.
template <class Keep>
Operand contract(Operand a, Operand b, Keep keep) {
  // Size-1 dims broadcast: drop them where the other operand has the label with a larger size.
  auto size_in = [](const Operand& x, int l) {
    int64_t p = pos_of(x.labels, l);
    return p < 0 ? int64_t{-1} : x.t.size(p);
  };
  squeeze_if(a, [&](int l) { return size_in(b, l) > 1; });
  squeeze_if(b, [&](int l) { return size_in(a, l) > 1; });
  // Labels in one operand only that nobody needs are summed first.
  sum_out(a, [&](int l) { return !keep(l) && pos_of(b.labels, l) < 0; });
  sum_out(b, [&](int l) { return !keep(l) && pos_of(a.labels, l) < 0; });
  std::vector<int> batch, mfree, nfree, red;
  for (int l : a.labels) {
    if (pos_of(b.labels, l) >= 0)
      (keep(l) ? batch : red).push_back(l);
    else
      mfree.push_back(l);
  }
  for (int l : b.labels)
    if (pos_of(a.labels, l) < 0) nfree.push_back(l);
  auto prod_of = [](const Operand& x, const std::vector<int>& ls) {
    int64_t n = 1;
    for (int l : ls) n *= x.t.size(pos_of(x.labels, l));
    return n;
  };
  auto perm_of = [](const Operand& x, std::initializer_list<const std::vector<int>*> groups) {
    Dims p;
    for (auto* g : groups)
      for (int l : *g) p.push_back(pos_of(x.labels, l));
    return p;
  };
  const int64_t Bt = prod_of(a, batch), Mt = prod_of(a, mfree), Kt = prod_of(a, red), Nt = prod_of(b, nfree);
  Tensor a3 = a.t.permute(perm_of(a, {&batch, &mfree, &red})).reshape({Bt, Mt, Kt});
  Tensor b3 = b.t.permute(perm_of(b, {&batch, &red, &nfree})).reshape({Bt, Kt, Nt});
  Tensor r = bmm(a3, b3);
  Shape rs;
  Operand out;
  for (int l : batch) {
    rs.push_back(a.t.size(pos_of(a.labels, l)));
    out.labels.push_back(l);
  }
  for (int l : mfree) {
    rs.push_back(a.t.size(pos_of(a.labels, l)));
    out.labels.push_back(l);
  }
  for (int l : nfree) {
    rs.push_back(b.t.size(pos_of(b.labels, l)));
    out.labels.push_back(l);
  }
  out.t = r.view(rs);
  return out;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  const char* api = "einsum";
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  KILN_CHECK(!operands.empty(), api, "einsum(\"" << equation << "\"): must provide at least one operand");
  for (const Tensor& t : operands) {
    detail::check_defined(api, t);
    detail::check_same_device(api, operands[0], t);
    KILN_CHECK(t.dtype() == operands[0].dtype(), api,
               "einsum(\"" << equation << "\"): expected all operands to have one dtype, got "
                           << dtype_name(operands[0].dtype()).data() << " and " << dtype_name(t.dtype()).data());
  }
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  KILN_CHECK(arrow == std::string::npos || eq.find("->", arrow + 2) == std::string::npos, api,
             "einsum(\"" << equation << "\"): more than one '->' in the equation");
  // Input terms.
  std::vector<Term> terms;
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    std::string part = lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    terms.push_back(parse_term(equation, part, start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  KILN_CHECK(terms.size() <= operands.size(), api,
             "einsum(\"" << equation << "\"): fewer operands were provided than specified in the equation ("
                         << operands.size() << " vs " << terms.size() << ")");
  KILN_CHECK(terms.size() >= operands.size(), api,
             "einsum(\"" << equation << "\"): more operands were provided than specified in the equation ("
                         << operands.size() << " vs " << terms.size() << ")");
  // Ellipsis ranks, labels per dim, sizes per label.
  const size_t n = operands.size();
  std::vector<int64_t> ell_rank(n, 0);
  int64_t E = 0;
  for (size_t i = 0; i < n; ++i) {
    int64_t letters = static_cast<int64_t>(terms[i].subs.size()) - (terms[i].ellipsis ? 1 : 0);
    int64_t rank = operands[i].dim();
    if (terms[i].ellipsis) {
      KILN_CHECK(rank >= letters, api,
                 "einsum(\"" << equation << "\"): operand " << i << " has " << rank << " dims (shape "
                             << operands[i].shape() << ") but its subscripts need at least " << letters);
      ell_rank[i] = rank - letters;
      E = std::max(E, ell_rank[i]);
    } else {
      KILN_CHECK(rank == letters, api,
                 "einsum(\"" << equation << "\"): the number of subscripts (" << letters
                             << ") does not match the number of dimensions (" << rank << ") of operand " << i
                             << " (shape " << operands[i].shape() << ")");
    }
  }
  const int L = kEll + static_cast<int>(E);
  std::vector<int64_t> size(static_cast<size_t>(L), -1);
  std::vector<int> count(static_cast<size_t>(L), 0);
  std::vector<Operand> ops(n);
  for (size_t i = 0; i < n; ++i) {
    Operand& o = ops[i];
    o.t = operands[i];
    for (int s : terms[i].subs) {
      if (s >= 0) {
        o.labels.push_back(s);
      } else {
        for (int64_t j = 0; j < ell_rank[i]; ++j) o.labels.push_back(kEll + static_cast<int>(E - ell_rank[i] + j));
      }
    }
    for (size_t d = 0; d < o.labels.size(); ++d) {
      int l = o.labels[d];
      int64_t s = o.t.size(static_cast<int64_t>(d));
      int64_t first = pos_of(o.labels, l);
      if (first != static_cast<int64_t>(d)) {
        KILN_CHECK(o.t.size(first) == s, api,
                   "einsum(\"" << equation << "\"): subscript " << label_char(l) << " is repeated for operand " << i
                               << " but the sizes don't match, " << o.t.size(first) << " != " << s);
      }
      ++count[static_cast<size_t>(l)];
      int64_t& g = size[static_cast<size_t>(l)];
      if (g == -1 || g == 1) {
        g = s;
      } else {
        KILN_CHECK(s == 1 || s == g, api,
                   "einsum(\"" << equation << "\"): subscript "
                               << (l < kEll ? std::string(1, label_char(l)) : std::string("...")) << " has size " << s
                               << " for operand " << i << " which does not broadcast with previously seen size " << g);
      }
    }
  }
  // Output labels.
  std::vector<int> out;
  if (arrow != std::string::npos) {
    Term t = parse_term(equation, eq.substr(arrow + 2), arrow + 2);
    for (int s : t.subs) {
      if (s < 0) {
        for (int j = 0; j < E; ++j) out.push_back(kEll + j);
        continue;
      }
      KILN_CHECK(count[static_cast<size_t>(s)] > 0, api,
                 "einsum(\"" << equation << "\"): output subscript " << label_char(s)
                             << " does not appear in the equation for any input operand");
      KILN_CHECK(std::find(out.begin(), out.end(), s) == out.end(), api,
                 "einsum(\"" << equation << "\"): output subscript " << label_char(s)
                             << " appears more than once in the output");
      out.push_back(s);
    }
  } else {
    for (int j = 0; j < E; ++j) out.push_back(kEll + j);
    for (int l = 0; l < kEll; ++l)
      if (count[static_cast<size_t>(l)] == 1) out.push_back(l);
  }
  std::vector<bool> in_out(static_cast<size_t>(L), false);
  for (int l : out) in_out[static_cast<size_t>(l)] = true;

  // Bool operands multiply as integers (any product counts), then compare with 0.
  const bool is_bool = operands[0].dtype() == DType::Bool && n > 1;
  // Diagonals for repeated labels.
  for (Operand& o : ops) {
    if (is_bool) o.t = o.t.to(DType::I64);
    while (true) {
      int64_t d1 = -1, d2 = -1;
      for (size_t i = 0; i < o.labels.size() && d1 < 0; ++i)
        for (size_t j = i + 1; j < o.labels.size(); ++j)
          if (o.labels[i] == o.labels[j]) {
            d1 = static_cast<int64_t>(i);
            d2 = static_cast<int64_t>(j);
            break;
          }
      if (d1 < 0) break;
      int l = o.labels[static_cast<size_t>(d1)];
      o.t = o.t.diagonal(0, d1, d2);
      o.labels.erase(o.labels.begin() + d2);
      o.labels.erase(o.labels.begin() + d1);
      o.labels.push_back(l);
    }
  }

  // Pairwise contraction: the pair whose result is smallest goes first.
  while (ops.size() > 1) {
    size_t bi = 0, bj = 1;
    int64_t best = -1;
    for (size_t i = 0; i < ops.size(); ++i)
      for (size_t j = i + 1; j < ops.size(); ++j) {
        int64_t r = 1;
        std::vector<int> seen;
        for (const Operand* o : {&ops[i], &ops[j]})
          for (size_t d = 0; d < o->labels.size(); ++d) {
            int l = o->labels[d];
            if (std::find(seen.begin(), seen.end(), l) != seen.end()) continue;
            seen.push_back(l);
            bool needed = in_out[static_cast<size_t>(l)];
            for (size_t k = 0; k < ops.size() && !needed; ++k)
              if (k != i && k != j && pos_of(ops[k].labels, l) >= 0) needed = true;
            if (needed) r *= size[static_cast<size_t>(l)];
          }
        if (best < 0 || r < best) {
          best = r;
          bi = i;
          bj = j;
        }
      }
    auto keep = [&](int l) {
      if (in_out[static_cast<size_t>(l)]) return true;
      for (size_t k = 0; k < ops.size(); ++k)
        if (k != bi && k != bj && pos_of(ops[k].labels, l) >= 0) return true;
      return false;
    };
    Operand r = contract(ops[bi], ops[bj], keep);
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(bj));
    ops[bi] = std::move(r);
  }

  // Sum what the output does not name, then order (and broadcast) as the output.
  Operand& res = ops[0];
  sum_out(
      res, [&](int l) { return !in_out[static_cast<size_t>(l)]; }, /*promote=*/n == 1);
  Dims perm;
  Shape view_shape, full_shape;
  for (int l : out) {
    int64_t p = pos_of(res.labels, l);
    if (p >= 0) perm.push_back(p);
  }
  Tensor t = res.t.permute(perm);
  for (int l : out) {
    int64_t p = pos_of(res.labels, l);
    view_shape.push_back(p >= 0 ? res.t.size(p) : 1);
    full_shape.push_back(std::max<int64_t>(size[static_cast<size_t>(l)], 0));
  }
  t = t.reshape(view_shape);
  if (view_shape != full_shape) t = t.expand(full_shape);
  if (is_bool) t = ne(t, Scalar(0));
  return t;
}

}  // namespace kiln
