// SPDX-License-Identifier: MIT OR Apache-2.0
// Convolution frontends: conv1d/2d/3d and conv_transpose1d/2d/3d (Conv / ConvTranspose
// primitives), the torch.nn.grad gradients (ConvWeightGrad, ConvTranspose), and unfold/fold as
// composites (a strided view + copy; index_add).
#include "kiln/nn/functional/conv.h"

#include <algorithm>
#include <array>
#include <sstream>
#include <vector>

#include "core/checked.h"
#include "ir/attrs.h"
#include "kiln/autodiff.h"
#include "ops/conv_epilogue.h"
#include "ops/dispatch.h"
#include "ops/prepared.h"

namespace kiln::detail {
namespace {
/// (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1, the output size of a
/// transposed convolution, in 128 bits; kiln::Error("[api] ...") when it does not fit in int64.
int64_t transposed_size(const char* api, int64_t in, int64_t k, int64_t stride, int64_t padding, int64_t dilation,
                        int64_t output_padding) {
  using I = __int128;
  const I o = (I{in} - 1) * stride - I{2} * padding + I{dilation} * (I{k} - 1) + output_padding + 1;
  KILN_CHECK(o <= INT64_MAX && o >= INT64_MIN, api,
             "output size does not fit in int64 (input size " << in << ", kernel size " << k << ", stride " << stride
                                                              << ", padding " << padding << ", dilation " << dilation
                                                              << ")");
  return static_cast<int64_t>(o);
}
}  // namespace
}  // namespace kiln::detail

