// SPDX-License-Identifier: MIT OR Apache-2.0
// Shared helpers of the ported-script tests: each test repeats a small PyTorch training script
// (scripts/gen_port_reference.py) in Kiln, from PyTorch's initial weights and data, and compares
// the loss of every step with PyTorch's.
#pragma once

#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/store.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "test_paths.h"

namespace kiln::port {

/// The reference file of one script: initial weights, data.* and ref.* tensors.
struct Reference {
  std::string path;
  store::TensorMap map;

  /// The tensor `name` on `device`; fails the test when the file has none.
  Tensor get(const std::string& name, const Device& device = Device::cpu()) const {
    const Tensor* t = map.find(name);
    if (t == nullptr) throw Error("[port] " + path + " has no tensor '" + name + "'");
    return t->to(device);
  }
  /// PyTorch's loss before each step's update.
  std::vector<double> loss() const { return loss_of("ref.loss"); }
  /// Any f64 reference tensor as a vector.
  std::vector<double> loss_of(const std::string& name) const { return get(name).to_vector<double>(); }

  /// Loads the initial weights into `model` strictly (every parameter and buffer, by name).
  template <class M>
  void load_into(M& model) const {
    store::LoadReport r = store::load(model, path, {.exclude = {"^(data|ref)\\."}});
    ASSERT_TRUE(r.ok()) << r.str();
  }
};

inline Reference reference(const std::string& script) {
  Reference r;
  r.path = std::string(KILN_PORT_DATA_DIR) + "/" + script + ".safetensors";
  r.map = store::read(r.path);
  return r;
}

/// Largest relative deviation |kiln - torch| / max(|torch|, 1e-3) over the trajectory.
inline double max_rel_dev(const std::vector<double>& kiln_loss, const std::vector<double>& torch_loss) {
  double worst = 0;
  for (size_t i = 0; i < std::min(kiln_loss.size(), torch_loss.size()); ++i)
    worst = std::max(worst, std::abs(kiln_loss[i] - torch_loss[i]) / std::max(std::abs(torch_loss[i]), 1e-3));
  return worst;
}

/// Expects Kiln's loss trajectory to follow PyTorch's step by step within `rtol` (relative).
inline void expect_trajectory(const std::string& script, const std::vector<double>& kiln_loss,
                              const std::vector<double>& torch_loss, double rtol = 1e-4) {
  ASSERT_EQ(kiln_loss.size(), torch_loss.size()) << script;
  for (size_t i = 0; i < torch_loss.size(); ++i)
    EXPECT_NEAR(kiln_loss[i], torch_loss[i], rtol * std::max(std::abs(torch_loss[i]), 1e-3)) << script << " step " << i;
  std::printf("[port] %s: %zu steps, loss %.6f -> %.6f, max relative deviation from PyTorch %.2e\n", script.c_str(),
              torch_loss.size(), torch_loss.front(), torch_loss.back(), max_rel_dev(kiln_loss, torch_loss));
}

}  // namespace kiln::port
