// SPDX-License-Identifier: MIT OR Apache-2.0
// Conformance registry of the normalisation family (cases: scripts/golden_cases/norm.py).
// Absent optionals arrive as undefined tensors. batch_norm / instance_norm with running stats
// update clones of them and return (y, running_mean, running_var) so the updates are compared.
#include "conformance/registry_util.h"

namespace kiln::conformance {
namespace {
using namespace reg;
namespace F = kiln::nn::functional;

Tensor clone_or_empty(const Arg& a) { return a.t.defined() ? a.t.clone() : Tensor(); }

Outs with_stats(const Tensor& y, const Tensor& rm, const Tensor& rv) {
  if (!rm.defined()) return {y};
  return {y, rm, rv};
}

const RegistryPart part({
    OP(layer_norm) { return {F::layer_norm(in[0].t, at.shape("ns"), in[1].t, in[2].t, at.f_or("eps", 1e-5))};
}  // namespace
END, OP(native_layer_norm) {
  auto r = F::native_layer_norm(in[0].t, at.shape("ns"), in[1].t, in[2].t, at.f_or("eps", 1e-5));
  return {r.output, r.mean, r.rstd};
}
END, OP(rms_norm) { return {F::rms_norm(in[0].t, at.shape("ns"), in[1].t, at.opt_f("eps"))}; }
END, OP(group_norm) { return {F::group_norm(in[0].t, at.i("groups"), in[1].t, in[2].t, at.f_or("eps", 1e-5))}; }
END, OP(instance_norm) {
  Tensor rm = clone_or_empty(in[1]), rv = clone_or_empty(in[2]);
  Tensor y = F::instance_norm(in[0].t, {.running_mean = rm,
                                        .running_var = rv,
                                        .weight = in[3].t,
                                        .bias = in[4].t,
                                        .use_input_stats = at.b("use_input_stats", true),
                                        .momentum = at.f_or("momentum", 0.1),
                                        .eps = at.f_or("eps", 1e-5)});
  return with_stats(y, rm, rv);
}
END, OP(batch_norm) {
  Tensor rm = clone_or_empty(in[1]), rv = clone_or_empty(in[2]);
  Tensor y = F::batch_norm(in[0].t, rm, rv,
                           {.weight = in[3].t,
                            .bias = in[4].t,
                            .training = at.b("training"),
                            .momentum = at.f_or("momentum", 0.1),
                            .eps = at.f_or("eps", 1e-5)});
  return with_stats(y, rm, rv);
}
END, OP(local_response_norm) {
  return {
      F::local_response_norm(in[0].t, at.i("size"), at.f_or("alpha", 1e-4), at.f_or("beta", 0.75), at.f_or("k", 1.0))};
}
END, OP(normalize) { return {F::normalize(in[0].t, at.f_or("p", 2.0), at.i_or("dim", 1), at.f_or("eps", 1e-12))}; }
END,
}  // namespace kiln::conformance
);

}  // namespace
}  // namespace kiln::conformance