namespace kiln::nn::functional {

using detail::checked_add;
using detail::checked_mul;
using detail::transposed_size;

using detail::make_op;
using ir::OpKind;

namespace {

/// "(a x b x c)" as PyTorch prints per-channel sizes.
std::string xs(const Dims& d) {
  std::ostringstream s;
  s << "(";
  for (size_t i = 0; i < d.size(); ++i) s << (i ? " x " : "") << d[i];
  s << ")";
  return s.str();
}

DType check_dtypes(const char* api, const Tensor& input, const Tensor& weight, const Tensor& bias) {
  detail::check_defined(api, input);
  detail::check_defined(api, weight);
  detail::check_same_device(api, input, weight);
  KILN_CHECK(is_floating(input.dtype()), api,
             "expected a floating-point input, got " << dtype_name(input.dtype()).data() << " input of size "
                                                     << input.shape());
  KILN_CHECK(weight.dtype() == input.dtype(), api,
             "input type (" << dtype_name(input.dtype()).data() << ") and weight type ("
                            << dtype_name(weight.dtype()).data() << ") should be the same; convert the input (input.to("
                            << dtype_name(weight.dtype()).data() << ")) or the layer (module.to("
                            << dtype_name(input.dtype()).data() << "))");
  if (bias.defined()) {
    detail::check_same_device(api, input, bias);
    KILN_CHECK(bias.dtype() == input.dtype(), api,
               "input type (" << dtype_name(input.dtype()).data() << ") and bias type ("
                              << dtype_name(bias.dtype()).data() << ") should be the same; convert one, e.g. bias.to("
                              << dtype_name(input.dtype()).data() << ")");
  }
  return input.dtype();
}

/// Batched view of the input ([C, *sp] -> [1, C, *sp]); sets `batched`.
Tensor batch_input(const char* api, const Tensor& input, int64_t nsp, bool& batched) {
  const int64_t r = input.dim();
  KILN_CHECK(r == nsp + 1 || r == nsp + 2, api,
             "expected " << nsp + 1 << "D (unbatched) or " << nsp + 2 << "D (batched) input to " << api
                         << ", but got input of size: " << input.shape());
  batched = r == nsp + 2;
  return batched ? input : input.unsqueeze(0);
}

struct Params {
  Dims stride, padding, dilation;
};

Params expand_params(const char* api, int64_t nsp, const IntList& stride, const IntList& padding,
                     const IntList& dilation, int64_t groups) {
  Params p{stride.expand(nsp, api, "stride"), padding.expand(nsp, api, "padding"),
           dilation.expand(nsp, api, "dilation")};
  for (auto v : p.stride) KILN_CHECK(v > 0, api, "non-positive stride is not supported, got stride " << p.stride);
  for (auto v : p.padding) KILN_CHECK(v >= 0, api, "negative padding is not supported, got padding " << p.padding);
  for (auto v : p.dilation) KILN_CHECK(v > 0, api, "dilation should be greater than zero, got dilation " << p.dilation);
  KILN_CHECK(groups > 0, api, "non-positive groups is not supported, got groups=" << groups);
  return p;
}

/// Keeps op (just run: its operands `in`, its result y) in `keep` when each operand is the
/// source it was taken from, unchanged (the undefined sources have no operand).
template <size_t S>
void keep_if_unchanged(const char* api, const ir::Op& op, const std::vector<Tensor>& in,
                       const std::array<Tensor, S>& sources, const Tensor& y, kiln::detail::PreparedOp* keep,
                       std::span<const int64_t> key) {
  int src[S], n = 0;
  for (size_t s = 0; s < S; ++s) {
    if (!sources[s].defined()) continue;
    if (static_cast<size_t>(n) >= in.size()) return;
    const TensorImpl &a = in[static_cast<size_t>(n)].impl(), &b = sources[s].impl();
    if (a.storage != b.storage || a.offset != b.offset || a.shape != b.shape || a.strides != b.strides) return;
    src[n++] = static_cast<int>(s);
  }
  if (static_cast<size_t>(n) != in.size()) return;
  detail::keep_prepared(keep, api, op, y.device(), sources, std::span<const int>(src, static_cast<size_t>(n)),
                        y.shape(), key);
}

/// The plain Conv op over x, w (and b); kept in `keep` (when given) if x is `input` itself and
/// no operand needed a contiguous copy.
Tensor run_conv_op(const char* api, ir::Op& op, const Tensor& input, const Tensor& x, const Tensor& w, const Tensor& b,
                   kiln::detail::PreparedOp* keep = nullptr, std::span<const int64_t> key = {}) {
  std::vector<Tensor> in{x.contiguous(), w.contiguous()};
  if (b.defined()) in.push_back(b.contiguous());
  Tensor y = detail::run(api, op, x.device(), in)[0];
  if (keep) keep_if_unchanged<3>(api, op, in, {input, w, b}, y, keep, key);
  return y;
}

/// The Conv op (geometry in op) with the epilogue's bits, bounds and inputs (ops.def order: x, w,
/// bias, scale, shift, residual); infer checks their shapes.
/// `input`: the caller's tensor x was taken from (the op is kept only when x is input itself).
Tensor run_epilogue_op(const char* api, ir::Op& op, const Tensor& input, const Tensor& x, const Tensor& w,
                       const Tensor& b, const ConvEpilogue& e) {
  ir::ConvAttrs a = ir::ConvAttrs::decode(op);
  int64_t bits = 0;
  std::vector<Tensor> in{x.contiguous(), w.contiguous()};
  if (b.defined()) in.push_back(b.contiguous());
  for (auto [t, bit] : {std::pair<const Tensor*, int64_t>{&e.scale, ir::kConvScale},
                        {&e.shift, ir::kConvShift},
                        {&e.residual, ir::kConvResidual}})
    if (t->defined()) {
      KILN_CHECK(t->dtype() == x.dtype(), api,
                 "the epilogue's operands must have the input's dtype " << dtype_name(x.dtype()).data() << ", got "
                                                                        << dtype_name(t->dtype()).data());
      in.push_back(t->contiguous());
      bits |= bit;
    }
  KILN_CHECK(e.act >= 0 && e.act <= 2, api, "unknown epilogue activation " << e.act);
  if (e.act == 1) bits |= ir::kConvRelu;
  if (e.act == 2) {
    bits |= ir::kConvClamp;
    a.clamp_lo = std::min(e.lo, e.hi);  // lo > hi gives hi everywhere (kiln::clamp)
    a.clamp_hi = e.hi;
  }
  const bool pool = !e.pool_kernel.empty();
  if (pool) {
    KILN_CHECK(a.nsp == 2 && !e.residual.defined() && e.pool_kernel.size() == 2 && e.pool_stride.size() == 2 &&
                   e.pool_padding.size() == 2,
               api, "a fused max pool needs 2 spatial dims, a window of 2 sizes and no residual");
    bits |= ir::kConvMaxPool;
  }
  a.has_epilogue = true;
  a.epilogue = bits;
  if (pool) {
    a.pool_kernel = e.pool_kernel;
    a.pool_stride = e.pool_stride;
    a.pool_padding = e.pool_padding;
  }
  a.encode(op);
  if (grad_enabled())
    for (const Tensor& t : in)
      KILN_CHECK(!t.requires_grad(), api, "the fused form records no gradient; an input requires grad");
  Tensor y = detail::run(api, op, x.device(), in)[0];
  if (e.keep) keep_if_unchanged<6>(api, op, in, {input, w, b, e.scale, e.shift, e.residual}, y, e.keep, e.key);
  return y;
}

/// keep / key: where a plain convolution keeps its op (epi carries its own).
Tensor conv_nd(const char* api, int64_t nsp, const Tensor& input, const Tensor& weight, const Tensor& bias,
               const ConvOptions& o, const ConvEpilogue* epi = nullptr, kiln::detail::PreparedOp* keep = nullptr,
               std::span<const int64_t> key = {}) {
  check_dtypes(api, input, weight, bias);
  bool batched = true;
  Tensor x = batch_input(api, input, nsp, batched);
  KILN_CHECK(weight.dim() == nsp + 2, api,
             "expected " << nsp + 2
                         << "-dimensional weight [out_channels, in_channels/groups, *kernel], got weight of size "
                         << weight.shape());
  const Padding::Mode mode = o.padding.mode(api);
  Params p = expand_params(api, nsp, o.stride, mode == Padding::Mode::Explicit ? o.padding.values() : IntList(0),
                           o.dilation, o.groups);
  const int64_t G = o.groups, O = weight.size(0), C = x.size(1);
  KILN_CHECK(O % G == 0, api,
             "Given groups=" << G << ", expected weight to be divisible by " << G
                             << " at dimension 0, but got weight of size " << weight.shape() << " instead");
  KILN_CHECK(C == checked_mul(weight.size(1), G, api), api,
             "Given groups=" << G << ", weight of size " << weight.shape() << ", expected input" << x.shape()
                             << " to have " << weight.size(1) * G << " channels, but got " << C << " channels instead");
  if (bias.defined())
    KILN_CHECK(bias.dim() == 1 && bias.size(0) == O, api,
               "Given weight of size " << weight.shape() << ", expected bias to be 1-dimensional with " << O
                                       << " elements, but got bias of size " << bias.shape() << " instead");
  Dims eff(static_cast<size_t>(nsp));
  for (int64_t i = 0; i < nsp; ++i)
    eff[i] = checked_add(checked_mul(p.dilation[i], weight.size(2 + i) - 1, api), 1, api);
  if (mode == Padding::Mode::Same) {
    for (auto s : p.stride) KILN_CHECK(s == 1, api, "padding='same' is not supported for strided convolutions");
    // Total padding eff - 1 per dim: half on each side, the odd one on the right (PyTorch).
    Shape extra;  // pad() order: last dim first, (lo, hi) pairs
    bool asym = false;
    for (int64_t i = nsp - 1; i >= 0; --i) {
      const int64_t total = eff[i] - 1;
      p.padding[i] = total / 2;
      extra.push_back(0);
      extra.push_back(total - 2 * (total / 2));
      asym |= total % 2 != 0;
    }
    if (asym) x = pad(x, extra);
  }
  Dims padded(static_cast<size_t>(nsp)), ksz(static_cast<size_t>(nsp));
  bool fits = true;
  for (int64_t i = 0; i < nsp; ++i) {
    padded[i] = checked_add(x.size(2 + i), checked_mul(2, p.padding[i], api), api);
    ksz[i] = eff[i];
    fits &= padded[i] >= eff[i];
  }
  KILN_CHECK(fits, api,
             "Calculated padded input size per channel: " << xs(padded) << ". Kernel size: " << xs(ksz)
                                                          << ". Kernel size can't be greater than actual input size");
  ir::Op op = make_op(OpKind::Conv);
  ir::ConvAttrs{.groups = G, .nsp = nsp, .stride = p.stride, .padding = p.padding, .dilation = p.dilation}.encode(op);
  if (epi && (epi->residual.defined() || !epi->pool_kernel.empty())) {
    // A residual of another shape, a pool window larger than the padded output: the caller's
    // separate ops.
    Shape out{x.size(0), O};
    for (int64_t i = 0; i < nsp; ++i)
      out.push_back(ir::conv_out_size(x.size(2 + i), weight.size(2 + i), p.stride[i], p.padding[i], p.dilation[i]));
    if (epi->residual.defined() && epi->residual.shape() != out) return {};
    for (size_t i = 0; i < epi->pool_kernel.size() && nsp == 2; ++i)
      if (checked_add(out[2 + i], checked_mul(2, epi->pool_padding[i], api), api) < epi->pool_kernel[i]) return {};
  }
  Tensor y = epi ? run_epilogue_op(api, op, input, x, weight, bias, *epi)
                 : run_conv_op(api, op, input, x, weight, bias, keep, key);
  return batched ? y : y.squeeze({0});
}

Tensor conv_transpose_nd(const char* api, int64_t nsp, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const ConvTransposeOptions& o) {
  check_dtypes(api, input, weight, bias);
  bool batched = true;
  Tensor x = batch_input(api, input, nsp, batched);
  KILN_CHECK(weight.dim() == nsp + 2, api,
             "expected " << nsp + 2
                         << "-dimensional weight [in_channels, out_channels/groups, *kernel], got weight of size "
                         << weight.shape());
  Params p = expand_params(api, nsp, o.stride, o.padding, o.dilation, o.groups);
  Dims op_pad = o.output_padding.expand(nsp, api, "output_padding");
  const int64_t G = o.groups, C = x.size(1);
  KILN_CHECK(weight.size(0) % G == 0, api,
             "Given groups=" << G << ", expected weight to be divisible by " << G
                             << " at dimension 0, but got weight of size " << weight.shape() << " instead");
  KILN_CHECK(C == weight.size(0), api,
             "Given transposed=1, weight of size " << weight.shape() << ", expected input" << x.shape() << " to have "
                                                   << weight.size(0) << " channels, but got " << C
                                                   << " channels instead");
  const int64_t O = checked_mul(weight.size(1), G, api);
  if (bias.defined())
    KILN_CHECK(bias.dim() == 1 && bias.size(0) == O, api,
               "Given transposed=1, weight of size " << weight.shape() << ", expected bias to be 1-dimensional with "
                                                     << O << " elements, but got bias of size " << bias.shape()
                                                     << " instead");
  Dims out(static_cast<size_t>(nsp)), in(static_cast<size_t>(nsp));
  bool positive = true;
  for (int64_t i = 0; i < nsp; ++i) {
    KILN_CHECK(op_pad[i] >= 0 && (op_pad[i] < p.stride[i] || op_pad[i] < p.dilation[i]), api,
               "output padding must be smaller than either stride or dilation, but got output_padding "
                   << op_pad << ", stride " << p.stride << ", dilation " << p.dilation);
    in[i] = x.size(2 + i);
    out[i] = transposed_size(api, in[i], weight.size(2 + i), p.stride[i], p.padding[i], p.dilation[i], op_pad[i]);
    positive &= out[i] > 0;
  }
  KILN_CHECK(positive, api,
             "Given input size per channel: " << xs(in) << ". Calculated output size per channel: " << xs(out)
                                              << ". Output size is too small");
  ir::Op op = make_op(OpKind::ConvTranspose);
  ir::ConvAttrs{.groups = G,
                .nsp = nsp,
                .stride = p.stride,
                .padding = p.padding,
                .dilation = p.dilation,
                .output_padding = op_pad}
      .encode(op);
  Tensor y = run_conv_op(api, op, x, x, weight, bias);
  return batched ? y : y.squeeze({0});
}

}  // namespace

Padding::Mode Padding::mode(const char* op) const {
  if (text_.empty()) return Mode::Explicit;
  if (text_ == "same") return Mode::Same;
  if (text_ == "valid") return Mode::Valid;
  KILN_CHECK(false, op, "Invalid padding string '" << text_ << "', should be one of {'valid', 'same'}");
  return Mode::Explicit;
}

Tensor conv_with_epilogue(int64_t nsp, const Tensor& x, const Tensor& weight, const Tensor& bias,
                          const ConvOptions& options, const ConvEpilogue& epilogue) {
  static const char* const names[] = {"conv1d", "conv2d", "conv3d"};
  KILN_CHECK(nsp >= 1 && nsp <= 3, "conv", "1 to 3 spatial dims, got " << nsp);
  const char* api = names[nsp - 1];
  KILN_CHECK(x.defined() && x.dim() == nsp + 2, api,
             "the fused form needs a batched input, got " << (x.defined() ? to_string(x.shape()) : "undefined"));
  return conv_nd(api, nsp, x, weight, bias, options, &epilogue);
}

Tensor conv_kept(int64_t nsp, const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options,
                 kiln::detail::PreparedOp* keep, std::span<const int64_t> key) {
  static const char* const names[] = {"conv1d", "conv2d", "conv3d"};
  KILN_CHECK(nsp >= 1 && nsp <= 3, "conv", "1 to 3 spatial dims, got " << nsp);
  return conv_nd(names[nsp - 1], nsp, x, weight, bias, options, nullptr, keep, key);
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvOptions& options) {
  return conv_nd("conv1d", 1, input, weight, bias, options);
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvOptions& options) {
  return conv_nd("conv2d", 2, input, weight, bias, options);
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvOptions& options) {
  return conv_nd("conv3d", 3, input, weight, bias, options);
}
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const ConvTransposeOptions& options) {
  return conv_transpose_nd("conv_transpose1d", 1, input, weight, bias, options);
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const ConvTransposeOptions& options) {
  return conv_transpose_nd("conv_transpose2d", 2, input, weight, bias, options);
}
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const ConvTransposeOptions& options) {
  return conv_transpose_nd("conv_transpose3d", 3, input, weight, bias, options);
}

