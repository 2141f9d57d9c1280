// SPDX-License-Identifier: MIT OR Apache-2.0
// Helpers of kiln::vision's tests: the reference data of scripts/gen_vision_reference.py.
#pragma once
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/store.h>

#include <cmath>
#include <map>
#include <string>

#include "test_paths.h"

namespace kiln::test {

/// The tensors of tests/data/vision/<name>.safetensors.
inline const store::TensorMap& vision_data(const std::string& name) {
  static std::map<std::string, store::TensorMap> cache;
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(name, store::load_safetensors(std::string(KILN_VISION_DATA_DIR) + "/" + name + ".safetensors"))
             .first;
  return it->second;
}

/// Tensor `key` of reference file `name` (fails the test when missing).
inline Tensor ref(const std::string& name, const std::string& key) {
  const Tensor* t = vision_data(name).find(key);
  if (!t) {
    ADD_FAILURE() << "no tensor " << key << " in " << name;
    return zeros({0});
  }
  return *t;
}

/// Expects a and b of one shape, close elementwise as f64 (NaNs equal).
inline void expect_close(const Tensor& a, const Tensor& b, double atol = 1e-5, double rtol = 1e-5) {
  ASSERT_EQ(a.shape(), b.shape()) << to_string(a.shape()) << " vs " << to_string(b.shape());
  const auto av = a.to(f64).contiguous().to_vector<double>(), bv = b.to(f64).contiguous().to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < av.size() && bad < 5; ++i) {
    const bool ok =
        (std::isnan(av[i]) && std::isnan(bv[i])) || std::abs(av[i] - bv[i]) <= atol + rtol * std::abs(bv[i]);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << "element " << i << ": " << av[i] << " vs reference " << bv[i];
    }
  }
}

/// Expects integer tensors equal elementwise (as i64).
inline void expect_equal_i64(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.numel(), b.numel()) << to_string(a.shape()) << " vs " << to_string(b.shape());
  EXPECT_EQ(a.to(i64).contiguous().to_vector<int64_t>(), b.to(i64).contiguous().to_vector<int64_t>());
}

}  // namespace kiln::test
