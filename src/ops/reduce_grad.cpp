// SPDX-License-Identifier: MIT OR Apache-2.0
// Gradient rules of the Reduce and Scan families (ops.def), written with public ops so they are
// differentiable themselves (Note [Autodiff design] in src/autodiff/graph.h). The formulas are
// PyTorch's (tools/autograd/derivatives.yaml):
//   amax/amin split the gradient evenly among tied extremes; prod and cumprod are exact with zeros
//   (no host read of the values: masks decide per element); std's gradient is 0 where std is 0;
//   cummax/cummin/sort send the gradient to the index each value came from.
#include <vector>

#include "autodiff/rules.h"
#include "ir/attrs.h"
#include "kiln/kiln.h"

namespace kiln::autodiff {

namespace {
using C = const GradContext&;
using V = std::vector<Tensor>;
void rule(ir::OpKind k, uint8_t save, GradFn fn) { set_rule(k, GradRule{std::move(fn), save, true}); }
void nondiff(ir::OpKind k) { set_rule(k, GradRule{{}, kSaveNothing, false}); }

const Shape& in_shape(C c) { return c.op.inputs[0].shape; }

/// The reduced dims of a Reduce op (empty for a 0-d input, where dims = {0}).
Dims reduced_dims(C c) {
  if (in_shape(c).empty()) return {};
  return ir::ReduceAttrs::decode(c.op).dims;
}

/// t (shaped like the op's output) with the reduced dims back as size 1 (keepdim layout), so it
/// broadcasts against the input.
Tensor unreduce(C c, Tensor t) {
  if (ir::ReduceAttrs::decode(c.op).keepdim || in_shape(c).empty()) return t;
  for (auto d : reduced_dims(c)) t = t.unsqueeze(d);
  return t;
}

/// Number of elements each output element reduces.
int64_t reduced_count(C c) {
  int64_t n = 1;
  for (auto d : reduced_dims(c)) n *= in_shape(c)[static_cast<size_t>(d)];
  return n;
}

TensorOptions like(const Tensor& t) { return TensorOptions{.dtype = t.dtype(), .device = t.device()}; }

/// The scan dim of a Scan op, or nullopt for a 0-d input (the op is then the identity-like
/// one-element case).
std::optional<int64_t> scan_dim(C c) {
  if (in_shape(c).empty()) return std::nullopt;
  return ir::ScanAttrs::decode(c.op).dim;
}

/// Reverse cumulative sum along dim: out[i] = sum_{k >= i} t[k].
Tensor rev_cumsum(const Tensor& t, int64_t dim) { return cumsum(t.flip({dim}), dim).flip({dim}); }

/// For each line of x along its last dim, the product of all the other elements of the line:
/// out[i] = prod_{j != i} x[j], exact with zeros (PyTorch's prod_safe_zeros_backward).
Tensor exclusive_prod(const Tensor& x) {
  const int64_t n = x.size(-1);
  Shape one = x.shape();
  one[one.size() - 1] = 1;
  Tensor ones_col = ones(one, like(x));
  Tensor left = cumprod(cat({ones_col, x.narrow(-1, 0, n - 1)}, -1), -1);
  Tensor right = cumprod(cat({ones_col, x.narrow(-1, 1, n - 1).flip({-1})}, -1), -1).flip({-1});
  return left * right;
}

/// Gradient of prod over `dims` (sorted) of x: g (keepdim layout) times the product of the other
/// elements of each reduced group.
Tensor prod_grad(const Tensor& x, const Tensor& g, const Dims& dims) {
  if (x.numel() == 0) return zeros(x.shape(), like(g));
  // Reduced dims last, flattened into one.
  Dims perm, inv(static_cast<size_t>(x.dim()));
  std::vector<bool> red(static_cast<size_t>(x.dim()), false);
  for (auto d : dims) red[static_cast<size_t>(d)] = true;
  Shape kept;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (!red[static_cast<size_t>(i)]) {
      perm.push_back(i);
      kept.push_back(x.size(i));
    }
  for (auto d : dims) perm.push_back(d);
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  Shape flat = kept;
  flat.push_back(-1);
  Tensor xp = x.permute(perm);
  Shape permuted = xp.shape();
  Tensor others = exclusive_prod(xp.reshape(flat));
  Shape gshape = kept;
  gshape.push_back(1);
  Tensor r = g.reshape(gshape) * others;
  return r.reshape(permuted).permute(inv);
}

/// Gradient of cumprod along dim, exact with zeros (first order; see the note in the rule).
Tensor cumprod_grad(const Tensor& x, const Tensor& y, const Tensor& g, int64_t dim) {
  if (x.numel() == 0) return zeros(x.shape(), like(g));
  Tensor is_zero = eq(x, 0);
  // Where x != 0: sum_{k >= i} g[k] y[k] / x[i] (exact, also with zeros elsewhere in the line).
  Tensor safe_x = where(is_zero, ones_like(x), x);
  Tensor normal = rev_cumsum(g * y, dim) / safe_x;
  // At the first zero z of a line: sum_{k >= z} g[k] prod_{j <= k, j != z} x[j], that is the
  // reverse cumsum of g times the cumprod of x with x[z] replaced by 1. Later zeros get 0.
  Tensor first_zero = logical_and(is_zero, eq(cumsum(is_zero, dim), 1));
  Tensor x1 = where(first_zero, ones_like(x), x);
  Tensor at_zero = rev_cumsum(g * cumprod(x1, dim), dim);
  return where(is_zero, where(first_zero, at_zero, zeros_like(at_zero)), normal);
}

void register_reduce_rules() {
  using K = ir::OpKind;
  // Sum over ints[1..] (ints[0] = keepdim): broadcast the gradient back.
  rule(K::Sum, kSaveNothing, [](C c) -> V { return {unreduce(c, c.grads[0]).expand(in_shape(c))}; });
  rule(K::Mean, kSaveNothing, [](C c) -> V {
    return {(unreduce(c, c.grads[0]) / static_cast<double>(reduced_count(c))).expand(in_shape(c))};
  });
  rule(K::Prod, kSaveInputs, [](C c) -> V {
    const Tensor& x = c.inputs[0];
    if (x.dim() == 0) return {c.grads[0]};
    return {prod_grad(x, unreduce(c, c.grads[0]), reduced_dims(c))};
  });
  // amax / amin: the gradient split evenly among the elements equal to the extreme.
  auto extreme = [](C c) -> V {
    const Tensor& x = c.inputs[0];
    Tensor mask = eq(x, unreduce(c, c.outputs[0])).to(x.dtype());
    Tensor count = sum(mask, reduced_dims(c), true);
    return {(unreduce(c, c.grads[0]) / count * mask).expand(in_shape(c))};
  };
  rule(K::Max, kSaveBoth, extreme);
  rule(K::Min, kSaveBoth, extreme);
  // Var (reals = {correction, sqrt}): g * 2 (x - mean) / (N - correction); for std, first
  // g / (2 std), 0 where std is 0.
  rule(K::Var, kSaveBoth, [](C c) -> V {
    const Tensor& x = c.inputs[0];
    const ir::ReduceAttrs ra = ir::ReduceAttrs::decode(c.op);
    const double correction = ra.correction;
    const bool is_std = ra.sqrt;
    const Dims dims = reduced_dims(c);
    Tensor g = unreduce(c, c.grads[0]);
    if (is_std) {
      Tensor s = unreduce(c, c.outputs[0]);
      g = where(eq(s, 0), zeros_like(g), g / (2 * s));
    }
    const double denom = static_cast<double>(reduced_count(c)) - correction;
    return {(g * (2.0 / denom)) * (x - mean(x, dims, true))};
  });
  for (K k : {K::ArgMax, K::ArgMin, K::Any, K::All}) nondiff(k);
}

void register_scan_rules() {
  using K = ir::OpKind;
  rule(K::CumSum, kSaveNothing, [](C c) -> V {
    auto d = scan_dim(c);
    return {d ? rev_cumsum(c.grads[0], *d) : c.grads[0]};
  });
  // CumProd: exact first derivative with any zeros; its own derivative (second order of cumprod)
  // is exact for lines with at most one zero (later zeros get a constant 0 gradient).
  rule(K::CumProd, kSaveBoth, [](C c) -> V {
    auto d = scan_dim(c);
    if (!d) return {c.grads[0]};
    return {cumprod_grad(c.inputs[0], c.outputs[0], c.grads[0], *d)};
  });
  // CumMax / CumMin / Sort: each value's gradient goes to the element it was taken from.
  auto select_back = [](C c) -> V {
    auto d = scan_dim(c);
    if (!d) return {c.grads[0]};
    const Tensor& g = c.grads[0];
    return {scatter_add(zeros(in_shape(c), like(g)), *d, c.outputs[1], g)};
  };
  rule(K::CumMax, kSaveOutputs, select_back);
  rule(K::CumMin, kSaveOutputs, select_back);
  rule(K::Sort, kSaveOutputs, select_back);
  rule(K::Softmax, kSaveOutputs, [](C c) -> V {
    const Tensor& y = c.outputs[0];
    const Tensor& g = c.grads[0];
    auto d = scan_dim(c);
    Dims dims = d ? Dims{*d} : Dims{};
    return {y * (g - sum(g * y, dims, true))};
  });
  rule(K::LogSoftmax, kSaveOutputs, [](C c) -> V {
    const Tensor& y = c.outputs[0];
    const Tensor& g = c.grads[0];
    auto d = scan_dim(c);
    Dims dims = d ? Dims{*d} : Dims{};
    return {g - exp(y) * sum(g, dims, true)};
  });
}
}  // namespace

void register_reduce_grads() {
  register_reduce_rules();
  register_scan_rules();
}

}  // namespace kiln::autodiff
