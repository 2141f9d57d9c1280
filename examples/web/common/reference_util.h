// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// What the demos' native reference programs share (fashion-mnist/reference.cpp,
// resnet/reference.cpp): the sample images, the comparison of two arrays and the timing of
// single-image inferences as a page makes them.
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::web_demo {

constexpr int64_t kSamplePixels = 28 * 28;
constexpr int kSamples = 16;

/// The sample images (samples.bin, scripts/gen_web_samples.py): 16 labels, then 16 images of
/// 28 x 28 bytes; pixels become floats in [0, 1].
struct Samples {
  std::vector<float> pixels;  ///< [16 * 784]
  std::vector<int64_t> labels;
  /// The first image's pixels.
  std::vector<float> first() const { return {pixels.begin(), pixels.begin() + kSamplePixels}; }
};
inline Samples read_samples(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() != static_cast<size_t>(kSamples * (1 + kSamplePixels)))
    throw std::runtime_error(path + ": not 16 labels and 16 images of 784 pixels");
  Samples s;
  for (int i = 0; i < kSamples; ++i) s.labels.push_back(static_cast<uint8_t>(bytes[static_cast<size_t>(i)]));
  for (size_t i = kSamples; i < bytes.size(); ++i) s.pixels.push_back(static_cast<uint8_t>(bytes[i]) / 255.0f);
  return s;
}

/// The largest |a - b| over two JSON arrays of numbers (infinity when their lengths differ).
inline double max_diff(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i].get<double>() - b[i].get<double>()));
  return m;
}

/// Milliseconds per call of `infer` on one thread: the best of 5 runs of 32 calls, after one.
inline double best_ms_per_call(const std::function<void()>& infer) {
  kiln::set_num_threads(1);
  infer();  // warm-up
  double best = INFINITY;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 32; ++i) infer();
    best =
        std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 32);
  }
  return best;
}

/// The reference programs' command line:
///   NAME SAMPLES.bin              prints run(samples) as JSON (the checked-in reference)
///   NAME SAMPLES.bin --check REF  check(run(samples), REF's JSON, samples): "" when they agree,
///                                 else what differs (exit 1)
///   NAME SAMPLES.bin --time       prints time(samples): milliseconds per image, one thread
inline int reference_main(
    int argc, char** argv, const char* name, const std::function<nlohmann::json(const std::string&)>& run,
    const std::function<std::string(const nlohmann::json&, const nlohmann::json&, const std::string&)>& check,
    const std::function<double(const std::string&)>& time) {
  const bool timing = argc == 3 && std::string(argv[2]) == "--time";
  if (argc != 2 && !timing && !(argc == 4 && std::string(argv[2]) == "--check")) {
    std::fprintf(stderr, "usage: %s SAMPLES.bin [--check REFERENCE.json | --time]\n", name);
    return 2;
  }
  try {
    if (timing) {
      std::printf("%.4f\n", time(argv[1]));
      return 0;
    }
    const nlohmann::json got = run(argv[1]);
    if (argc == 2) {
      std::printf("%s\n", got.dump(1).c_str());
      return 0;
    }
    std::ifstream f(argv[3]);
    const std::string stale = check(got, nlohmann::json::parse(f), argv[1]);
    if (stale.empty()) return 0;
    std::fprintf(stderr, "%s: %s\n", argv[3], stale.c_str());
    std::fprintf(stderr, "regenerate it with %s %s > %s when the change is meant\n", name, argv[1], argv[3]);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace kiln::web_demo
