// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the Index family (ops.def), written with public ops so they are
// differentiable themselves (Note [Autodiff design] in src/autodiff/graph.h). The formulas are
// PyTorch's (derivatives.yaml and scatter_reduce_backward): gathers scatter-add their gradient
// back, overwrites zero the gradient of what they overwrote, and scatter's amax/amin split the
// gradient evenly among the tied extremes.
#include <string>
#include <vector>

#include "autodiff/rules.h"
#include "ir/attrs.h"
#include "kiln/kiln.h"

namespace kiln::autodiff {

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
void rule(ir::OpKind k, uint8_t save, GradFn fn) { set_rule(k, GradRule{std::move(fn), save, true}); }
/// A rule that keeps only the index input (input 1): the tensor read or written into is not
/// kept, so writing into it later (slice assignment after a read) leaves the node valid.
void index_rule(ir::OpKind k, GradFn fn) {
  GradRule r{std::move(fn), kSaveInputs, true};
  r.input_mask = 1u << 1;
  set_rule(k, std::move(r));
}

const Shape& in_shape(C c, size_t i) { return c.op.inputs[i].shape; }
TensorOptions like(const Tensor& t) { return TensorOptions{.dtype = t.dtype(), .device = t.device()}; }

/// The index input as a flat i64 tensor with negative entries wrapped when the op allows them
/// (ints[1] = wrap) for a dim of size n.
Tensor flat_index(C c, int64_t n) {
  Tensor idx = c.inputs[1].reshape({-1});
  const bool wrap = ir::IndexAttrs::decode(c.op).wrap;
  return wrap ? where(lt(idx, 0), idx + n, idx) : idx;
}

/// The size of dim d of input i (1 for a 0-d input).
int64_t dim_size(C c, size_t i, int64_t d) {
  const Shape& s = in_shape(c, i);
  return s.empty() ? 1 : s[static_cast<size_t>(d)];
}

/// Scatter's src is read only at index's positions: the leading index-shaped block of src.
Tensor src_block(const Tensor& src, const Shape& index_shape) {
  Tensor r = src;
  for (int64_t k = 0; k < src.dim() && k < static_cast<int64_t>(index_shape.size()); ++k)
    if (r.size(k) != index_shape[static_cast<size_t>(k)]) r = r.narrow(k, 0, index_shape[static_cast<size_t>(k)]);
  return r;
}

/// g (index-shaped) zero-padded to src's shape (the inverse of src_block).
Tensor to_src(const Tensor& g, const Shape& src_shape) {
  if (g.shape() == src_shape) return g;
  if (src_shape.empty() || g.dim() == 0) return g.reshape(src_shape);
  Shape pads;
  for (int64_t k = g.dim() - 1; k >= 0; --k) {
    pads.push_back(0);
    pads.push_back(src_shape[static_cast<size_t>(k)] - g.size(k));
  }
  return pad(g, pads);
}

/// Scatter (x, index, src) with ints = {dim, reduce, include_self}; reduce 0 none, 1 sum,
/// 2 prod, 3 mean, 4 amax, 5 amin.
V scatter_grad(C c) {
  const auto [dim, reduce, include_self] = ir::ScatterAttrs::decode(c.op);
  const Tensor& g = c.grads[0];
  const Tensor& index = c.inputs[1];
  const Shape& src_shape = in_shape(c, 2);
  Tensor gx, gs;  // gradients of x and of the index-shaped block of src
  if (reduce == 0) {
    if (c.needs(0)) gx = scatter(g, dim, index, Scalar(0));
    if (c.needs(2)) gs = gather(g, dim, index);
  } else if (reduce == 1) {
    if (c.needs(0)) gx = include_self ? g : scatter(g, dim, index, Scalar(0));
    if (c.needs(2)) gs = gather(g, dim, index);
  } else if (reduce == 2) {
    const Tensor& x = c.inputs[0];
    Tensor src = src_block(c.inputs[2], index.shape());
    const Tensor& result = c.outputs[0];
    const std::string how = "prod";
    if (c.needs(0)) {
      // result / x, with x's zeros replaced by 1 (the product of everything else).
      Tensor x1 = where(eq(x, 0), ones_like(x), x);
      Tensor others = scatter_reduce(x1, dim, index, src, how, include_self);
      gx = g * others / x1;
      if (!include_self) gx = scatter(gx, dim, index, Scalar(0));
    }
    if (c.needs(2)) {
      // A src element that is the only zero of its group gets the product of the others;
      // other zeros (two or more in the group) get 0; non-zeros get result / src.
      Tensor src_zero = eq(src, 0);
      Tensor nzeros = gather(scatter_add(zeros_like(x), dim, index, src_zero.to(x.dtype())), dim, index);
      Tensor single = logical_and(src_zero, eq(nzeros, 1));
      Tensor src1 = where(single, ones_like(src), src);
      Tensor others = scatter_reduce(x, dim, index, src1, how, include_self);
      Tensor at_single = gather(g * others, dim, index);
      Tensor normal = gather(g * result, dim, index) / where(src_zero, ones_like(src), src);
      gs = where(single, at_single, normal);
    }
  } else if (reduce == 3) {
    const Tensor& x = c.inputs[0];
    Tensor n = include_self ? ones_like(x) : zeros_like(x);
    n = scatter_add(n, dim, index, ones(index.shape(), like(x)));
    n = where(eq(n, 0), ones_like(n), n);
    if (c.needs(0)) {
      gx = g / n;
      if (!include_self) gx = scatter(gx, dim, index, Scalar(0));
    }
    if (c.needs(2)) gs = gather(g, dim, index) / gather(n, dim, index);
  } else {
    // amax / amin: split evenly among the elements (of x, when included, and of src) equal to
    // the result.
    const Tensor& x = c.inputs[0];
    Tensor src = src_block(c.inputs[2], index.shape());
    const Tensor& result = c.outputs[0];
    Tensor value = gather(result, dim, index);
    Tensor self_is = eq(x, result).to(x.dtype());
    if (!include_self) self_is = scatter(self_is, dim, index, Scalar(0));
    Tensor src_is = eq(src, value).to(x.dtype());
    Tensor count = scatter_add(self_is, dim, index, src_is);
    Tensor share = g / where(eq(count, 0), ones_like(count), count);
    if (c.needs(0)) gx = self_is * share;
    if (c.needs(2)) gs = src_is * gather(share, dim, index);
  }
  return {gx, Tensor(), gs.defined() ? to_src(gs, src_shape) : Tensor()};
}
}  // namespace

