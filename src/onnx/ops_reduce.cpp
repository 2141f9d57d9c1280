// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX reductions and ops along an axis: Reduce* (axes attribute or input by opset), ArgMax/
// ArgMin, CumSum, Softmax/LogSoftmax/Hardmax (opset-13 axis semantics), TopK, Einsum, Det, and
// the losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "kiln/linalg.h"
#include "kiln/matmul.h"
#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

// The dims a Reduce* node reduces; empty with `all` true means every dim. ReduceSum takes axes
// as an input from opset 13, the others from opset 18.
Dims reduce_axes(const OpContext& c, int64_t input_from, int64_t rank, bool& noop) {
  std::vector<int64_t> axes;
  noop = false;
  if (c.opset >= input_from) {
    if (c.has(1)) axes = c.ints_in(1);
  } else {
    axes = c.attr_ints("axes");
  }
  if (axes.empty()) {
    if (c.attr_i("noop_with_empty_axes", 0)) noop = true;
    Dims all;
    for (int64_t i = 0; i < rank; ++i) all.push_back(i);
    return all;
  }
  Dims d;
  for (int64_t a : axes) d.push_back(axis_of(c, a, rank));
  return d;
}

using ReduceFn = Tensor (*)(const Tensor& x, const Dims& d, bool keep);

/// One Reduce* op: from which opset its axes are an input, its function, and whether integer
/// inputs are reduced in f64 (and cast back).
struct ReduceKind {
  const char* name;
  int64_t input_from;
  ReduceFn f;
  bool float_compute;
};
const ReduceKind* reduce_kind(std::string_view op);

/// x reduced over the dims d (valid, non-negative) by k, in x's dtype.
Tensor run_reduce(const ReduceKind& k, const Tensor& x, const Dims& d, bool keep) {
  Tensor xin = k.float_compute && !is_floating(x.dtype()) ? x.to(f64) : x;
  Tensor y = x.dim() == 0 ? k.f(xin.reshape({1}), Dims{0}, false) : k.f(xin, d, keep);
  return y.dtype() == x.dtype() ? y : cast(y, x.dtype());
}

void reduce_op(Registry& r, const char* name) {
  const ReduceKind* k = reduce_kind(name);
  r[name] = [k](OpContext& c) {
    const Tensor& x = c.x(0);
    bool noop;
    Dims d = reduce_axes(c, k->input_from, x.dim(), noop);
    c.set(0, noop ? x : run_reduce(*k, x, d, c.attr_i("keepdims", 1) != 0));
  };
  // Generated code: ops::reduce with the axes as a literal, when they are constants.
  r.emit(name, [k](EmitContext& e) {
    std::string axes = "{}";
    if (e.opset >= k->input_from) {
      if (e.has(1)) {
        const ShapeArg* a = e.shape(1);  // a constant (a literal) or a shape value
        if (!a) return false;
        axes = a->expr;
      }
    } else {
      axes = "std::vector<int64_t>" + int_list(e.attr_ints("axes"));
    }
    const bool keep = e.attr_i("keepdims", 1) != 0, noop = e.attr_i("noop_with_empty_axes", 0) != 0;
    e.assign("kiln::onnx::ops::reduce(\"" + std::string(k->name) + "\", " + e.in(0) + ", " + axes + ", " +
             (keep ? "true" : "false") + (noop ? ", true" : "") + ")");
    return true;
  });
}

