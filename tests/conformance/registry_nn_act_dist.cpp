// SPDX-License-Identifier: MIT OR Apache-2.0
// Conformance registry of the further activations and the distances (cases:
// scripts/golden_cases/nn_act_dist.py): each entry returns the result and the gradients of
// sum(result) with respect to its first `ng` inputs (reg::with_grads).
#include "conformance/registry_util.h"
#include "kiln/nn/functional.h"

namespace kiln::conformance {
namespace {
using namespace reg;
namespace F = kiln::nn::functional;
using X = const std::vector<Tensor>&;

const RegistryPart part({
    OP(logsigmoid) { return with_grads(in, at, dev, [](X x) {
  return F::logsigmoid(x[0]); });
}  // namespace
END, OP(hardshrink) {
  return with_grads(in, at, dev, [&](X x) { return F::hardshrink(x[0], at.f_or("lambd", 0.5)); });
}
END, OP(softshrink) {
  return with_grads(in, at, dev, [&](X x) { return F::softshrink(x[0], at.f_or("lambd", 0.5)); });
}
END, OP(tanhshrink) {
  return with_grads(in, at, dev, [](X x) { return F::tanhshrink(x[0]); });
}
END, OP(threshold) {
  return with_grads(in, at, dev, [&](X x) { return F::threshold(x[0], at.f("threshold"), at.f("value")); });
}
END, OP(rrelu) {
  return with_grads(in, at, dev, [&](X x) {
    return F::rrelu(x[0], at.f_or("lower", 1.0 / 8), at.f_or("upper", 1.0 / 3), /*training=*/false);
  });
}
END, OP(cosine_similarity) {
  return with_grads(in, at, dev,
                    [&](X x) { return F::cosine_similarity(x[0], x[1], at.i_or("dim", 1), at.f_or("eps", 1e-8)); });
}
END, OP(pairwise_distance) {
  return with_grads(in, at, dev, [&](X x) {
    return F::pairwise_distance(x[0], x[1], at.f_or("p", 2.0), at.f_or("eps", 1e-6), at.b("keepdim"));
  });
}
END,
}  // namespace kiln::conformance
);

}  // namespace
}  // namespace kiln::conformance
