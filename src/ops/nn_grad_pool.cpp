// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the Pool family (ops.def), written with public ops so they are
// differentiable themselves (Note [Autodiff design] in src/autodiff/graph.h).
//
// Note [Pool gradients]
// ~~~~~~~~~~~~~~~~~~~~~
// MaxPool / AdaptiveMaxPool: the gradient goes to the argmax of each window, a scatter_add of
// the output gradient through the saved indices into each flattened (n, c) plane (windows that
// overlap and pick the same element add up, as PyTorch). The frontends always ask for the
// indices when the input is tracked (src/ops/pool.cpp), so the rule only keeps the outputs.
// When the windows cannot overlap (every dim: stride >= dilation * (kernel - 1) + 1 for
// MaxPool, in % out == 0 for AdaptiveMaxPool) the indices are distinct within a plane, so the
// scatter_add into zeros is exactly a MaxUnpool of the gradient (each plane zeroed while in
// cache and written once: no full-size fill, no index check pass); its own rule (a gather)
// keeps it differentiable.
// MaxUnpool: the adjoint, a gather of the gradient at the indices.
// AvgPool: a transposed convolution ("col2im") of the output gradient divided by each window's
// divisor, with a kernel of ones per channel (groups = C), no padding, and the padded border
// sliced off; the divisor (count_include_pad, ceil_mode clipping, divisor_override) is a
// product of one factor per spatial dim, built on the host as a small constant tensor.
// AdaptiveAvgPool: separable too: per spatial dim a constant [out, in] matrix with 1/len over
// each window, applied to the gradient with matmul. Every piece is a differentiable op
// (scatter/gather, ConvTranspose, MatMul), so gradients of gradients work.
#include <algorithm>

#include "autodiff/rules.h"
#include "ir/attrs.h"
#include "kiln/kiln.h"
#include "ops/dispatch.h"

namespace kiln::autodiff {

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
namespace F = kiln::nn::functional;
void rule(ir::OpKind k, uint8_t save, GradFn fn) { set_rule(k, GradRule{std::move(fn), save, true}); }

int64_t prod(const Shape& s, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < s.size(); ++i) p *= s[i];
  return p;
}

/// Gradient of a max pool: g [N, C, *out] scattered through indices [N, C, *out] into a zero
/// input [N, C, *in].
Tensor scatter_through(const Tensor& g, const Tensor& indices, const Shape& in, const char* op) {
  KILN_CHECK(indices.defined() && indices.shape() == g.shape(), op,
             "backward needs the argmax indices, but the op was recorded without them (with_indices = 0)");
  const int64_t N = in[0], Ch = in[1];
  Tensor acc = zeros({N, Ch, prod(in, 2)}, TensorOptions{.dtype = g.dtype(), .device = g.device()});
  Tensor r = scatter_add(acc, 2, indices.reshape({N, Ch, prod(g.shape(), 2)}), g.reshape({N, Ch, prod(g.shape(), 2)}));
  return r.reshape(in);
}

/// The same when every input element is the argmax of at most one window (windows that cannot
/// overlap): a MaxUnpool of g [N, C, *out] through the indices to [N, C, *in].
Tensor unpool_through(const Tensor& g, const Tensor& indices, const Shape& in, const char* op) {
  KILN_CHECK(indices.defined() && indices.shape() == g.shape(), op,
             "backward needs the argmax indices, but the op was recorded without them (with_indices = 0)");
  const auto nsp = static_cast<int64_t>(in.size()) - 2;
  ir::Op u = detail::make_op(ir::OpKind::MaxUnpool);
  ir::PoolAttrs{.nsp = nsp, .out = Dims(in.begin() + 2, in.end())}.encode(u);
  return detail::run1(op, u, {g, indices});
}

/// Whether no two windows of a MaxPool (attrs as ops.def) share an input element.
bool max_pool_disjoint(const ir::PoolAttrs& at) {
  for (int64_t i = 0; i < at.nsp; ++i)
    if (at.stride[i] < at.dilation[i] * (at.kernel[i] - 1) + 1) return false;
  return true;
}

/// Whether no two windows of an AdaptiveMaxPool from `in` share an input element (each output
/// size divides its input size).
bool adaptive_disjoint(const ir::PoolAttrs& at, const Shape& in) {
  for (int64_t i = 0; i < at.nsp; ++i) {
    const int64_t o = at.out[i];
    if (o <= 0 || in[static_cast<size_t>(2 + i)] % o != 0) return false;
  }
  return true;
}

/// A constant f64 host vector as a tensor of dtype dt on device d.
Tensor constant(const std::vector<double>& v, const Shape& s, DType dt, const Device& d) {
  return tensor(v, s, d).to(dt);
}

/// Shape [1, 1, ..., n, ..., 1] (rank 2 + nsp) with n at spatial dim i.
Shape spatial_axis(int64_t nsp, int64_t i, int64_t n) {
  Shape s(static_cast<size_t>(2 + nsp), int64_t{1});
  s[static_cast<size_t>(2 + i)] = n;
  return s;
}