Tensor r_sum(const Tensor& x, const Dims& d, bool k) { return sum(x, d, k); }
Tensor r_mean(const Tensor& x, const Dims& d, bool k) { return mean(x, d, k); }
Tensor r_prod(const Tensor& x, const Dims& d, bool k) {
  Tensor y = x;
  Dims s = d;
  std::sort(s.begin(), s.end());
  for (size_t i = s.size(); i-- > 0;) y = prod(y, {s[i]}, k);
  return y;
}
Tensor r_max(const Tensor& x, const Dims& d, bool k) {
  if (x.numel() == 0) {
    Tensor s = sum(x, d, k);
    return full_like(s, is_floating(x.dtype()) ? Scalar(-INFINITY) : Scalar(std::numeric_limits<int64_t>::min()));
  }
  return amax(x, d, k);
}
Tensor r_min(const Tensor& x, const Dims& d, bool k) {
  if (x.numel() == 0) {
    Tensor s = sum(x, d, k);
    return full_like(s, is_floating(x.dtype()) ? Scalar(INFINITY) : Scalar(std::numeric_limits<int64_t>::max()));
  }
  return amin(x, d, k);
}
Tensor r_l1(const Tensor& x, const Dims& d, bool k) { return sum(abs(x), d, k); }
Tensor r_l2(const Tensor& x, const Dims& d, bool k) { return sqrt(sum(x * x, d, k)); }
Tensor r_logsum(const Tensor& x, const Dims& d, bool k) { return log(sum(x, d, k)); }
Tensor r_logsumexp(const Tensor& x, const Dims& d, bool k) {
  if (x.numel() == 0) return log(sum(exp(x), d, k));
  return logsumexp(x, d, k);
}
Tensor r_sumsquare(const Tensor& x, const Dims& d, bool k) { return sum(x * x, d, k); }

const ReduceKind kReduces[] = {
    {"ReduceSum", 13, r_sum, false},
    {"ReduceMean", 18, r_mean, true},
    {"ReduceProd", 18, r_prod, false},
    {"ReduceMax", 18, r_max, false},
    {"ReduceMin", 18, r_min, false},
    {"ReduceL1", 18, r_l1, false},
    {"ReduceL2", 18, r_l2, true},
    {"ReduceLogSum", 18, r_logsum, true},
    {"ReduceLogSumExp", 18, r_logsumexp, true},
    {"ReduceSumSquare", 18, r_sumsquare, false},
};
const ReduceKind* reduce_kind(std::string_view op) {
  for (const ReduceKind& k : kReduces)
    if (op == k.name) return &k;
  return nullptr;
}

// ONNX before opset 13: softmax over the flattened [prod(:axis), prod(axis:)] view.
template <class F>
Tensor along_axis(const OpContext& c, const Tensor& x, F f) {
  if (c.opset >= 13) return f(x, axis_of(c, c.attr_i("axis", -1), x.dim()));
  int64_t a = axis_of(c, c.attr_i("axis", 1), x.dim());
  int64_t outer = 1;
  for (int64_t i = 0; i < a; ++i) outer *= x.size(i);
  return f(x.reshape({outer, -1}), 1).reshape(x.shape());
}

Tensor hardmax(const Tensor& x, int64_t a) {
  Tensor idx = argmax(x, a, true);
  return zeros_like(x).scatter(a, idx, 1);
}

// NegativeLogLikelihoodLoss on log-probabilities x [N, C, d...] and targets [N, d...].
Tensor nll(const OpContext& c, const Tensor& x, const Tensor& target, const Tensor& weight) {
  std::string red = c.attr_s("reduction", "mean");
  bool has_ignore = c.has_attr("ignore_index");
  int64_t ignore = c.attr_i("ignore_index", 0);
  Tensor t = target.to(i64);
  Tensor valid = has_ignore ? t.ne(ignore) : ones(t.shape(), {.dtype = bool_, .device = t.device()});
  Tensor ts = where(valid, t, zeros_like(t));
  Tensor picked = gather(x, 1, ts.unsqueeze(1)).squeeze({1});
  Tensor w = weight.defined() ? index_select(weight, 0, ts.reshape({-1})).reshape(ts.shape()) : ones_like(picked);
  w = where(valid, w, zeros_like(w));
  Tensor loss = -picked * w;
  if (red == "none") return loss;
  if (red == "sum") return sum(loss);
  c.check(red == "mean", "unknown reduction '" + red + "'");
  return sum(loss) / sum(w);
}

}  // namespace

