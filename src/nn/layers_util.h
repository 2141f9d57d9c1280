// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Internal helpers of the layer implementations (src/nn/layers_*.cpp).
#include <string>

#include "kiln/nn/functional/common.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/module.h"
#include "kiln/tensor.h"

namespace kiln::nn::layers_detail {

/// The key of an op a convolution module keeps between inference calls (Note [Prepared steps]
/// in ops/prepared.h): `kind` (which call built it), the given operands, the module's geometry.
/// False when the module does not keep its op (padding "same" or "valid", a padding mode).
template <int N>
bool conv_key(const ConvNd<N>& conv, int64_t kind, int64_t given, SmallVec<int64_t, 32>& key) {
  const ConvConfig& c = conv.config;
  if (!conv.prepared_ || !c.padding.text().empty() || c.padding_mode != "zeros") return false;
  key.push_back(kind);
  key.push_back(N);
  key.push_back(given);
  key.push_back(c.groups);
  for (const Dims* d : {&c.stride.values(), &c.padding.values().values(), &c.dilation.values()}) {
    key.push_back(static_cast<int64_t>(d->size()));
    for (int64_t x : *d) key.push_back(x);
  }
  return true;
}

/// "(3, 3)" for an IntList expanded to n dims ("(3,)" for one), as PyTorch prints tuples.
inline std::string tuple_str(const Dims& d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  if (d.size() == 1) s += ",";
  return s + ")";
}
inline std::string tuple_str(const functional::IntList& l, int64_t n) {
  const Dims& v = l.values();
  if (v.size() == 1) return tuple_str(Dims(static_cast<size_t>(n), v[0]));
  return tuple_str(v);
}
/// The shape of x for error messages ("undefined" when it has none).
inline std::string shape_str(const Tensor& x) { return x.defined() ? to_string(x.shape()) : std::string("undefined"); }
/// "Conv2d(3, 8, kernel_size=(3, 3))": the layer as printed, for error messages.
inline std::string describe(const Module& m) { return m.type_name() + "(" + m.extra_repr() + ")"; }
/// "[N, 3, *]" style description of the expected input: "[N, C, " + n spatial names.
inline std::string spatial_names(int n) {
  static const char* names[3][3] = {{"L", "", ""}, {"H", "W", ""}, {"D", "H", "W"}};
  std::string s;
  for (int i = 0; i < n; ++i) s += std::string(i ? ", " : "") + names[n - 1][i];
  return s;
}

}  // namespace kiln::nn::layers_detail
