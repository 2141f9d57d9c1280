// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The real-architecture ONNX fixtures (tests/fixtures/onnx/<model>/, made by
// scripts/onnx_export_models.py): model.onnx and test sets set_<k>/input_<i>.pb, output_<i>.pb
// holding inputs and ONNX Runtime's outputs. Shared by test_onnx_models.cpp and tests/onnx/gen/.
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/onnx.h"
#include "kiln/ops.h"

namespace kiln_onnx_fixtures {

/// The five exported models.
inline const std::vector<std::string>& model_names() {
  static const std::vector<std::string> v = {"resnet", "mobilenet", "bert", "lstm", "unet"};
  return v;
}

/// One test set: inputs and the expected (ONNX Runtime) outputs.
struct TestSet {
  std::vector<kiln::Tensor> inputs, outputs;
};

/// The test sets of a model folder, in order (set_0, set_1, ...).
inline std::vector<TestSet> load_sets(const std::filesystem::path& dir) {
  std::vector<TestSet> sets;
  for (int k = 0;; ++k) {
    auto sd = dir / ("set_" + std::to_string(k));
    if (!std::filesystem::exists(sd)) break;
    TestSet s;
    for (int i = 0; std::filesystem::exists(sd / ("input_" + std::to_string(i) + ".pb")); ++i)
      s.inputs.push_back(kiln::onnx::load_tensor_proto((sd / ("input_" + std::to_string(i) + ".pb")).string()));
    for (int i = 0; std::filesystem::exists(sd / ("output_" + std::to_string(i) + ".pb")); ++i)
      s.outputs.push_back(kiln::onnx::load_tensor_proto((sd / ("output_" + std::to_string(i) + ".pb")).string()));
    sets.push_back(std::move(s));
  }
  return sets;
}

/// max |a - b| over all elements (infinity when the shapes differ).
inline double max_abs_err(const kiln::Tensor& a, const kiln::Tensor& b) {
  if (a.shape() != b.shape()) return 1e30;
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace kiln_onnx_fixtures