void register_reduce(Registry& r) {
  for (const ReduceKind& k : kReduces) reduce_op(r, k.name);

  auto arg = [](bool is_max) {
    return [is_max](OpContext& c) {
      const Tensor& x = c.x(0);
      int64_t a = axis_of(c, c.attr_i("axis", 0), x.dim());
      bool keep = c.attr_i("keepdims", 1) != 0;
      if (c.attr_i("select_last_index", 0)) {
        Tensor f = x.flip({a});
        Tensor i = is_max ? argmax(f, a, keep) : argmin(f, a, keep);
        c.set(0, (x.size(a) - 1) - i);
      } else {
        c.set(0, is_max ? argmax(x, a, keep) : argmin(x, a, keep));
      }
    };
  };
  r["ArgMax"] = arg(true);
  r["ArgMin"] = arg(false);
  r["CumSum"] = [](OpContext& c) {
    Tensor x = c.x(0);
    int64_t a = axis_of(c, c.value(1).to(i64).reshape({-1}).to_vector<int64_t>().at(0), x.dim());
    bool rev = c.attr_i("reverse", 0) != 0, excl = c.attr_i("exclusive", 0) != 0;
    if (rev) x = x.flip({a});
    Tensor y = cumsum(x, a);
    if (excl) y = y - x;
    if (rev) y = y.flip({a});
    c.set(0, y.dtype() == x.dtype() ? y : cast(y, x.dtype()));
  };
  r["Softmax"] = [](OpContext& c) {
    c.set(0, along_axis(c, c.x(0), [](const Tensor& t, int64_t a) { return softmax(t, a); }));
  };
  r.emit("Softmax", [](EmitContext& e) {  // opset 13 on: one axis, kiln::softmax
    if (e.opset < 13) return false;
    e.assign("kiln::softmax(" + e.in(0) + ", " + std::to_string(e.attr_i("axis", -1)) + ")");
    return true;
  });
  r["LogSoftmax"] = [](OpContext& c) {
    c.set(0, along_axis(c, c.x(0), [](const Tensor& t, int64_t a) { return log_softmax(t, a); }));
  };
  r["Hardmax"] = [](OpContext& c) { c.set(0, along_axis(c, c.x(0), hardmax)); };
  r["TopK"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    int64_t k = c.opset >= 10 ? c.ints_in(1).at(0) : c.attr_i("k", 1);
    int64_t a = axis_of(c, c.attr_i("axis", -1), x.dim());
    bool largest = c.attr_i("largest", 1) != 0;
    c.check(k >= 0 && k <= x.size(a), "k out of range");
    // Stable: ties keep the lower index first (as ONNX).
    auto [v, i] = sort(x, a, largest, true);
    c.set(0, v.narrow(a, 0, k));
    c.set(1, i.narrow(a, 0, k));
  };
  r["Einsum"] = [](OpContext& c) {
    std::vector<Tensor> xs;
    for (size_t i = 0; i < c.n_in(); ++i) xs.push_back(c.x(i));
    std::string eq;
    for (char ch : c.attr_s("equation", ""))
      if (ch != ' ') eq += ch;
    c.set(0, einsum(eq, xs));
  };
  r["Det"] = [](OpContext& c) { c.set(0, linalg::det(c.x(0))); };
  r["NegativeLogLikelihoodLoss"] = [](OpContext& c) {
    c.set(0, nll(c, c.x(0), c.x(1), c.has(2) ? c.x(2) : Tensor{}).to(c.x(0).dtype()));
  };
  r["SoftmaxCrossEntropyLoss"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    Tensor lp = log_softmax(x, 1);
    c.set(0, nll(c, lp, c.x(1), c.has(2) ? c.x(2) : Tensor{}).to(x.dtype()));
    c.set(1, lp);
  };
}

namespace ops {

Tensor reduce(const std::string& op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims,
              bool noop_with_empty_axes) {
  const ReduceKind* k = reduce_kind(op);
  KILN_CHECK(k != nullptr, "onnx", "ops::reduce: '" << op << "' is not an ONNX Reduce* op");
  if (axes.empty() && noop_with_empty_axes) return x;
  const int64_t rank = x.dim(), r = std::max<int64_t>(rank, 1);
  Dims d;
  for (int64_t a : axes) {
    KILN_CHECK(a >= -r && a < r, op, "axis " << a << " out of range for rank " << rank);
    d.push_back(a < 0 ? a + r : a);
  }
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) d.push_back(i);
  return run_reduce(*k, x, d, keepdims);
}

}  // namespace ops

}  // namespace kiln::onnx