void register_index_grads() {
  using K = ir::OpKind;
  // IndexSelect (x, index) ints = {dim, wrap}: the gradient added back at the picked rows.
  index_rule(K::IndexSelect, [](C c) -> V {
    const Shape& xs = in_shape(c, 0);
    const Tensor& g = c.grads[0];
    if (xs.empty()) return {g.sum().reshape({})};
    const int64_t dim = ir::IndexAttrs::decode(c.op).dim;
    Tensor idx = flat_index(c, dim_size(c, 0, dim));
    Shape gs = xs;
    gs[static_cast<size_t>(dim)] = idx.numel();
    return {index_add(zeros(xs, like(g)), dim, idx, g.reshape(gs))};
  });
  // Gather (x, index) ints = {dim}: scatter-add back.
  index_rule(K::Gather, [](C c) -> V {
    const Shape& xs = in_shape(c, 0);
    const Tensor& g = c.grads[0];
    if (xs.empty()) return {g.sum().reshape({})};
    return {scatter_add(zeros(xs, like(g)), ir::IndexAttrs::decode(c.op).dim, c.inputs[1], g)};
  });
  rule(K::Scatter, kSaveBoth, scatter_grad);
  // IndexAdd (x, index, src) ints = {dim, wrap}, reals = {alpha}.
  index_rule(K::IndexAdd, [](C c) -> V {
    const Tensor& g = c.grads[0];
    Tensor gs;
    if (c.needs(2)) {
      const Shape& xs = in_shape(c, 0);
      const ir::IndexAttrs a = ir::IndexAttrs::decode(c.op);
      const int64_t dim = a.dim;
      const double alpha = a.alpha;
      Tensor picked = xs.empty() ? g.reshape({1}) : index_select(g, dim, flat_index(c, dim_size(c, 0, dim)));
      gs = (alpha == 1.0 ? picked : picked * alpha).reshape(in_shape(c, 2));
    }
    return {c.needs(0) ? g : Tensor(), Tensor(), gs};
  });
  // IndexCopy (x, index, src) ints = {dim, wrap}: x's overwritten rows get no gradient.
  index_rule(K::IndexCopy, [](C c) -> V {
    const Tensor& g = c.grads[0];
    const Shape& xs = in_shape(c, 0);
    const int64_t dim = ir::IndexAttrs::decode(c.op).dim;
    Tensor gx, gs;
    if (xs.empty()) {
      if (c.needs(0)) gx = zeros_like(g);
      if (c.needs(2)) gs = g.reshape(in_shape(c, 2));
      return {gx, Tensor(), gs};
    }
    Tensor idx = flat_index(c, dim_size(c, 0, dim));
    if (c.needs(0)) gx = index_fill(g, dim, idx, Scalar(0));
    if (c.needs(2)) gs = index_select(g, dim, idx).reshape(in_shape(c, 2));
    return {gx, Tensor(), gs};
  });
}

}  // namespace kiln::autodiff
