// SPDX-License-Identifier: MIT OR Apache-2.0
// Conformance registry of the matrix-product family (cases in scripts/golden_cases/matmul.py).
#include <kiln/matmul.h>
#include <kiln/nn/functional/attention.h>

#include "conformance/registry_util.h"

namespace kiln::conformance {
namespace {
using namespace reg;
namespace F = kiln::nn::functional;

AddmmOptions add_opts(At at) {
  AddmmOptions o;
  if (at.has("beta")) o.beta = at.scalar("beta");
  if (at.has("alpha")) o.alpha = at.scalar("alpha");
  return o;
}

const RegistryPart part({
    OP(matmul) { return {kiln::matmul(in[0].t, in[1].t)};
}  // namespace
END, OP(mm) { return {kiln::mm(in[0].t, in[1].t)}; }
END, OP(bmm) { return {kiln::bmm(in[0].t, in[1].t)}; }
END, OP(mv) { return {kiln::mv(in[0].t, in[1].t)}; }
END, OP(dot) { return {kiln::dot(in[0].t, in[1].t)}; }
END, OP(outer) { return {kiln::outer(in[0].t, in[1].t)}; }
END, OP(addmm) { return {kiln::addmm(in[0].t, in[1].t, in[2].t, add_opts(at))}; }
END, OP(addmv) { return {kiln::addmv(in[0].t, in[1].t, in[2].t, add_opts(at))}; }
END, OP(baddbmm) { return {kiln::baddbmm(in[0].t, in[1].t, in[2].t, add_opts(at))}; }
END, OP(linear) { return {F::linear(in[0].t, in[1].t, in[2].t)}; }
END, OP(einsum) { return {kiln::einsum(at.str("eq"), tensors(in))}; }
END, OP(scaled_dot_product_attention) {
  F::SdpaOptions o;
  o.attn_mask = in[3].t;
  o.is_causal = at.b("is_causal");
  o.enable_gqa = at.b("enable_gqa");
  if (at.has("scale")) o.scale = at.f("scale");
  return {F::scaled_dot_product_attention(in[0].t, in[1].t, in[2].t, o)};
}
END,
}  // namespace kiln::conformance
);

}  // namespace
}  // namespace kiln::conformance
