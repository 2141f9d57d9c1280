// SPDX-License-Identifier: MIT OR Apache-2.0
// The fusion decorator. See Note [Fusion design].
//
// Note [Fusion design]
// ~~~~~~~~~~~~~~~~~~~~
// A FusionBackend wraps a backend that offers an executor (Backend::fusion_executor, today the
// CPU's: src/backends/cpu/fusion_*.cpp); over any other it passes every op through. It plans and
// the executor runs: recording, liveness, cutting groups, stores, signatures, the plan cache and
// each group's fused program (fusion/program.h) are here and know no backend; the executor runs
// planned groups, products' epilogues and row pipelines on its memory (fusion/executor.h).
// Its buffers are lazy: a Storage's `data` points to a Buf record, whose memory (`real`) is
// allocated from the inner backend only when a value must exist in memory. Elementwise ops
// (Unary/Binary/Ternary families, floating or bool operands, casts from any dtype) and row ops
// (Sum/Mean/Max/Min/Prod/Var, Softmax, LogSoftmax, LayerNorm) are not run by execute(): they
// are appended to a stream. Any other op runs at once, so errors raised by kernels (index
// checks...) stay synchronous; the stream is flushed first unless no queued op names the op's
// buffers. The stream is also flushed by read (to_vector, item, printing), write into a queued
// buffer, kiln::sync, set_enabled and a length limit (kMaxStream ops). A recordable op on small
// tensors (every result within small_limit() elements) whose buffers no queued op names runs
// at once instead: fusing it would save no memory traffic, and recording and launching cost
// more than running it.
//
// A flush first walks the stream backwards: an op is live when one of its outputs is held by a
// live tensor (the Storage still exists) or read by a later live op; dead ops are dropped. Live
// ops are then cut, in order, into groups: a run of elementwise steps whose outputs are
// contiguous and share one iteration shape S, optionally closed by a row op reducing the trailing
// dims of a value produced in the group. A step input is either a value of an earlier step (read
// through the very descriptor it was written with) or a load from memory (identity layout,
// a single element, or a broadcast/strided gather). A group's value is stored to memory only
// when a live tensor holds its buffer or an op after the group reads it; the others live in
// tile scratch and are never materialised.
//
// On the CPU, a group runs over S in tiles of 4096 elements (whole rows when it has a row op):
// each tile runs the group's program, or applies every step in order by calling the CPU kernel
// of the op on descriptors of the tile (1-d, contiguous or a broadcast element), so each op is
// described once (in the kernel) and results are bitwise those of the unfused ops. Tiles are
// split over the thread pool; a tile's result depends only on its position, so results do not
// depend on the thread count. Plans (the stores, loads and program of a group) are cached by a
// shape-relative signature:
// op kinds, attributes, dtypes, ranks and broadcast pattern, not sizes.
#include <cmath>

#include "fusion/backend.h"

