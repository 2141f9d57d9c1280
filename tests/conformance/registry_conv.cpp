// SPDX-License-Identifier: MIT OR Apache-2.0
// Conformance registry entries of the convolution family (cases: scripts/golden_cases/conv.py).
#include <kiln/nn/functional/conv.h>

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

F::ConvOptions conv_opts(At at) {
  F::ConvOptions o{.stride = il(at, "stride", 1), .dilation = il(at, "dilation", 1), .groups = at.i_or("groups", 1)};
  if (at.has("padmode"))
    o.padding = F::Padding(at.str("padmode"));
  else
    o.padding = F::Padding(il(at, "padding", 0));
  return o;
}

F::ConvTransposeOptions convt_opts(At at) {
  return {.stride = il(at, "stride", 1),
          .padding = il(at, "padding", 0),
          .output_padding = il(at, "output_padding", 0),
          .groups = at.i_or("groups", 1),
          .dilation = il(at, "dilation", 1)};
}

nn::grad::ConvGradOptions grad_opts(At at) {
  return {.stride = il(at, "stride", 1),
          .padding = il(at, "padding", 0),
          .dilation = il(at, "dilation", 1),
          .groups = at.i_or("groups", 1)};
}

const RegistryPart part({
    OP(conv1d) { return {F::conv1d(in[0].t, in[1].t, opt(in, 2), conv_opts(at))};
}  // namespace
END, OP(conv2d) { return {F::conv2d(in[0].t, in[1].t, opt(in, 2), conv_opts(at))}; }
END, OP(conv3d) { return {F::conv3d(in[0].t, in[1].t, opt(in, 2), conv_opts(at))}; }
END, OP(conv_transpose1d) { return {F::conv_transpose1d(in[0].t, in[1].t, opt(in, 2), convt_opts(at))}; }
END, OP(conv_transpose2d) { return {F::conv_transpose2d(in[0].t, in[1].t, opt(in, 2), convt_opts(at))}; }
END, OP(conv_transpose3d) { return {F::conv_transpose3d(in[0].t, in[1].t, opt(in, 2), convt_opts(at))}; }
END, OP(unfold) {
  return {
      F::unfold(in[0].t, il(at, "kernel_size", 1), il(at, "dilation", 1), il(at, "padding", 0), il(at, "stride", 1))};
}
END, OP(fold) {
  return {F::fold(in[0].t, il(at, "output_size", 1), il(at, "kernel_size", 1), il(at, "dilation", 1),
                  il(at, "padding", 0), il(at, "stride", 1))};
}
END, OP(conv1d_weight) { return {nn::grad::conv1d_weight(in[0].t, at.shape("weight_size"), in[1].t, grad_opts(at))}; }
END, OP(conv2d_weight) { return {nn::grad::conv2d_weight(in[0].t, at.shape("weight_size"), in[1].t, grad_opts(at))}; }
END, OP(conv3d_weight) { return {nn::grad::conv3d_weight(in[0].t, at.shape("weight_size"), in[1].t, grad_opts(at))}; }
END, OP(conv2d_input) { return {nn::grad::conv2d_input(at.shape("input_size"), in[0].t, in[1].t, grad_opts(at))}; }
END,
}  // namespace kiln::conformance
);

}  // namespace
}  // namespace kiln::conformance