// ---- unfold / fold ------------------------------------------------------------------------------

namespace {

struct Blocks {
  Dims k, dil, pad, stride;
};

Blocks block_params(const char* api, const IntList& kernel_size, const IntList& dilation, const IntList& padding,
                    const IntList& stride) {
  Blocks b{kernel_size.expand(2, api, "kernel_size"), dilation.expand(2, api, "dilation"),
           padding.expand(2, api, "padding"), stride.expand(2, api, "stride")};
  for (int i = 0; i < 2; ++i) {
    KILN_CHECK(b.k[i] > 0, api, "kernel size should be greater than zero, but got kernel_size " << b.k);
    KILN_CHECK(b.dil[i] > 0, api, "dilation should be greater than zero, but got dilation " << b.dil);
    KILN_CHECK(b.pad[i] >= 0, api, "padding should be non-negative, but got padding " << b.pad);
    KILN_CHECK(b.stride[i] > 0, api, "stride should be greater than zero, but got stride " << b.stride);
  }
  return b;
}

/// Number of block positions along each dim for a (padded) image of size hw; throws when < 1.
Dims block_counts(const char* api, const Dims& hw, const Blocks& b) {
  Dims n(2);
  Dims padded(2), eff(2);
  for (int i = 0; i < 2; ++i) {
    padded[i] = checked_add(hw[i], checked_mul(2, b.pad[i], api), api);
    eff[i] = checked_add(checked_mul(b.dil[i], b.k[i] - 1, api), 1, api);
    n[i] = (padded[i] - eff[i]) / b.stride[i] + 1;
  }
  const bool ok = n[0] >= 1 && n[1] >= 1 && padded[0] >= eff[0] && padded[1] >= eff[1];
  KILN_CHECK(ok, api,
             "Given input with spatial size " << hw << ", kernel_size=" << b.k << ", dilation=" << b.dil << ", padding="
                                              << b.pad << ", calculated shape of the array of sliding blocks as "
                                              << Dims{std::max<int64_t>(n[0], 0), std::max<int64_t>(n[1], 0)}
                                              << ", but its components must be at least one.");
  return n;
}

}  // namespace

