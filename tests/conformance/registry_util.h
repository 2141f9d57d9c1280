// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Helpers for the conformance registry files (registry.cpp and registry_<family>.cpp). A
// family file registers its entries with a file-level
//   static const RegistryPart part({ OP(name) { return {kiln::...}; } END, ... });
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "conformance/golden.h"

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

}  // namespace reg

}  // namespace kiln::conformance

/// One registry entry: OP(name) { body using in, at, dev } END
#define OP(name)                                                     \
  {                                                                  \
#name, []([[maybe_unused]] const ::kiln::conformance::Args& in,  \
              [[maybe_unused]] const ::kiln::conformance::Attrs& at, \
              [[maybe_unused]] const ::kiln::Device& dev) -> ::kiln::conformance::Outs
#define END }
