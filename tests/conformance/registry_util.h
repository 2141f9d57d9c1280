// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Helpers for the conformance registry files (registry.cpp and registry_<family>.cpp). A
// family file registers its entries with a file-level
//   static const RegistryPart part({ OP(name) { return {kiln::...}; } END, ... });
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "conformance/golden.h"
#include "kiln/autodiff.h"

namespace kiln::conformance {

/// Adds entries to registry(); a name registered twice throws when the registry is built.
struct RegistryPart {
  explicit RegistryPart(std::map<std::string, OpFn> entries);
};

namespace reg {
using A = const Args&;
using At = const Attrs&;
using D = const Device&;

inline Outs pair_out(const std::pair<Tensor, Tensor>& p) { return {p.first, p.second}; }
inline std::optional<Scalar> opt_scalar(const Arg& a) { return a.s; }
inline TensorOptions opts(At at, D dev, const char* key = "dtype") {
  return TensorOptions{.dtype = at.dtype(key).value_or(f32), .device = dev};
}
inline std::vector<Tensor> tensors(A in, size_t from = 0) {
  std::vector<Tensor> v;
  for (size_t i = from; i < in.size(); ++i) v.push_back(in[i].t);
  return v;
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

/// The result of f on the inputs and the gradients of sum(result) with respect to the first
/// `ng` inputs (attribute, default 1), through dev.autodiff(); on the null device only the
/// forward runs and the gradients are stand-ins of the inputs' shapes.
inline Outs with_grads(A in, At at, D dev, const Fn& f) {
  const auto ng = static_cast<size_t>(at.i_or("ng", 1));
  std::vector<Tensor> xs;
  for (const Arg& a : in) xs.push_back(a.t);
  if (ng == 0) return {f(xs)};
  if (dev.is_null()) {
    Outs o{f(xs)};
    for (size_t i = 0; i < ng; ++i) o.push_back(empty_like(xs[i]));
    return o;
  }
  const Device ad = dev.autodiff();
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].defined()) continue;
    xs[i] = xs[i].detach().to(ad);
    if (i < ng) xs[i] = xs[i].require_grad();
  }
  Tensor y = f(xs);
  Gradients g = y.sum().backward();
  Outs o{y.detach().to(dev)};
  for (size_t i = 0; i < ng; ++i) {
    Tensor gi = xs[i].grad(g);
    o.push_back(gi.defined() ? gi.detach().to(dev) : zeros_like(in[i].t));
  }
  return o;
}

}  // namespace reg

}  // namespace kiln::conformance

/// One registry entry: OP(name) { body using in, at, dev } END
#define OP(name)                                                     \
  {                                                                  \
#name, []([[maybe_unused]] const ::kiln::conformance::Args& in,  \
              [[maybe_unused]] const ::kiln::conformance::Attrs& at, \
              [[maybe_unused]] const ::kiln::Device& dev) -> ::kiln::conformance::Outs
#define END }