Tensor unfold(const Tensor& input, IntList kernel_size, IntList dilation, IntList padding, IntList stride) {
  const char* api = "unfold";
  detail::check_defined(api, input);
  KILN_CHECK(input.dim() == 3 || input.dim() == 4, api,
             "expected a 3-D (unbatched) or 4-D (batched) input, got input of size " << input.shape());
  const bool batched = input.dim() == 4;
  Tensor x = batched ? input : input.unsqueeze(0);
  const Blocks b = block_params(api, kernel_size, dilation, padding, stride);
  const int64_t N = x.size(0), C = x.size(1);
  const Dims n = block_counts(api, {x.size(2), x.size(3)}, b);
  if (b.pad[0] || b.pad[1]) x = pad(x, {b.pad[1], b.pad[1], b.pad[0], b.pad[0]});
  x = x.contiguous();
  const int64_t Hp = x.size(2), Wp = x.size(3);
  // Note [unfold as a view]: block (ki, kj) at position (i, j) reads padded pixel
  // (i*sh + ki*dh, j*sw + kj*dw), so [N, C, kh, kw, oh, ow] is one strided view of x.
  // A dim of size 1 gets stride 0: its dilation or stride may be as large as int64 allows (then
  // the products below would overflow), and it is never stepped. Otherwise they fit (block_counts).
  auto step = [](int64_t size, int64_t s, int64_t scale) { return size > 1 ? s * scale : 0; };
  Tensor v = x.as_strided({N, C, b.k[0], b.k[1], n[0], n[1]},
                          {C * Hp * Wp, Hp * Wp, step(b.k[0], b.dil[0], Wp), step(b.k[1], b.dil[1], 1),
                           step(n[0], b.stride[0], Wp), step(n[1], b.stride[1], 1)},
                          x.storage_offset());
  Tensor out = v.reshape({N, checked_mul(C, checked_mul(b.k[0], b.k[1], api), api), n[0] * n[1]});
  return batched ? out : out.squeeze({0});
}

