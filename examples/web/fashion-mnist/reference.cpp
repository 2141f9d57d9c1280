// SPDX-License-Identifier: MIT OR Apache-2.0
// web_demo_reference: native Kiln's results of what the page's browser test does (test.html),
// on the same code (demo_core.h): the test weights, the class probabilities of the 16 sample
// images, 5 fine-tuning steps on the first 8 with their labels, and the probabilities after.
//   web_demo_reference SAMPLES.bin              prints the JSON (reference.json is its output)
//   web_demo_reference SAMPLES.bin --check REF  compares with REF: probabilities within 1e-5,
//                                               losses within 1e-4 (exit 1 when stale)
//   web_demo_reference SAMPLES.bin --time       milliseconds per single-image inference on one
//                                               thread, as the page calls it (bench/WEB.md)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "demo_core.h"

namespace {

using kiln::web_demo::kPixels;
constexpr int kSamples = 16, kTuned = 8, kSteps = 5;
constexpr double kLr = 1e-3;

// The sample images (samples.bin): pixels in [0, 1] and labels.
void read_samples(const std::string& samples, std::vector<float>& pixels, std::vector<int64_t>& labels) {
  std::ifstream f(samples, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() != static_cast<size_t>(kSamples * (1 + kPixels)))
    throw std::runtime_error(samples + ": not 16 labels and 16 images of 784 pixels");
  for (int i = 0; i < kSamples; ++i) labels.push_back(static_cast<uint8_t>(bytes[i]));
  for (size_t i = kSamples; i < bytes.size(); ++i) pixels.push_back(static_cast<uint8_t>(bytes[i]) / 255.0f);
}

nlohmann::json run(const std::string& samples) {
  std::vector<int64_t> labels;
  std::vector<float> pixels;
  read_samples(samples, pixels, labels);
  kiln::web_demo::Demo d;
  d.test_weights();
  nlohmann::json out;
  out["probs"] = d.predict(pixels, kSamples).contiguous().to_vector<float>();
  const std::vector<float> first(pixels.begin(), pixels.begin() + kTuned * kPixels);
  const std::vector<int64_t> first_labels(labels.begin(), labels.begin() + kTuned);
  out["losses"] = d.fine_tune(first, first_labels, kTuned, kSteps, kLr);
  out["tuned_probs"] = d.predict(pixels, kSamples).contiguous().to_vector<float>();
  return out;
}

// The best of 5 runs of 32 single-image inferences on one thread, in ms per image.
double time_per_image(const std::string& samples) {
  std::vector<int64_t> labels;
  std::vector<float> pixels;
  read_samples(samples, pixels, labels);
  kiln::set_num_threads(1);
  kiln::web_demo::Demo d;
  d.test_weights();
  const std::vector<float> one(pixels.begin(), pixels.begin() + kPixels);
  d.predict(one, 1);  // warm-up
  double best = INFINITY;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 32; ++i) d.predict(one, 1);
    best =
        std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 32);
  }
  return best;
}

// The largest |a - b| over two arrays of numbers (infinity when their lengths differ).
double max_diff(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i].get<double>() - b[i].get<double>()));
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  const bool timing = argc == 3 && std::string(argv[2]) == "--time";
  if (argc != 2 && !timing && !(argc == 4 && std::string(argv[2]) == "--check")) {
    std::fprintf(stderr, "usage: web_demo_reference SAMPLES.bin [--check REFERENCE.json | --time]\n");
    return 2;
  }
  try {
    if (timing) {
      std::printf("%.4f\n", time_per_image(argv[1]));
      return 0;
    }
    const nlohmann::json got = run(argv[1]);
    if (argc == 2) {
      std::printf("%s\n", got.dump(1).c_str());
      return 0;
    }
    std::ifstream f(argv[3]);
    const nlohmann::json want = nlohmann::json::parse(f);
    const double dp =
        std::max(max_diff(got["probs"], want["probs"]), max_diff(got["tuned_probs"], want["tuned_probs"]));
    const double dl = max_diff(got["losses"], want["losses"]);
    std::printf("probabilities: max difference %.3g (bound 1e-5); losses: %.3g (bound 1e-4)\n", dp, dl);
    if (!(dp <= 1e-5 && dl <= 1e-4)) {
      std::fprintf(stderr, "%s is stale: regenerate it with web_demo_reference %s > %s\n", argv[3], argv[1], argv[3]);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "web_demo_reference: %s\n", e.what());
    return 1;
  }
}
