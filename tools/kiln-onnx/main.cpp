// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln-onnx: ONNX model -> readable Kiln C++ (a kiln::nn::Module) + a safetensors weights file.
//   kiln-onnx model.onnx --out gen/ --name MyModel [--stem my_model]
// Writes gen/my_model.h, gen/my_model.cpp and gen/my_model.safetensors.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "kiln/error.h"
#include "kiln/onnx.h"

namespace {
void usage() {
  std::fprintf(stderr,
               "usage: kiln-onnx MODEL.onnx [--out DIR] [--name StructName] [--stem file_stem]\n"
               "Writes DIR/<stem>.h, DIR/<stem>.cpp (a kiln::nn::Module) and DIR/<stem>.safetensors.\n");
}
}  // namespace

int main(int argc, char** argv) {
  std::string model;
  kiln::onnx::GenerateOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kiln-onnx: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--out" || a == "-o")
      o.out_dir = value("--out");
    else if (a == "--name")
      o.name = value("--name");
    else if (a == "--stem")
      o.file_stem = value("--stem");
    else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kiln-onnx: unknown option '%s'\n", a.c_str());
      usage();
      return 2;
    } else if (model.empty())
      model = a;
    else {
      usage();
      return 2;
    }
  }
  if (model.empty()) {
    usage();
    return 2;
  }
  try {
    auto r = kiln::onnx::generate(model, o);
    std::printf("kiln-onnx: wrote %s, %s, %s (%lld modules, %lld generic op calls)\n", r.header.c_str(),
                r.source.c_str(), r.weights.c_str(), static_cast<long long>(r.modules),
                static_cast<long long>(r.generic_calls));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln-onnx: %s\n", e.what());
    return 1;
  }
  return 0;
}
