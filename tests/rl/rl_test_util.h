// SPDX-License-Identifier: MIT OR Apache-2.0
// Helpers of kiln::rl's tests: the reference data of scripts/gen_rl_reference.py.
#pragma once
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/store.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "test_paths.h"

namespace kiln::test {

/// The tensors of tests/data/rl/<name>.safetensors.
inline const store::TensorMap& rl_data(const std::string& name) {
  static std::map<std::string, store::TensorMap> cache;
  auto it = cache.find(name);
  if (it == cache.end())
    it =
        cache.emplace(name, store::load_safetensors(std::string(KILN_RL_DATA_DIR) + "/" + name + ".safetensors")).first;
  return it->second;
}

/// Tensor `key` of reference file `name` (fails the test when missing).
inline Tensor rl_ref(const std::string& name, const std::string& key) {
  const Tensor* t = rl_data(name).find(key);
  if (!t) {
    ADD_FAILURE() << "no tensor " << key << " in " << name;
    return zeros({0});
  }
  return *t;
}

/// The values of a reference tensor as doubles.
inline std::vector<double> rl_vec(const std::string& name, const std::string& key) {
  return rl_ref(name, key).to(f64).contiguous().to_vector<double>();
}

/// Expects equal sizes and |a - b| <= atol + rtol |b| elementwise; `what` names the values.
inline void expect_near_all(const std::vector<double>& a, const std::vector<double>& b, double atol, double rtol,
                            const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < a.size() && bad < 5; ++i)
    if (!(std::abs(a[i] - b[i]) <= atol + rtol * std::abs(b[i]))) {
      ++bad;
      ADD_FAILURE() << what << " [" << i << "]: " << a[i] << " vs reference " << b[i];
    }
}

}  // namespace kiln::test
