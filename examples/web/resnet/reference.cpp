// SPDX-License-Identifier: MIT OR Apache-2.0
// web_resnet_reference: native Kiln's results of what the ResNet page's browser test does
// (test.html), on the same code (demo_core.h, the generated FashionResNet): the class
// probabilities of the 16 sample images. It also runs model.onnx through Kiln's run-time ONNX
// path, which must agree with the generated code.
//   web_resnet_reference SAMPLES.bin              prints the JSON (reference.json is its output)
//   web_resnet_reference SAMPLES.bin --check REF  compares with REF, and the generated code with
//                                                 the run-time path: within 1e-5 (exit 1 if not)
//   web_resnet_reference SAMPLES.bin --time       milliseconds per single-image inference on one
//                                                 thread, as the page calls it (bench/WEB.md)
#include <kiln/onnx.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "common/reference_util.h"
#include "resnet/demo_core.h"

namespace {

using namespace kiln::web_demo;

/// The generated module with the weights kiln-onnx wrote beside it, read as the page reads them.
void load_generated_weights(ResNetDemo& d) {
  std::ifstream f(FashionResNet::weights_path(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  d.load(bytes.data(), bytes.size(), "model.safetensors");
}

nlohmann::json run(const std::string& samples) {
  std::vector<int64_t> labels;
  std::vector<float> pixels;
  read_samples(samples, pixels, labels);
  ResNetDemo d;
  load_generated_weights(d);
  const kiln::Tensor probs = d.predict(pixels, kSamples);
  nlohmann::json out;
  out["probs"] = probs.contiguous().to_vector<float>();
  out["predicted"] = probs.argmax(1).to_vector<int64_t>();
  out["labels"] = labels;
  return out;
}

/// The run-time path's probabilities of the same images (kiln::onnx::Model).
nlohmann::json run_time_probs(const std::string& samples) {
  std::vector<int64_t> labels;
  std::vector<float> pixels;
  read_samples(samples, pixels, labels);
  kiln::onnx::Model model(KILN_RESNET_ONNX, kiln::Device::cpu());
  const kiln::Tensor logits = model.run({kiln::tensor(pixels, {kSamples, 1, 28, 28})})[0];
  return kiln::softmax(logits, 1).contiguous().to_vector<float>();
}

}  // namespace

int main(int argc, char** argv) {
  const bool timing = argc == 3 && std::string(argv[2]) == "--time";
  if (argc != 2 && !timing && !(argc == 4 && std::string(argv[2]) == "--check")) {
    std::fprintf(stderr, "usage: web_resnet_reference SAMPLES.bin [--check REFERENCE.json | --time]\n");
    return 2;
  }
  try {
    if (timing) {
      std::vector<int64_t> labels;
      std::vector<float> pixels;
      read_samples(argv[1], pixels, labels);
      ResNetDemo d;
      load_generated_weights(d);
      const std::vector<float> one(pixels.begin(), pixels.begin() + kSamplePixels);
      std::printf("%.4f\n", best_ms_per_call([&] { d.predict(one, 1); }));
      return 0;
    }
    const nlohmann::json got = run(argv[1]);
    if (argc == 2) {
      std::printf("%s\n", got.dump(1).c_str());
      return 0;
    }
    std::ifstream f(argv[3]);
    const nlohmann::json want = nlohmann::json::parse(f);
    const double dp = max_diff(got["probs"], want["probs"]);
    const double dr = max_diff(got["probs"], run_time_probs(argv[1]));
    std::printf("probabilities: max difference %.3g from %s, %.3g from the run-time ONNX path (bound 1e-5)\n", dp,
                argv[3], dr);
    if (!(dr <= 1e-5)) {
      std::fprintf(stderr, "the generated code and the run-time path disagree\n");
      return 1;
    }
    if (!(dp <= 1e-5)) {
      std::fprintf(stderr, "%s is stale: regenerate it with web_resnet_reference %s > %s\n", argv[3], argv[1], argv[3]);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "web_resnet_reference: %s\n", e.what());
    return 1;
  }
}