namespace kiln {
namespace fusion {

bool FusionBackend::try_add_step(const std::vector<Rec>& s, size_t j, Group& g, std::string& why) {
  const Rec& r = s[j];
  if (const char* w = step_refusal(r.op)) return refuse(why, [&] { return std::string(w); });
  const ir::TensorDesc& o = r.op.outputs[0];
  if (g.steps.empty()) g.S = o.shape;
  if (!is_full_contiguous(o, g.S))
    return refuse(why, [&] {
      return o.shape == g.S ? std::string("writes into a strided view")
                            : "shape " + desc_str(o) + " differs from the group's";
    });
  for (size_t k = 0; k < r.in.size(); ++k) {
    const int64_t pr = gr(r.in[k]).producer;
    if (pr >= 0) {
      if (!(s[static_cast<size_t>(pr)].op.outputs[0] == r.op.inputs[k]))
        return refuse(why, [&] { return std::string("reads a value of the group through another view"); });
    } else if (!is_identity(r.op.inputs[k], g.S) && r.op.inputs[k].numel() != 1) {
      if (r.in[k] == r.out[0])
        return refuse(why, [&] { return std::string("reads its own output buffer through a broadcast"); });
      // A transposed or strided operand (innermost stride not 0 or 1) would be gathered element
      // by element; alone, the op runs through the CPU kernel's tiled transpose instead.
      const ir::TensorDesc& d = r.op.inputs[k];
      if (!d.shape.empty() && !g.S.empty() && g.S.back() > 1 && d.shape.back() > 1 && d.strides.back() != 1 &&
          d.strides.back() != 0)
        return refuse(why, [&] { return std::string("reads a transposed or strided view " + desc_str(d)); });
    }
  }
  if (gr(r.out[0]).loaded_other)
    return refuse(why, [&] { return std::string("overwrites a buffer the group reads through a broadcast"); });
  for (size_t k = 0; k < r.in.size(); ++k)
    if (gr(r.in[k]).producer < 0) {
      r.in[k]->loaded = true;
      if (!is_identity(r.op.inputs[k], g.S)) r.in[k]->loaded_other = true;
    }
  g.steps.push_back(j);
  gr(r.out[0]).producer = static_cast<int64_t>(j);
  return true;
}

bool FusionBackend::try_tail(const std::vector<Rec>& s, size_t j, Group& g, std::string& why) {
  const Rec& r = s[j];
  if (!is_row_kind(r.op.kind)) return false;
  const int64_t pr = gr(r.in[0]).producer;
  if (pr < 0 || !(s[static_cast<size_t>(pr)].op.outputs[0] == r.op.inputs[0]))
    return refuse(why, [&] { return std::string("row op whose input is not a value of the group"); });
  const int64_t k = row_dims(r.op);
  if (k == 0) return refuse(why, [&] { return std::string("row op not over the trailing dims"); });
  const int64_t rk = static_cast<int64_t>(g.S.size());
  int64_t rowlen = 1;
  for (int64_t i = rk - k; i < rk; ++i) rowlen *= g.S[static_cast<size_t>(i)];
  // A full Sum / Mean of any length ends the group by per-tile partials
  // (Executor::long_reduction); other row ops need whole rows in a tile.
  const bool long_tail = rowlen > kMaxRowLen && k == rk && exec_->long_reduction(r.op);
  if (rowlen < 1 || (rowlen > kMaxRowLen && !long_tail))
    return refuse(why,
                  [&] { return std::string("row of " + std::to_string(rowlen) + " elements (too long for a tile)"); });
  for (size_t q = 1; q < r.in.size(); ++q)
    if (gr(r.in[q]).producer >= 0)
      return refuse(why, [&] { return std::string("row op parameter produced in the group"); });
  for (size_t q = 0; q < r.out.size(); ++q) {
    if (r.op.outputs[q].offset != 0 || !r.op.outputs[q].is_contiguous() || gr(r.out[q]).loaded ||
        gr(r.out[q]).producer >= 0)
      return refuse(why, [&] { return std::string("row op output aliases the group's buffers"); });
  }
  g.tail = static_cast<ptrdiff_t>(j);
  g.long_tail = long_tail;
  return true;
}

void FusionBackend::run_stream(const std::vector<Rec>& s) {
  const size_t n = s.size();
  // Liveness, backwards.
  std::vector<char> live(n, 0);
  ++g_epoch;
  {
    for (size_t i = n; i-- > 0;) {
      bool l = false;
      for (Buf* b : s[i].out) l |= b->alive || fl(b).needed;
      live[i] = l;
      if (!l) {
        bump(&Stats::dead);
        if (debug_on()) dbg("  dead: " + std::string(ir::op_name(s[i].op.kind)) + " (result never read)");
        continue;
      }
      for (Buf* b : s[i].in) fl(b).needed = true;
    }
  }

  for (size_t q = 0; q < n; ++q)
    for (Buf* b : s[q].in) fl(b).last_reader = static_cast<int64_t>(q);
  std::vector<size_t> order;
  order.reserve(n);
  for (size_t q = 0; q < n; ++q)
    if (live[q])
      order.push_back(q);
    else
      release(s, q);
  run_ops(s, std::move(order));
}

/// Whether op j may run before the group built so far (it is hoisted past the group's steps):
/// it reads no buffer the group writes and writes no buffer the group reads or writes.
bool hoistable(const Rec& r) {
  for (Buf* b : r.in)
    if (gr(b).producer >= 0) return false;
  for (Buf* b : r.out)
    if (gr(b).producer >= 0 || gr(b).loaded) return false;
  return true;
}

/// Gathers the Conv at order[head] and the chain of ops that may become its epilogue: the first
/// reader of its result, then the first reader of that one's, and so on (Mul, Add, Relu or Clamp; up to
/// four). When other ops lie between them, and each of those can run before the Conv (it reads
/// none of their results, writes nothing the Conv reads and nothing an earlier member reads, and
/// is not another product or convolution), moves them ahead of the Conv in `order` and returns
/// true. A batch norm in eval mode computes its per-channel coefficients after the convolution's
/// result exists, between the ops that apply them. A chain whose gathering would move a
/// dependent op is shortened from its end.
bool gather_conv_chain(const std::vector<Rec>& s, std::vector<size_t>& order, size_t head) {
  constexpr size_t kMaxLook = 32;
  const Rec& c = s[order[head]];
  if (!is_conv_anchor(c.op)) return false;
  auto has = [](const auto& v, const Buf* b) { return std::find(v.begin(), v.end(), b) != v.end(); };
  std::vector<size_t> chain;  // positions in `order`
  const size_t lim = std::min(order.size(), head + 1 + kMaxLook);
  Buf* cur = c.out[0];
  for (size_t p = head + 1; chain.size() < 4;) {
    size_t k = p;
    while (k < lim && !has(s[order[k]].in, cur)) ++k;
    if (k >= lim) break;
    const OpKind kind = s[order[k]].op.kind;
    if (kind != OpKind::Mul && kind != OpKind::Add && kind != OpKind::Relu && kind != OpKind::Clamp) break;
    chain.push_back(k);
    cur = s[order[k]].out[0];
    p = k + 1;
  }
  for (; !chain.empty(); chain.pop_back()) {
    const size_t last = chain.back();
    if (last == head + chain.size()) return false;  // already together
    // An op moved ahead may not read what the Conv or the chain makes, nor write what they make,
    // what the Conv reads, or what a chain member before it reads (it may write an operand a
    // member after it reads: a coefficient).
    std::vector<Buf*> made{c.out[0]};
    for (size_t k : chain) made.push_back(s[order[k]].out[0]);
    std::vector<Buf*> touched(c.in.begin(), c.in.end());
    touched.insert(touched.end(), made.begin(), made.end());
    bool ok = true;
    for (size_t q = head + 1; q < last && ok; ++q) {
      const Rec& r = s[order[q]];
      if (std::find(chain.begin(), chain.end(), q) != chain.end()) {
        touched.insert(touched.end(), r.in.begin(), r.in.end());
        continue;
      }
      ok = !is_anchor(r.op);
      for (Buf* b : r.in) ok = ok && !has(made, b);
      for (Buf* b : r.out) ok = ok && !has(touched, b);
    }
    if (!ok) continue;
    std::vector<size_t> others, members{order[head]};
    for (size_t q = head + 1; q <= last; ++q)
      (std::find(chain.begin(), chain.end(), q) != chain.end() ? members : others).push_back(order[q]);
    std::copy(members.begin(), members.end(),
              std::copy(others.begin(), others.end(), order.begin() + static_cast<ptrdiff_t>(head)));
    return true;
  }
  return false;
}

/// Conv at order[head] followed by its epilogue (the next live ops, each optional, in this order;
/// f32/f64): a Mul by a per-channel value (one per output channel, broadcast over the rest), an
/// Add of a per-channel value (a batch norm in eval mode), an Add of a value shaped like the
/// result (a residual), a Relu; each reads the whole result of the op before, which nothing else
/// reads. Runs them as one convolution with the epilogue fused (ops.def; the CPU applies it per
/// share of images while they are in the cache), writing the last op's buffer; the
/// intermediates are never materialised. Returns the number of ops run (0: none, nothing fused).
/// The operands are computed already: their producers precede the ops reading them, hence the
/// convolution, in `order`.
size_t FusionBackend::try_conv_epilogue(const std::vector<Rec>& s, const std::vector<size_t>& order, size_t head) {
  const Rec& c = s[order[head]];
  if (!is_conv_anchor(c.op)) return 0;
  Buf* y = c.out[0];
  const ir::TensorDesc* yd = &c.op.outputs[0];
  // Whether r (at stream index j) reads y whole as input arg, with nothing else reading y.
  // An op writing in place over y (a temporary's buffer reused) overwrites the value it reads,
  // so nothing after it can read that value; the next op in `order` is the only reader.
  auto sole_reader = [&](size_t j, const Rec& r, size_t arg) {
    if (r.in[arg] != y || !(r.op.inputs[arg] == *yd) || !(r.op.outputs[0] == *yd)) return false;
    return r.out[0] == y || (!y->alive && fl(y).last_reader == static_cast<int64_t>(j));
  };
  Rec f;
  f.op = c.op;
  f.in = c.in;
  int64_t epi = 0;
  size_t k = head + 1;
  const bool floating = yd->dtype == DType::F32 || yd->dtype == DType::F64;
  // A per-channel operand of the result (one value per channel, any other dims 1), as the
  // convolution's [O] input.
  auto per_channel = [&](const ir::TensorDesc& d, ir::TensorDesc& as) {
    const size_t R = yd->shape.size(), r = d.shape.size();
    if (d.dtype != yd->dtype || r > R || R < 2 || R - r > 1) return false;
    const size_t cd = 1 - (R - r);  // the channel dim in d
    for (size_t q = 0; q < r; ++q)
      if (q != cd && d.shape[q] != 1) return false;
    if (d.shape[cd] != yd->shape[1]) return false;
    as.dtype = d.dtype;
    as.shape = Shape{d.shape[cd]};
    as.strides = Strides{d.strides[cd]};
    as.offset = d.offset;
    return true;
  };
  // Mul by a per-channel scale, then Add of a per-channel shift.
  for (OpKind kind : {OpKind::Mul, OpKind::Add}) {
    if (k >= order.size() || !floating) break;
    const Rec& a = s[order[k]];
    if (a.op.kind != kind || a.in.size() != 2 || a.in[0] == a.in[1]) continue;
    const size_t arg = a.in[0] == y ? 0 : 1, other = 1 - arg;
    ir::TensorDesc as;
    if (!sole_reader(order[k], a, arg) || !per_channel(a.op.inputs[other], as)) continue;
    f.in.push_back(a.in[other]);
    f.op.inputs.push_back(as);
    epi |= kind == OpKind::Mul ? ir::kConvScale : ir::kConvShift;
    y = a.out[0];
    yd = &a.op.outputs[0];
    ++k;
  }
  if (k < order.size() && floating) {
    const Rec& a = s[order[k]];
    if (a.op.kind == OpKind::Add && a.in.size() == 2 && a.in[0] != a.in[1]) {
      const size_t arg = a.in[0] == y ? 0 : 1, other = 1 - arg;
      const ir::TensorDesc& rd = a.op.inputs[other];
      if (sole_reader(order[k], a, arg) && rd.shape == yd->shape && rd.dtype == yd->dtype && a.out[0] != a.in[other]) {
        f.in.push_back(a.in[other]);
        f.op.inputs.push_back(rd);
        epi |= ir::kConvResidual;
        y = a.out[0];
        yd = &a.op.outputs[0];
        ++k;
      }
    }
  }
  if (k < order.size()) {
    const Rec& r = s[order[k]];
    if (r.op.kind == OpKind::Relu && sole_reader(order[k], r, 0)) {
      epi |= ir::kConvRelu;
      y = r.out[0];
      yd = &r.op.outputs[0];
      ++k;
    } else if (r.op.kind == OpKind::Clamp && floating && sole_reader(order[k], r, 0)) {
      // Bounds as the Clamp kernel reads them (a missing one infinite); min(max(x, lo), hi) is hi
      // everywhere when lo > hi, which the epilogue's clamp gives with lo = hi.
      const ir::ClampAttrs c = ir::ClampAttrs::decode(r.op);
      double lo = c.has_min ? c.min : -INFINITY, hi = c.has_max ? c.max : INFINITY;
      if (lo > hi) lo = hi;
      f.op.attrs.reals.clear();
      f.op.attrs.reals.push_back(lo);
      f.op.attrs.reals.push_back(hi);
      epi |= ir::kConvClamp;
      y = r.out[0];
      yd = &r.op.outputs[0];
      ++k;
    }
  }
  if (epi == 0) return 0;
  for (Buf* b : f.in)
    if (b == y) return 0;  // written in place: the convolution would overwrite what it reads
  f.op.attrs.ints.push_back(epi);
  f.op.outputs[0] = *yd;
  f.out.push_back(y);
  if (!inner_->supports(f.op)) return 0;  // the epilogue is an optional capability (ops.def)
  if (debug_on()) {
    std::vector<const char*> parts;  // "a", "a and b", "a, b and c"
    for (auto [bit, name] : {std::pair<int64_t, const char*>{ir::kConvScale, "per-channel Mul"},
                             {ir::kConvShift, "per-channel Add"},
                             {ir::kConvResidual, "residual Add"},
                             {ir::kConvRelu, "Relu"},
                             {ir::kConvClamp, "Clamp"}})
      if (epi & bit) parts.push_back(name);
    std::string what;
    for (size_t q = 0; q < parts.size(); ++q)
      what += (q == 0 ? "" : q + 1 == parts.size() ? " and " : ", ") + std::string(parts[q]);
    dbg("  Conv with its " + what + " fused " + desc_str(c.op.outputs[0]));
  }
  bump(&Stats::epilogues);
  bump(&Stats::conv_epilogue_ops, static_cast<int64_t>(k - head - 1));
  run_single(f.op, f);
  for (size_t q = head; q < k; ++q) release(s, order[q]);
  return k - head;
}

/// Cuts a group from order[start]: steps join while they can; an op that cannot join but is
/// independent of the group (hoistable) is set aside in `hoisted` and the group goes on past it
/// (within the look-ahead bounds, unless `hoist` is false); anything else ends the group.
/// Returns the first position of `order` not consumed.
size_t FusionBackend::cut_group(const std::vector<Rec>& s, const std::vector<size_t>& order, size_t start, Group& g,
                                std::vector<size_t>& hoisted, std::string& why, bool hoist) {
  // Bounds on the look-ahead: ops set aside in all, and in a row since the last one joined.
  constexpr size_t kMaxHoisted = 32, kMaxHoistedRun = 12;
  ++g_gepoch;
  size_t end = start + 1;
  size_t run = 0;  // ops set aside since the last step joined
  if (!try_add_step(s, order[start], g, why)) return end;
  for (; end < order.size(); ++end) {
    const size_t j = order[end];
    std::string w1, w2;
    if (try_add_step(s, j, g, w1)) {
      run = 0;
      continue;
    }
    if (try_tail(s, j, g, w2)) return end + 1;
    // A convolution is not set aside: it may take an epilogue once it reaches the head.
    if (hoist && hoisted.size() < kMaxHoisted && run < kMaxHoistedRun && hoistable(s[j]) && !is_conv_anchor(s[j].op)) {
      hoisted.push_back(j);
      ++run;
      continue;
    }
    if (debug_on())
      dbg("  group ends before " + std::string(ir::op_name(s[j].op.kind)) + ": " + (w2.empty() ? w1 : w2));
    break;
  }
  return end;
}

/// Whether group g can run as the epilogue of the product at stream index i, row block by row
/// block: the result is large (kEpilogueMinBytes), g covers the product's elements, reads the product only element for
/// element (the identity view of the whole result) and writes none of the product's inputs; a row op closing g reduces
/// at most one row of the product at a time.
bool FusionBackend::epilogue_fits(const std::vector<Rec>& s, size_t i, const Group& g) const {
  const Rec& mm = s[i];
  const ir::TensorDesc& c = mm.op.outputs[0];
  if (g.steps.empty() || shape_numel(g.S) != c.numel() ||
      c.numel() * static_cast<int64_t>(dtype_size(c.dtype)) < exec_->epilogue_min_bytes())
    return false;
  Buf* out = mm.out[0];
  bool reads = false;
  // Writing the product's own result is fine (element for element, in its block); writing an
  // input of the product is not (later blocks still read it).
  auto touches_inputs = [&](const Rec& r) {
    for (Buf* b : r.out)
      if (std::find(mm.in.begin(), mm.in.end(), b) != mm.in.end()) return true;
    return false;
  };
  for (size_t k : g.steps) {
    const Rec& r = s[k];
    if (touches_inputs(r)) return false;
    for (size_t q = 0; q < r.in.size(); ++q) {
      if (r.in[q] != out) continue;
      if (!is_full_contiguous(r.op.inputs[q], g.S)) return false;
      reads = true;
    }
  }
  if (g.tail >= 0) {
    const Rec& t = s[static_cast<size_t>(g.tail)];
    if (touches_inputs(t)) return false;
    for (size_t q = 1; q < t.in.size(); ++q)
      if (t.in[q] == out) return false;
    int64_t rowlen = 1;
    for (size_t q = g.S.size() - static_cast<size_t>(row_dims(t.op)); q < g.S.size(); ++q) rowlen *= g.S[q];
    if (c.shape[2] % rowlen != 0) return false;
  }
  return reads;
}

void FusionBackend::run_ops(const std::vector<Rec>& s, std::vector<size_t> order) {
  // `order`: live stream indices, ascending. Each round cuts a group from the front: steps join
  // while they can; an op that cannot join but is independent of the group (hoistable) is set
  // aside and runs, with the other set-aside ops and in their order, before the group, so the
  // group can go on past it (a per-channel coefficient computed between two full-size steps).
  // Anything else ends the group (cut_group).
  auto release_group = [&](const Group& g) {
    for (size_t q : g.steps) release(s, q);
    if (g.tail >= 0) release(s, static_cast<size_t>(g.tail));
  };
  auto run_alone = [&](size_t i, const std::string& why) {
    if (debug_on())
      dbg("  alone: " + std::string(ir::op_name(s[i].op.kind)) + " " + desc_str(s[i].op.outputs[0]) +
          (why.empty() ? "" : " (" + why + ")"));
    bump(&Stats::single_ops);
    run_single(s[i].op, s[i]);
    release(s, i);
  };
  // A group cut after a product whose epilogue it could not be: the next round starts there
  // and takes it as cut (order[cut.start] onwards, while `order` is unchanged).
  struct Cut {
    size_t start = 0, end = 0;
    Group g;
    std::vector<size_t> hoisted;
    std::string why;
  };
  std::optional<Cut> precut;
  size_t head = 0;
  while (head < order.size()) {
    const size_t i = order[head];
    if (const size_t n = try_conv_epilogue(s, order, head)) {
      head += n;
      continue;
    }
    if (gather_conv_chain(s, order, head)) {  // order[head] is now the first op moved ahead of it
      precut.reset();
      continue;
    }
    // A row op alone at the head, and the groups reading its result row by row (rows.cpp).
    if (is_row_kind(s[i].op.kind)) {
      if (const size_t end = try_row_pipeline(s, order, head, nullptr, head + 1)) {
        order.erase(order.begin(), order.begin() + static_cast<ptrdiff_t>(end));
        head = 0;
        precut.reset();
        continue;
      }
    }
    if (head + 1 < order.size() &&
        (is_matmul_anchor(s[i].op) || (exec_->conv_products() && is_conv_product(s[i].op)))) {
      // The group after a product: when it reads the product only element for element, the
      // product runs in row blocks, each followed by the group over the same rows.
      Cut c;
      c.start = head + 1;
      c.end = cut_group(s, order, c.start, c.g, c.hoisted, c.why);
      if (c.hoisted.empty() && !c.g.long_tail && epilogue_fits(s, i, c.g)) {
        bump(&Stats::epilogues);
        run_group(s, c.g, &s[i]);
        release(s, i);
        release_group(c.g);
        order.erase(order.begin(), order.begin() + static_cast<ptrdiff_t>(c.end));
        head = 0;
        precut.reset();
        continue;
      }
      run_alone(i, c.hoisted.empty() ? "" : "the group after it sets ops aside");
      ++head;
      precut = std::move(c);
      continue;
    }
    Group g;
    std::vector<size_t> hoisted, rest;
    std::string why;
    size_t end;
    if (precut && precut->start == head) {  // cut already, after the product before it
      g = std::move(precut->g);
      hoisted = std::move(precut->hoisted);
      why = std::move(precut->why);
      end = precut->end;
    } else {
      end = cut_group(s, order, head, g, hoisted, why);
    }
    precut.reset();
    if (g.steps.size() + (g.tail >= 0 ? 1 : 0) >= 2 && shape_numel(g.S) > 0) {
      // A group closed by a row op, and the groups reading its result row by row (rows.cpp).
      if (hoisted.empty() && g.tail >= 0) {
        if (const size_t pend = try_row_pipeline(s, order, head, &g, end)) {
          order.erase(order.begin(), order.begin() + static_cast<ptrdiff_t>(pend));
          head = 0;
          continue;
        }
      }
      if (!hoisted.empty()) {
        // Hoisted ops were checked against the group up to their own position only; ops after
        // them that joined the group may read their results, which is why they run first.
        // Set-aside ops after the group's last member stay in the stream.
        const size_t gend = g.tail >= 0 ? static_cast<size_t>(g.tail) : g.steps.back();
        std::vector<size_t> before;
        for (size_t q : hoisted) (q < gend ? before : rest).push_back(q);
        if (!before.empty()) {
          if (debug_on()) dbg("  " + std::to_string(before.size()) + " independent ops run before the group");
          // The group reads after all of them now: values it takes from them must be stored.
          auto mark = [&](size_t q) {
            for (Buf* b : s[q].in) fl(b).last_reader = std::numeric_limits<int64_t>::max();
          };
          for (size_t q : g.steps) mark(q);
          if (g.tail >= 0) mark(static_cast<size_t>(g.tail));
          run_ops(s, std::move(before));
        }
      }
      run_group(s, g);
      release_group(g);
      // What remains: set-aside ops after the group's end, then everything not reached.
      rest.insert(rest.end(), order.begin() + static_cast<ptrdiff_t>(end), order.end());
      order = std::move(rest);
      head = 0;
    } else {
      run_alone(i, why);
      ++head;
    }
  }
}

// ---- public entry points -----------------------------------------------------------------------

namespace {
std::mutex g_reg_mu;
std::map<Backend*, FusionBackend*>& registry() {
  static auto* m = new std::map<Backend*, FusionBackend*>();  // never destroyed
  return *m;
}
}  // namespace

Backend* fusion_backend(Backend* inner) {
  std::lock_guard<std::mutex> lock(g_reg_mu);
  FusionBackend*& b = registry()[inner];
  if (!b) b = new FusionBackend(inner);
  return b;
}

bool is_fusion(const Backend* b) { return dynamic_cast<const FusionBackend*>(b) != nullptr; }

bool enabled() {
  int v = g_enabled.load();
  if (v < 0) {
    const char* e = std::getenv("KILN_FUSION");
    v = (e && std::strcmp(e, "0") == 0) ? 0 : 1;
    g_enabled.store(v);
  }
  return v == 1;
}

void set_enabled(bool on) {
  {
    std::lock_guard<std::mutex> lock(g_reg_mu);
    for (auto& [inner, f] : registry()) f->flush_all("set_enabled");
  }
  g_enabled.store(on ? 1 : 0);
}

bool program_enabled() {
  int v = g_program.load();
  if (v < 0) {
    const char* e = std::getenv("KILN_FUSION_PROGRAM");
    v = e && std::strcmp(e, "0") == 0 ? 0 : 1;
    g_program.store(v);
  }
  return v != 0;
}

void set_program_enabled(bool on) { g_program.store(on ? 1 : 0); }

namespace {
/// An element count set by the environment variable `name` on first use (default def), then by
/// its setter (-1 in `slot`: not read yet).
int64_t env_count(std::atomic<int64_t>& slot, const char* name, int64_t def) {
  int64_t v = slot.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv(name);
    v = e && *e ? std::max<int64_t>(0, std::atoll(e)) : def;
    slot.store(v, std::memory_order_relaxed);
  }
  return v;
}
}  // namespace

int64_t small_limit() { return env_count(g_small, "KILN_FUSION_SMALL", kDefaultSmall); }

void set_small_limit(int64_t elements) {
  {
    std::lock_guard<std::mutex> lock(g_reg_mu);
    for (auto& [inner, f] : registry()) f->flush_all("set_small_limit");
  }
  g_small.store(std::max<int64_t>(0, elements), std::memory_order_relaxed);
}

int64_t jit_min_elements() { return env_count(g_jit_min, "KILN_FUSION_JIT_MIN", kDefaultJitMin); }

void set_jit_min_elements(int64_t elements) {
  g_jit_min.store(std::max<int64_t>(0, elements), std::memory_order_relaxed);
}

// The counters are bumped with relaxed atomic adds (no lock per recorded op) and read field by
// field the same way.
#define KILN_FUSION_STATS(X) \
  X(recorded)                \
  X(eager)                   \
  X(dead)                    \
  X(fused_groups)            \
  X(program_groups)          \
  X(post_steps)              \
  X(compiled_groups)         \
  X(fused_ops)               \
  X(single_ops)              \
  X(flushes)                 \
  X(plans_built)             \
  X(plan_hits)               \
  X(intermediates_elided)    \
  X(epilogues) X(conv_epilogue_ops) X(small_direct) X(row_pipelines) X(pipeline_column_sums) X(long_reductions)
Stats stats() {
  Stats s;
#define KILN_LOAD(f) s.f = counter_load(g_stats.f);
  KILN_FUSION_STATS(KILN_LOAD)
#undef KILN_LOAD
  return s;
}
void reset_stats() {
#define KILN_ZERO(f) counter_store(g_stats.f, 0);
  KILN_FUSION_STATS(KILN_ZERO)
#undef KILN_ZERO
}
#undef KILN_FUSION_STATS

}  // namespace fusion

// ---- Device entry points -------------------------------------------------------------------------

Device Device::fusion() const {
  if (has_fusion()) return *this;
  return with_layer(*this, Layer::Fusion, [](Backend* inner, const void*) { return fusion::fusion_backend(inner); });
}

Device Device::without_fusion() const { return with_layer(*this, Layer::Fusion, nullptr); }

bool Device::has_fusion() const { return find_layer(*this, Layer::Fusion) != nullptr; }

}  // namespace kiln
