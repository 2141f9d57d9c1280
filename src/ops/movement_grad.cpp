// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the Movement family (ops.def), written with public ops so they are
// differentiable themselves (Note [Autodiff design] in src/autodiff/graph.h).
#include <algorithm>
#include <vector>

#include "autodiff/rules.h"
#include "ir/attrs.h"
#include "kiln/kiln.h"

namespace kiln::autodiff {

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
void rule(ir::OpKind k, uint8_t save, GradFn fn) { set_rule(k, GradRule{std::move(fn), save, true}); }

/// For a reflect (1), replicate (2) or circular (3) pad of a dim of size n by (lo, hi): the
/// input position each output position reads.
Tensor source_positions(int64_t mode, int64_t n, int64_t lo, int64_t hi, const Device& dev) {
  std::vector<int64_t> pos;
  pos.reserve(static_cast<size_t>(n + lo + hi));
  for (int64_t o = 0; o < n + lo + hi; ++o) {
    int64_t p = o - lo;
    if (mode == 1) {
      if (p < 0) p = -p;
      if (p >= n) p = 2 * (n - 1) - p;
    } else if (mode == 2) {
      p = std::clamp<int64_t>(p, 0, n - 1);
    } else {
      p = ((p % n) + n) % n;
    }
    pos.push_back(p);
  }
  return tensor(pos, {static_cast<int64_t>(pos.size())}, dev);
}
}  // namespace

void register_movement_grads() {
  using K = ir::OpKind;
  // Cat along ints[0]: each input gets its slice of the gradient.
  rule(K::Cat, kSaveNothing, [](C c) -> V {
    const int64_t dim = ir::ScanAttrs::decode(c.op).dim;
    V out;
    int64_t at = 0;
    for (size_t i = 0; i < c.op.inputs.size(); ++i) {
      const int64_t n = c.op.inputs[i].shape[static_cast<size_t>(dim)];
      out.push_back(c.needs(i) ? c.grads[0].narrow(dim, at, n) : Tensor());
      at += n;
    }
    return out;
  });
  // Pad ints = {mode, pads...} ({lo, hi} pairs from the last dim). Constant mode: padding with
  // the negated amounts crops the padding away (and zero-pads what a negative pad cropped).
  // The other modes read input positions through a per-dim map, so the gradient is that map's
  // adjoint: an index_add per padded dim.
  rule(K::Pad, kSaveNothing, [](C c) -> V {
    const ir::PadAttrs pa = ir::PadAttrs::decode(c.op);
    const int64_t mode = pa.mode;
    const Shape& in = c.op.inputs[0].shape;
    Tensor g = c.grads[0];
    if (mode == 0) {
      Shape neg;
      for (int64_t p : pa.pads) neg.push_back(-p);
      return {pad(g, neg)};
    }
    const int64_t rank = static_cast<int64_t>(in.size());
    for (size_t i = 0; i < pa.npad(); ++i) {
      const int64_t lo = pa.pads[2 * i], hi = pa.pads[2 * i + 1];
      if (lo == 0 && hi == 0) continue;
      const int64_t d = rank - 1 - static_cast<int64_t>(i);
      const int64_t n = in[static_cast<size_t>(d)];
      Shape s = g.shape();
      s[static_cast<size_t>(d)] = n;
      g = index_add(zeros(s, TensorOptions{.dtype = g.dtype(), .device = g.device()}), d,
                    source_positions(mode, n, lo, hi, g.device()), g);
    }
    return {g};
  });
}

}  // namespace kiln::autodiff
