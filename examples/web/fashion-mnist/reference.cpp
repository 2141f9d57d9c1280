// SPDX-License-Identifier: MIT OR Apache-2.0
// web_demo_reference: native Kiln's results of what the page's browser test does (test.html),
// on the same code (demo_core.h): the test weights, the class probabilities of the 16 sample
// images, 5 fine-tuning steps on the first 8 with their labels, and the probabilities after.
//   web_demo_reference SAMPLES.bin              prints the JSON (reference.json is its output)
//   web_demo_reference SAMPLES.bin --check REF  compares with REF: probabilities within 1e-5,
//                                               losses within 1e-4 (exit 1 when stale)
//   web_demo_reference SAMPLES.bin --time       milliseconds per single-image inference on one
//                                               thread, as the page calls it (bench/WEB.md)
#include <cstdio>
#include <fstream>

#include "common/reference_util.h"
#include "demo_core.h"

namespace {

using kiln::web_demo::kPixels;
using kiln::web_demo::kSamples;
using kiln::web_demo::max_diff;
using kiln::web_demo::read_samples;
constexpr int kTuned = 8, kSteps = 5;
constexpr double kLr = 1e-3;

nlohmann::json run(const std::string& path) {
  const kiln::web_demo::Samples s = read_samples(path);
  kiln::web_demo::Demo d;
  d.test_weights();
  nlohmann::json out;
  out["probs"] = d.predict(s.pixels, kSamples).contiguous().to_vector<float>();
  const std::vector<float> first(s.pixels.begin(), s.pixels.begin() + kTuned * kPixels);
  const std::vector<int64_t> first_labels(s.labels.begin(), s.labels.begin() + kTuned);
  out["losses"] = d.fine_tune(first, first_labels, kTuned, kSteps, kLr);
  out["tuned_probs"] = d.predict(s.pixels, kSamples).contiguous().to_vector<float>();
  return out;
}

// Milliseconds per single-image inference on one thread (best_ms_per_call).
double time_per_image(const std::string& path) {
  kiln::web_demo::Demo d;
  d.test_weights();
  const std::vector<float> one = read_samples(path).first();
  return kiln::web_demo::best_ms_per_call([&] { d.predict(one, 1); });
}

// Probabilities within 1e-5, losses within 1e-4.
std::string check(const nlohmann::json& got, const nlohmann::json& want, const std::string&) {
  const double dp = std::max(max_diff(got["probs"], want["probs"]), max_diff(got["tuned_probs"], want["tuned_probs"]));
  const double dl = max_diff(got["losses"], want["losses"]);
  std::printf("probabilities: max difference %.3g (bound 1e-5); losses: %.3g (bound 1e-4)\n", dp, dl);
  return dp <= 1e-5 && dl <= 1e-4 ? "" : "stale: the results differ from it";
}

}  // namespace

int main(int argc, char** argv) {
  return kiln::web_demo::reference_main(argc, argv, "web_demo_reference", run, check, time_per_image);
}
