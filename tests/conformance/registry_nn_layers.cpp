// SPDX-License-Identifier: MIT OR Apache-2.0
// Conformance entries of the basic layers (kiln/nn/layers.h; cases:
// scripts/golden_cases/nn_layers.py). Each entry builds the module with the case's weights and
// returns its output, and for the "_grad" entries the gradients of sum(y * g) through autodiff.
#include <kiln/nn.h>
#include <kiln/nn/activation.h>

#include "conformance/registry_util.h"

namespace kiln::conformance {
namespace {

using namespace reg;
namespace F = kiln::nn::functional;

F::IntList il(At at, const char* key, int64_t def) {
  auto v = at.ints(key);
  if (v.empty()) return F::IntList(def);
  return F::IntList(Dims(v.begin(), v.end()));
}

Tensor opt(A in, size_t i) { return in.size() > i && in[i].is_tensor() ? in[i].t : Tensor(); }

Dims kernel_of(const Tensor& w) { return Dims(w.shape().begin() + 2, w.shape().end()); }

template <int N>
nn::ConvNd<N> make_conv(A in, At at, D dev) {
  const Tensor& w = in[1].t;
  const int64_t groups = at.i_or("groups", 1);
  nn::ConvConfig c{.in_channels = w.size(1) * groups,
                   .out_channels = w.size(0),
                   .kernel_size = kernel_of(w),
                   .stride = il(at, "stride", 1),
                   .dilation = il(at, "dilation", 1),
                   .groups = groups,
                   .bias = opt(in, 2).defined(),
                   .padding_mode = at.str_or("padding_mode", "zeros"),
                   .dtype = w.dtype()};
  if (at.has("padmode"))
    c.padding = F::Padding(at.str("padmode"));
  else
    c.padding = F::Padding(il(at, "padding", 0));
  nn::ConvNd<N> m(c, dev);
  m.weight = w;
  m.bias = opt(in, 2);
  return m;
}

template <int N>
nn::ConvTransposeNd<N> make_convt(A in, At at, D dev) {
  const Tensor& w = in[1].t;
  const int64_t groups = at.i_or("groups", 1);
  nn::ConvTransposeConfig c{.in_channels = w.size(0),
                            .out_channels = w.size(1) * groups,
                            .kernel_size = kernel_of(w),
                            .stride = il(at, "stride", 1),
                            .padding = il(at, "padding", 0),
                            .output_padding = il(at, "output_padding", 0),
                            .groups = groups,
                            .bias = opt(in, 2).defined(),
                            .dilation = il(at, "dilation", 1),
                            .dtype = w.dtype()};
  nn::ConvTransposeNd<N> m(c, dev);
  m.weight = w;
  m.bias = opt(in, 2);
  return m;
}

/// y and the gradients of sum(y * g) for x, weight and (when defined) bias, on dev.autodiff().
template <class M>
Outs conv_grad(M m, A in, D dev) {
  const Device ad = dev.autodiff();
  Tensor x = in[0].t.to(ad).require_grad();
  m.to(ad);
  Tensor y = m(x);
  Gradients g = sum(y * in[3].t.to(ad)).backward();
  Outs o{y.detach(), x.grad(g), m.weight.grad(g)};
  if (m.bias.defined()) o.push_back(m.bias.grad(g));
  return o;
}

Dims dims_or_empty(At at, const char* key) {
  auto v = at.ints(key);
  return Dims(v.begin(), v.end());
}

// clang-format off
const RegistryPart part({
  OP(nn_conv1d) { return {make_conv<1>(in, at, dev)(in[0].t)}; } END,
  OP(nn_conv2d) { return {make_conv<2>(in, at, dev)(in[0].t)}; } END,
  OP(nn_conv3d) { return {make_conv<3>(in, at, dev)(in[0].t)}; } END,
  OP(nn_conv_transpose1d) { return {make_convt<1>(in, at, dev)(in[0].t, dims_or_empty(at, "output_size"))}; } END,
  OP(nn_conv_transpose2d) { return {make_convt<2>(in, at, dev)(in[0].t, dims_or_empty(at, "output_size"))}; } END,
  OP(nn_conv_transpose3d) { return {make_convt<3>(in, at, dev)(in[0].t, dims_or_empty(at, "output_size"))}; } END,
  OP(nn_conv2d_grad) { return conv_grad(make_conv<2>(in, at, dev), in, dev); } END,
  OP(nn_conv_transpose2d_grad) { return conv_grad(make_convt<2>(in, at, dev), in, dev); } END,
  OP(nn_bilinear) {
    const Device ad = dev.autodiff();
    const Tensor& w = in[2].t;
    nn::Bilinear m({.in1_features = w.size(1), .in2_features = w.size(2), .out_features = w.size(0)}, ad);
    m.weight = w.to(ad).require_grad();
    m.bias = in[3].t.to(ad).require_grad();
    Tensor x1 = in[0].t.to(ad).require_grad(), x2 = in[1].t.to(ad).require_grad();
    Tensor y = m(x1, x2);
    Gradients g = sum(y * in[4].t.to(ad)).backward();
    return {y.detach(), x1.grad(g), x2.grad(g), m.weight.grad(g), m.bias.grad(g)};
  } END,
  OP(nn_embedding) {
    const Device ad = dev.autodiff();
    const Tensor& w = in[1].t;
    nn::Embedding m({.num_embeddings = w.size(0), .embedding_dim = w.size(1), .padding_idx = at.opt_i("padding_idx")},
                    ad);
    m.weight = w.to(ad).require_grad();
    Tensor y = m(in[0].t.to(ad));
    Gradients g = sum(y * in[2].t.to(ad)).backward();
    return {y.detach(), m.weight.grad(g)};
  } END,
  OP(nn_embedding_renorm) {
    const Device ad = dev.autodiff();
    const Tensor w = in[1].t.clone();
    nn::Embedding m({.num_embeddings = w.size(0),
                     .embedding_dim = w.size(1),
                     .max_norm = at.f("max_norm"),
                     .norm_type = at.f_or("norm_type", 2.0)},
                    ad);
    m.weight = w.to(ad).require_grad();
    Tensor y = m(in[0].t.to(ad));
    Gradients g = sum(y * in[2].t.to(ad)).backward();
    return {y.detach(), m.weight.grad(g), m.weight.detach()};
  } END,
  OP(nn_maxpool2d) {
    nn::MaxPool2d m({.kernel_size = il(at, "kernel_size", 1), .stride = at.has("stride") ? il(at, "stride", 1) : Dims{},
                     .padding = il(at, "padding", 0), .dilation = il(at, "dilation", 1),
                     .ceil_mode = at.b("ceil_mode")}, dev);
    return {m(in[0].t)};
  } END,
  OP(nn_maxpool1d) {
    nn::MaxPool1d m({.kernel_size = il(at, "kernel_size", 1), .stride = at.has("stride") ? il(at, "stride", 1) : Dims{},
                     .padding = il(at, "padding", 0)}, dev);
    return {m(in[0].t)};
  } END,
  OP(nn_avgpool2d) {
    nn::AvgPool2d m({.kernel_size = il(at, "kernel_size", 1), .stride = at.has("stride") ? il(at, "stride", 1) : Dims{},
                     .padding = il(at, "padding", 0), .count_include_pad = at.b("count_include_pad", true)}, dev);
    return {m(in[0].t)};
  } END,
  OP(nn_avgpool3d) {
    nn::AvgPool3d m({.kernel_size = il(at, "kernel_size", 1), .stride = at.has("stride") ? il(at, "stride", 1) : Dims{},
                     .padding = il(at, "padding", 0)}, dev);
    return {m(in[0].t)};
  } END,
  OP(nn_adaptive_avgpool2d) { return {nn::AdaptiveAvgPool2d({.output_size = at.dims("output_size")}, dev)(in[0].t)}; } END,
  OP(nn_adaptive_maxpool1d) { return {nn::AdaptiveMaxPool1d({.output_size = at.dims("output_size")}, dev)(in[0].t)}; } END,
  OP(nn_pixel_shuffle) { return {nn::PixelShuffle({.upscale_factor = at.i("r")}, dev)(in[0].t)}; } END,
  OP(nn_upsample) {
    nn::UpsampleConfig c{.scale_factor = at.f("scale"), .mode = at.str("mode")};
    if (at.has("align_corners")) c.align_corners = at.b("align_corners");
    return {nn::Upsample(c, dev)(in[0].t)};
  } END,
  OP(nn_sequential) {
    const Device ad = dev.autodiff();
    nn::Sequential m(nn::Conv2d({.in_channels = 3, .out_channels = 4, .kernel_size = 3, .padding = 1}),
                     nn::ReLU(), nn::MaxPool2d({.kernel_size = 2}), nn::Flatten(),
                     nn::Linear({.in_features = in[3].t.size(1), .out_features = in[3].t.size(0)}));
    auto params = m.named_parameters();
    const std::vector<std::string> names = {"0.weight", "0.bias", "4.weight", "4.bias"};
    if (params.size() != names.size()) throw std::runtime_error("nn_sequential: wrong number of parameters");
    for (size_t i = 0; i < names.size(); ++i)
      if (params[i].first != names[i]) throw std::runtime_error("nn_sequential: parameter " + params[i].first);
    m.at<nn::Conv2d>(0).weight = in[1].t;
    m.at<nn::Conv2d>(0).bias = in[2].t;
    m.at<nn::Linear>(4).weight = in[3].t;
    m.at<nn::Linear>(4).bias = in[4].t;
    m.to(ad);
    Tensor x = in[0].t.to(ad).require_grad();
    Tensor y = m(x);
    Gradients g = sum(y * in[5].t.to(ad)).backward();
    return {y.detach(), x.grad(g), m.at<nn::Conv2d>(0).weight.grad(g), m.at<nn::Linear>(4).weight.grad(g)};
  } END,
});
// clang-format on

}  // namespace
}  // namespace kiln::conformance