Tensor avg_pool_grad(C c) {
  const ir::PoolAttrs pa = ir::PoolAttrs::decode(c.op);
  const int64_t nsp = pa.nsp;
  const Dims* blocks[3] = {&pa.kernel, &pa.stride, &pa.padding};
  auto at = [&](size_t block, int64_t i) { return (*blocks[block])[i]; };
  // ceil_mode is already reflected in the output size.
  const bool count_pad = pa.count_include_pad;
  const int64_t divisor = pa.divisor;
  const Shape& in = c.op.inputs[0].shape;
  const Shape& out = c.op.outputs[0].shape;
  Tensor g = c.grads[0];
  const DType dt = g.dtype();
  // Divide by each window's divisor: one factor per spatial dim.
  if (divisor != 0) {
    g = g * (1.0 / static_cast<double>(divisor));
  } else {
    for (int64_t i = 0; i < nsp; ++i) {
      const int64_t k = at(0, i), s = at(1, i), p = at(2, i), L = in[2 + i], O = out[2 + i];
      std::vector<double> f(static_cast<size_t>(O));
      for (int64_t j = 0; j < O; ++j) {
        int64_t start = j * s - p, end = std::min(start + k, L + p);
        const int64_t pool = end - start;
        start = std::max<int64_t>(start, 0);
        end = std::min(end, L);
        const int64_t size = count_pad ? pool : end - start;
        f[static_cast<size_t>(j)] = size > 0 ? 1.0 / static_cast<double>(size) : 0.0;
      }
      g = g * constant(f, spatial_axis(nsp, i, O), dt, c.device());
    }
  }
  // col2im: a transposed convolution with ones per channel over the padded input, border cut.
  const int64_t Ch = in[1];
  Shape ws{Ch, 1};
  Dims k, s, op_pad;
  for (int64_t i = 0; i < nsp; ++i) {
    k.push_back(at(0, i));
    s.push_back(at(1, i));
    ws.push_back(at(0, i));
    const int64_t full = (out[2 + i] - 1) * at(1, i) + at(0, i), need = in[2 + i] + at(2, i);
    op_pad.push_back(std::max<int64_t>(0, need - full));
  }
  Tensor w = ones(ws, TensorOptions{.dtype = dt, .device = c.device()});
  const F::ConvTransposeOptions o{.stride = s, .padding = 0, .output_padding = op_pad, .groups = Ch};
  Tensor r = nsp == 1   ? F::conv_transpose1d(g, w, {}, o)
             : nsp == 2 ? F::conv_transpose2d(g, w, {}, o)
                        : F::conv_transpose3d(g, w, {}, o);
  for (int64_t i = 0; i < nsp; ++i) r = r.narrow(2 + i, at(2, i), in[2 + i]);
  return r;
}

Tensor adaptive_avg_pool_grad(C c) {
  const ir::PoolAttrs pa = ir::PoolAttrs::decode(c.op);
  const int64_t nsp = pa.nsp;
  const Shape& in = c.op.inputs[0].shape;
  Tensor g = c.grads[0];
  const DType dt = g.dtype();
  for (int64_t i = 0; i < nsp; ++i) {
    const int64_t L = in[2 + i], O = pa.out[i], d = 2 + i;
    std::vector<double> a(static_cast<size_t>(O * L), 0.0);  // [O, L]: 1/len over each window
    for (int64_t j = 0; j < O; ++j) {
      const int64_t start = j * L / O, end = ((j + 1) * L + O - 1) / O;
      for (int64_t t = start; t < end; ++t) a[static_cast<size_t>(j * L + t)] = 1.0 / static_cast<double>(end - start);
    }
    Tensor A = constant(a, {O, L}, dt, c.device());
    const int64_t last = g.dim() - 1;
    g = matmul(g.movedim({d}, {last}), A).movedim({last}, {d});
  }
  return g;
}

}  // namespace

void register_nn_pool_grads() {
  using K = ir::OpKind;
  // Note [Pool gradients].
  rule(K::MaxPool, kSaveOutputs, [](C c) -> V {
    const Shape& in = c.op.inputs[0].shape;
    if (max_pool_disjoint(ir::PoolAttrs::decode(c.op)))
      return {unpool_through(c.grads[0], c.outputs[1], in, "max_pool")};
    return {scatter_through(c.grads[0], c.outputs[1], in, "max_pool")};
  });
  rule(K::AdaptiveMaxPool, kSaveOutputs, [](C c) -> V {
    const Shape& in = c.op.inputs[0].shape;
    if (adaptive_disjoint(ir::PoolAttrs::decode(c.op), in))
      return {unpool_through(c.grads[0], c.outputs[1], in, "adaptive_max_pool")};
    return {scatter_through(c.grads[0], c.outputs[1], in, "adaptive_max_pool")};
  });
  rule(K::MaxUnpool, kSaveInputs, [](C c) -> V {
    if (!c.needs(0)) return {Tensor(), Tensor()};
    const Shape& xs = c.op.inputs[0].shape;
    const Tensor& g = c.grads[0];
    const int64_t N = xs[0], Ch = xs[1];
    Tensor r = gather(g.reshape({N, Ch, prod(g.shape(), 2)}), 2, c.inputs[1].reshape({N, Ch, prod(xs, 2)}));
    return {r.reshape(xs), Tensor()};
  });
  rule(K::AvgPool, kSaveNothing, [](C c) -> V { return {avg_pool_grad(c)}; });
  rule(K::AdaptiveAvgPool, kSaveNothing, [](C c) -> V { return {adaptive_avg_pool_grad(c)}; });
}

}  // namespace kiln::autodiff
