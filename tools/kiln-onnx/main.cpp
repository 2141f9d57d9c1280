// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln-onnx: ONNX model -> readable Kiln C++ (a kiln::nn::Module) + a safetensors weights file,
// and a Kiln model saved as safetensors -> ONNX.
//   kiln-onnx model.onnx --out gen/ --name MyModel [--stem my_model]
// Writes gen/my_model.h, gen/my_model.cpp and gen/my_model.safetensors.
//   kiln-onnx export config.json model.safetensors -o model.onnx [--batch N] [--seq-len T] [--static]
//                    [--opset N] [--fold-constants]
// Builds the model type that config.json names (models.h), loads its weights, captures its
// forward in eval mode and writes it as ONNX with a dynamic batch (docs/export.md).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>

#include "kiln/capture.h"
#include "kiln/error.h"
#include "kiln/onnx.h"
#include "kiln/onnx_export.h"
#include "kiln/onnx_micro.h"
#include "kiln/store.h"
#include "models.h"

namespace {
void usage() {
  std::string types;
  for (const std::string& t : kiln::onnx_models::model_types()) types += (types.empty() ? "" : ", ") + t;
  std::fprintf(stderr,
               "usage: kiln-onnx MODEL.onnx [--out DIR] [--name StructName] [--stem file_stem]\n"
               "Writes DIR/<stem>.h, DIR/<stem>.cpp (a kiln::nn::Module) and DIR/<stem>.safetensors.\n"
               "\n"
               "usage: kiln-onnx MODEL.onnx --target micro [--out DIR] [--name c_name] [--dim PARAM=N]...\n"
               "                 [--shape INPUT=D0xD1x...]... [--constant INPUT=TENSOR.pb]...\n"
               "Writes freestanding C++ for microcontrollers (docs/micro.md): DIR/<name>.h, DIR/<name>.cpp\n"
               "(entry point <name>_run, a static arena, const weights) and the kernels kiln_micro.h/.cpp.\n"
               "Shapes are fixed at generation time: --dim sizes a symbolic dim, --shape a whole input.\n"
               "--constant binds an input to the tensor of a TensorProto file (weights given as inputs).\n"
               "\n"
               "usage: kiln-onnx export CONFIG.json WEIGHTS.safetensors -o OUT.onnx [--batch N] [--seq-len T]\n"
               "                 [--static] [--opset N] [--fold-constants]\n"
               "Writes the model that CONFIG.json ({\"type\": ..., \"config\": {...}}, as kiln::nn::save_config\n"
               "writes it) describes, with the weights of WEIGHTS.safetensors, as an ONNX model whose input\n"
               "'input' has a dynamic batch axis (--static: fixed at --batch, default 2; --seq-len: the\n"
               "example length of sequence models, default 8). Known types: %s.\n",
               types.c_str());
}

[[noreturn]] void fail_usage(const std::string& why) {
  std::fprintf(stderr, "kiln-onnx: %s\n", why.c_str());
  usage();
  std::exit(2);
}

int64_t to_int(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < 1) fail_usage(flag + " needs a positive integer, got '" + v + "'");
  return x;
}

int export_main(int argc, char** argv) {
  std::string config, weights, out;
  int64_t batch = 2, seq_len = 8;
  bool dynamic = true;
  kiln::onnx::ExportOptions o;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail_usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--out" || a == "-o")
      out = value();
    else if (a == "--batch")
      batch = to_int(a, value());
    else if (a == "--seq-len")
      seq_len = to_int(a, value());
    else if (a == "--opset")
      o.opset = to_int(a, value());
    else if (a == "--static")
      dynamic = false;
    else if (a == "--fold-constants")
      o.fold_constants = true;
    else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-')
      fail_usage("unknown option '" + a + "'");
    else if (config.empty())
      config = a;
    else if (weights.empty())
      weights = a;
    else
      fail_usage("unexpected argument '" + a + "'");
  }
  if (config.empty() || weights.empty() || out.empty()) fail_usage("export needs a config, a weights file and --out");
  try {
    std::ifstream f(config);
    KILN_CHECK(f.good(), "kiln-onnx export", "cannot read the config '" << config << "'");
    std::stringstream text;
    text << f.rdbuf();
    kiln::onnx_models::Exportable m = kiln::onnx_models::make_model(text.str(), batch, seq_len);
    kiln::store::load(*m.module, weights);
    m.module->eval();
    if (dynamic) {
      KILN_CHECK(batch > 1, "kiln-onnx export",
                 "a dynamic batch needs an example batch above 1 (--batch " << batch << "); or pass --static");
      o.dynamic = {{"input", {m.batch_axis}}};
    }
    const kiln::Tensor example = kiln::zeros(m.input_shape);
    kiln::CapturedGraph g = kiln::capture(
        *m.module, [&](const std::vector<kiln::Tensor>& x) { return std::vector<kiln::Tensor>{m.forward(x[0])}; },
        {example});
    kiln::onnx::export_model(g, out, o);
    std::printf("kiln-onnx: wrote %s (%s, input %s, %s, %zu ops)\n", out.c_str(),
                kiln::onnx_models::config_type(text.str()).c_str(), kiln::to_string(m.input_shape).c_str(),
                dynamic ? ("dynamic batch axis " + std::to_string(m.batch_axis)).c_str() : "static shape",
                g.nodes.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln-onnx: %s\n", e.what());
    return 1;
  }
  return 0;
}

// `kiln-onnx MODEL.onnx --target micro ...` (flags after the model as in the module target).
int micro_main(int argc, char** argv) {
  std::string model;
  kiln::onnx::MicroOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail_usage(a + " needs a value");
      return argv[++i];
    };
    auto split = [&](const std::string& v) -> std::pair<std::string, std::string> {
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) fail_usage(a + " needs NAME=VALUE, got '" + v + "'");
      return {v.substr(0, eq), v.substr(eq + 1)};
    };
    if (a == "--target") {
      if (value() != "micro") fail_usage("--target takes 'micro'");
    } else if (a == "--out" || a == "-o") {
      o.out_dir = value();
    } else if (a == "--name") {
      o.name = value();
    } else if (a == "--dim") {
      auto [k, v] = split(value());
      o.dims[k] = to_int(a, v);
    } else if (a == "--shape") {
      auto [k, v] = split(value());
      std::vector<int64_t> dims;
      std::stringstream ss(v);
      for (std::string d; std::getline(ss, d, 'x');) dims.push_back(to_int(a, d));
      o.shapes[k] = dims;
    } else if (a == "--constant") {
      auto [k, v] = split(value());
      o.constants[k] = v;
    } else if (!a.empty() && a[0] == '-') {
      fail_usage("unknown option '" + a + "' for --target micro");
    } else if (model.empty()) {
      model = a;
    } else {
      fail_usage("unexpected argument '" + a + "'");
    }
  }
  if (model.empty()) fail_usage("--target micro needs a model");
  try {
    auto r = kiln::onnx::generate_micro(model, o);
    std::printf(
        "kiln-onnx: wrote %s, %s (+ %zu kernel files): %lld steps, arena %lld bytes (liveness bound %lld), "
        "weights %lld bytes\n",
        r.header.c_str(), r.source.c_str(), r.kernels.size(), static_cast<long long>(r.steps),
        static_cast<long long>(r.arena_bytes), static_cast<long long>(r.lower_bound_bytes),
        static_cast<long long>(r.weight_bytes));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln-onnx: %s\n", e.what());
    return 1;
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "export") return export_main(argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--target") return micro_main(argc, argv);
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