Tensor fold(const Tensor& input, IntList output_size, IntList kernel_size, IntList dilation, IntList padding,
            IntList stride) {
  const char* api = "fold";
  detail::check_defined(api, input);
  KILN_CHECK(input.dim() == 2 || input.dim() == 3, api,
             "expected a 2-D (unbatched) or 3-D (batched) input, got input of size " << input.shape());
  const bool batched = input.dim() == 3;
  Tensor x = batched ? input : input.unsqueeze(0);
  const Blocks b = block_params(api, kernel_size, dilation, padding, stride);
  const Dims hw = output_size.expand(2, api, "output_size");
  KILN_CHECK(hw[0] > 0 && hw[1] > 0, api, "output_size should be greater than zero, but got " << hw);
  const int64_t N = x.size(0), CK = x.size(1), L = x.size(2), K = b.k[0] * b.k[1];
  KILN_CHECK(
      CK % K == 0, api,
      "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)="
          << CK << " and kernel_size=" << b.k);
  const Dims n = block_counts(api, hw, b);
  KILN_CHECK(
      L == checked_mul(n[0], n[1], api), api,
      "Given output_size=" << hw << ", kernel_size=" << b.k << ", dilation=" << b.dil << ", padding=" << b.pad
                           << ", stride=" << b.stride
                           << ", expected size of input's dimension 2 to match the calculated number of sliding blocks "
                           << n[0] << " * " << n[1] << " = " << n[0] * n[1] << ", but got input.size(2)=" << L << ".");
  const int64_t C = CK / K, Hp = checked_add(hw[0], checked_mul(2, b.pad[0], api), api),
                Wp = checked_add(hw[1], checked_mul(2, b.pad[1], api), api);
  // Flat padded-pixel index of every (ki, kj, i, j), the order unfold lays blocks out in; index_add
  // then sums overlapping blocks in that fixed order.
  std::vector<int64_t> idx(static_cast<size_t>(checked_mul(K, L, api)));
  size_t t = 0;
  for (int64_t ki = 0; ki < b.k[0]; ++ki)
    for (int64_t kj = 0; kj < b.k[1]; ++kj)
      for (int64_t i = 0; i < n[0]; ++i)
        for (int64_t j = 0; j < n[1]; ++j)
          idx[t++] = (i * b.stride[0] + ki * b.dil[0]) * Wp + j * b.stride[1] + kj * b.dil[1];
  Tensor index = tensor(idx, {K * L}, x.device());
  Tensor acc = zeros({N, C, Hp * Wp}, TensorOptions{.dtype = x.dtype(), .device = x.device()});
  acc = index_add(acc, 2, index, x.reshape({N, C, K * L}));
  Tensor out = acc.reshape({N, C, Hp, Wp});
  if (b.pad[0] || b.pad[1])
    out = out.slice(2, b.pad[0], b.pad[0] + hw[0]).slice(3, b.pad[1], b.pad[1] + hw[1]).contiguous();
  return batched ? out : out.squeeze({0});
}

}  // namespace kiln::nn::functional

