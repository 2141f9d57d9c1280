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

nlohmann::json run(const std::string& path) {
  const Samples s = read_samples(path);
  ResNetDemo d;
  load_generated_weights(d);
  const kiln::Tensor probs = d.predict(s.pixels, kSamples);
  nlohmann::json out;
  out["probs"] = probs.contiguous().to_vector<float>();
  out["predicted"] = probs.argmax(1).to_vector<int64_t>();
  out["labels"] = s.labels;
  return out;
}

/// The run-time path's probabilities of the same images (kiln::onnx::Model).
nlohmann::json run_time_probs(const std::string& path) {
  kiln::onnx::Model model(KILN_RESNET_ONNX, kiln::Device::cpu());
  const kiln::Tensor logits = model.run({kiln::tensor(read_samples(path).pixels, {kSamples, 1, 28, 28})})[0];
  return kiln::softmax(logits, 1).contiguous().to_vector<float>();
}

// Probabilities within 1e-5 of the reference and of the run-time path.
std::string check(const nlohmann::json& got, const nlohmann::json& want, const std::string& samples) {
  const double dp = max_diff(got["probs"], want["probs"]);
  const double dr = max_diff(got["probs"], run_time_probs(samples));
  std::printf("probabilities: max difference %.3g from the reference, %.3g from the run-time ONNX path (bound 1e-5)\n",
              dp, dr);
  if (!(dr <= 1e-5)) return "the generated code and the run-time path disagree";
  return dp <= 1e-5 ? "" : "stale: the results differ from it";
}

// Milliseconds per single-image inference on one thread (best_ms_per_call).
double time_per_image(const std::string& path) {
  ResNetDemo d;
  load_generated_weights(d);
  const std::vector<float> one = read_samples(path).first();
  return best_ms_per_call([&] { d.predict(one, 1); });
}

}  // namespace

int main(int argc, char** argv) {
  return reference_main(argc, argv, "web_resnet_reference", run, check, time_per_image);
}