// ---- torch.nn.grad ------------------------------------------------------------------------------

namespace kiln::nn::grad {

using detail::checked_add;
using detail::checked_mul;
using detail::transposed_size;

namespace {

using functional::IntList;

Tensor conv_input_nd(const char* api, int64_t nsp, const Shape& input_size, const Tensor& weight,
                     const Tensor& grad_output, const ConvGradOptions& o) {
  detail::check_defined(api, weight);
  detail::check_defined(api, grad_output);
  KILN_CHECK(
      static_cast<int64_t>(input_size.size()) == nsp + 2 && grad_output.dim() == nsp + 2 && weight.dim() == nsp + 2,
      api,
      "expected " << nsp + 2 << "-d input_size, weight and grad_output, got " << input_size << ", " << weight.shape()
                  << " and " << grad_output.shape());
  Dims stride = o.stride.expand(nsp, api, "stride"), padding = o.padding.expand(nsp, api, "padding"),
       dilation = o.dilation.expand(nsp, api, "dilation");
  Dims op_pad(static_cast<size_t>(nsp));
  for (int64_t i = 0; i < nsp; ++i) {
    KILN_CHECK(stride[i] > 0 && dilation[i] > 0 && padding[i] >= 0, api,
               "expected positive stride and dilation and non-negative padding, got stride "
                   << stride << ", padding " << padding << ", dilation " << dilation);
    const int64_t base =
        transposed_size(api, grad_output.size(2 + i), weight.size(2 + i), stride[i], padding[i], dilation[i], 0);
    op_pad[i] = checked_add(input_size[static_cast<size_t>(2 + i)], -base, api);
  }
  Tensor r = functional::conv_transpose_nd(
      api, nsp, grad_output, weight, Tensor(),
      {.stride = stride, .padding = padding, .output_padding = op_pad, .groups = o.groups, .dilation = dilation});
  KILN_CHECK(r.shape() == input_size, api,
             "grad_output " << grad_output.shape() << " gives an input gradient of size " << r.shape()
                            << ", not input_size " << input_size);
  return r;
}

Tensor conv_weight_nd(const char* api, int64_t nsp, const Tensor& input, const Shape& weight_size,
                      const Tensor& grad_output, const ConvGradOptions& o) {
  detail::check_defined(api, input);
  detail::check_defined(api, grad_output);
  detail::check_same_device(api, input, grad_output);
  KILN_CHECK(
      input.dim() == nsp + 2 && grad_output.dim() == nsp + 2 && static_cast<int64_t>(weight_size.size()) == nsp + 2,
      api,
      "expected " << nsp + 2 << "-d input, weight_size and grad_output, got " << input.shape() << ", " << weight_size
                  << " and " << grad_output.shape());
  KILN_CHECK(is_floating(input.dtype()) && grad_output.dtype() == input.dtype(), api,
             "expected floating-point input and grad_output of one dtype, got "
                 << dtype_name(input.dtype()).data() << " and " << dtype_name(grad_output.dtype()).data());
  const int64_t G = o.groups;
  KILN_CHECK(G > 0, api, "non-positive groups is not supported, got groups=" << G);
  KILN_CHECK(weight_size[0] == grad_output.size(1) && checked_mul(weight_size[1], G, api) == input.size(1) &&
                 weight_size[0] % G == 0,
             api,
             "weight_size " << weight_size << " with groups=" << G << " does not match input " << input.shape()
                            << " and grad_output " << grad_output.shape());
  Dims stride = o.stride.expand(nsp, api, "stride"), padding = o.padding.expand(nsp, api, "padding"),
       dilation = o.dilation.expand(nsp, api, "dilation");
  for (int64_t i = 0; i < nsp; ++i) {
    const int64_t k = weight_size[static_cast<size_t>(2 + i)];
    KILN_CHECK(stride[i] > 0 && dilation[i] > 0 && padding[i] >= 0 && k > 0, api,
               "expected positive stride, dilation and kernel size and non-negative padding, got stride "
                   << stride << ", padding " << padding << ", dilation " << dilation << ", weight_size "
                   << weight_size);
    const int64_t eff = checked_add(checked_mul(dilation[i], k - 1, api), 1, api),
                  padded = checked_add(input.size(2 + i), checked_mul(2, padding[i], api), api);
    KILN_CHECK(padded >= eff && (padded - eff) / stride[i] + 1 == grad_output.size(2 + i), api,
               "grad_output " << grad_output.shape() << " does not match the output size of input " << input.shape()
                              << " and weight_size " << weight_size);
  }
  ir::Op op = detail::make_op(ir::OpKind::ConvWeightGrad);
  ir::ConvAttrs{.groups = G,
                .nsp = nsp,
                .stride = stride,
                .padding = padding,
                .dilation = dilation,
                .weight_size = Dims(weight_size.begin() + 2, weight_size.end())}
      .encode(op);
  return detail::run1(api, op, {input.contiguous(), grad_output.contiguous()});
}

}  // namespace

Tensor conv1d_input(const Shape& input_size, const Tensor& weight, const Tensor& grad_output,
                    const ConvGradOptions& options) {
  return conv_input_nd("conv1d_input", 1, input_size, weight, grad_output, options);
}
Tensor conv2d_input(const Shape& input_size, const Tensor& weight, const Tensor& grad_output,
                    const ConvGradOptions& options) {
  return conv_input_nd("conv2d_input", 2, input_size, weight, grad_output, options);
}
Tensor conv3d_input(const Shape& input_size, const Tensor& weight, const Tensor& grad_output,
                    const ConvGradOptions& options) {
  return conv_input_nd("conv3d_input", 3, input_size, weight, grad_output, options);
}
Tensor conv1d_weight(const Tensor& input, const Shape& weight_size, const Tensor& grad_output,
                     const ConvGradOptions& options) {
  return conv_weight_nd("conv1d_weight", 1, input, weight_size, grad_output, options);
}
Tensor conv2d_weight(const Tensor& input, const Shape& weight_size, const Tensor& grad_output,
                     const ConvGradOptions& options) {
  return conv_weight_nd("conv2d_weight", 2, input, weight_size, grad_output, options);
}
Tensor conv3d_weight(const Tensor& input, const Shape& weight_size, const Tensor& grad_output,
                     const ConvGradOptions& options) {
  return conv_weight_nd("conv3d_weight", 3, input, weight_size, grad_output, options);
}

}  // namespace kiln::nn::grad
