// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln_micro_ref: the reference of the micro target's tests. Runs an ONNX model with Kiln's
// run-time ONNX path (kiln::onnx::Model, on the CPU) and writes a C header with its inputs and
// outputs, which the test programs (tests/micro/micro_test_main.cpp, examples/micro/main.cpp)
// compile in and compare the generated code's outputs against.
//   kiln_micro_ref MODEL.onnx OUT.h [--dim PARAM=N]...      seeded inputs uniform in [-1, 1)
//       [--inputs DIR]   the inputs DIR/input_<i>.pb instead (an ONNX test case's data set)
//       [--ns NAME]      everything in namespace NAME, counts as constexpr (several in one program)
//       [--index-input I]  input I (int64) holds Gather indices: the test checks an index out of range
//       [--constant NAME]  input NAME is bound to a constant in the generated code (kiln-onnx
//                          --constant): Kiln's run takes it, the header leaves it out
//   kiln_micro_ref MODEL.onnx OUT.h --images IMAGES.h        the uint8 images of kTestPixels / 255
//   kiln_micro_ref --export TYPE OUT.onnx                    a seeded Kiln model of an example's
//       type (tools/kiln-onnx/models.h) exported with kiln::onnx::export_model, dynamic batch
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/capture.h"
#include "kiln/kiln.h"
#include "kiln/onnx.h"
#include "kiln/onnx_export.h"
#include "models.h"

namespace {

std::string int_array(const std::string& name, const std::vector<int64_t>& v) {
  std::string s = "static const int64_t " + name + "[" + std::to_string(v.size() ? v.size() : 1) + "] = {";
  for (size_t i = 0; i < v.size(); ++i) s += (i % 12 ? " " : "\n    ") + std::to_string(v[i]) + ",";
  return s + (v.empty() ? "0};\n" : "\n};\n");
}

std::string array(const std::string& name, const std::vector<float>& v) {
  std::string s = "static const float " + name + "[" + std::to_string(v.size() ? v.size() : 1) + "] = {";
  char buf[48];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%af,", static_cast<double>(v[i]));
    s += (i % 6 ? " " : "\n    ") + std::string(buf);
  }
  return s + (v.empty() ? "0};\n" : "\n};\n");
}

// The uint8 pixels listed after "kTestPixels" in a header written by scripts/gen_micro_models.py.
std::vector<std::vector<float>> read_images(const std::string& path) {
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t at = text.find("kTestPixels");
  if (at == std::string::npos) throw std::runtime_error("no kTestPixels in " + path);
  at = text.find("= {", at);
  std::vector<std::vector<float>> images;
  std::vector<float> cur;
  int value = -1;
  for (size_t i = at + 3; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      value = (value < 0 ? 0 : value * 10) + (c - '0');
      continue;
    }
    if (value >= 0) cur.push_back(static_cast<float>(value) / 255.0f);
    value = -1;
    if (c == '}' && !cur.empty()) {
      images.push_back(cur);
      cur.clear();
    } else if (c == ';') {
      break;
    }
  }
  return images;
}

}  // namespace

// A Kiln model of `type` with seeded weights, exported as kiln-onnx export does.
int export_model(const std::string& type, const std::string& out) {
  kiln::manual_seed(35);
  const std::string json = "{\"type\": \"" + type + "\", \"config\": {}}";
  kiln::onnx_models::Exportable m = kiln::onnx_models::make_model(json, 2, 8);
  m.module->eval();
  kiln::onnx::ExportOptions o;
  o.dynamic = {{"input", {m.batch_axis}}};
  kiln::CapturedGraph g = kiln::capture(
      *m.module, [&](const std::vector<kiln::Tensor>& x) { return std::vector<kiln::Tensor>{m.forward(x[0])}; },
      {kiln::zeros(m.input_shape)});
  kiln::onnx::export_model(g, out, o);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--export") {
    try {
      return export_model(argv[2], argv[3]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kiln_micro_ref: %s\n", e.what());
      return 1;
    }
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: kiln_micro_ref MODEL.onnx OUT.h [--dim PARAM=N]... [--images IMAGES.h]\n");
    return 2;
  }
  try {
    std::map<std::string, int64_t> dims;
    std::string images, inputs_dir, ns, index_input;
    std::set<std::string> constants;
    for (int i = 3; i + 1 < argc; i += 2) {
      const std::string a = argv[i], v = argv[i + 1];
      if (a == "--dim")
        dims[v.substr(0, v.find('='))] = std::stoll(v.substr(v.find('=') + 1));
      else if (a == "--images")
        images = v;
      else if (a == "--inputs")
        inputs_dir = v;
      else if (a == "--ns")
        ns = v;
      else if (a == "--index-input")
        index_input = v;
      else if (a == "--constant")
        constants.insert(v);
    }
    kiln::onnx::Model m(argv[1], kiln::Device::cpu());
    std::ostringstream h;
    // The model by file name only: the header is the same in every checkout (ccache reuses it).
    h << "// Generated by kiln_micro_ref from " << std::filesystem::path(argv[1]).filename().string()
      << " (Kiln's run-time ONNX path). Do not edit.\n"
      << "#pragma once\n#include <stddef.h>\n\n";
    if (!ns.empty()) h << "namespace " << ns << " {\n\n";
    if (!images.empty()) {
      const auto imgs = read_images(images);
      h << "#define REF_NUM_IMAGES " << imgs.size() << "\n";
      std::string rows;
      for (size_t i = 0; i < imgs.size(); ++i) {
        auto out = m.run({kiln::tensor(imgs[i], kiln::Shape{1, 1, 28, 28}, kiln::Device::cpu())});
        const auto logits = out.at(0).to_vector<float>();
        h << array("ref_logits_" + std::to_string(i), logits);
        rows += (rows.empty() ? "" : ", ") + std::string("ref_logits_") + std::to_string(i);
      }
      h << "static const float* const ref_logits[] = {" << rows << "};\n";
    } else {
      std::vector<kiln::Tensor> ins;
      std::string in_names, in_sizes, out_names, out_sizes;
      uint32_t state = 12345u;
      bool any_int = false;
      size_t written = 0;  // inputs of the generated entry point (those not bound to constants)
      for (size_t i = 0; i < m.inputs().size(); ++i) {
        const auto& vi = m.inputs()[i];
        kiln::Tensor t;
        if (!inputs_dir.empty()) {
          t = kiln::onnx::load_tensor_proto(inputs_dir + "/input_" + std::to_string(i) + ".pb", kiln::Device::cpu());
        } else {
          kiln::Shape shape;
          for (const auto& d : vi.shape) shape.push_back(d.value ? *d.value : dims.at(d.param));
          std::vector<float> v(static_cast<size_t>(kiln::shape_numel(shape)));
          for (float& x : v) {
            state = state * 1664525u + 1013904223u;
            x = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
          }
          t = kiln::tensor(v, shape, kiln::Device::cpu());
        }
        const bool is_int = kiln::is_integral(t.dtype());  // token ids, masks: int64
        ins.push_back(is_int ? t : kiln::cast(t, kiln::f32));
        if (constants.count(vi.name)) continue;
        const std::string id = "ref_in" + std::to_string(written);
        if (is_int) {
          h << int_array(id, kiln::cast(t, kiln::i64).contiguous().to_vector<int64_t>());
          any_int = true;
        } else {
          h << array(id, kiln::cast(t, kiln::f32).contiguous().to_vector<float>());
        }
        in_names += (written ? ", " : "") + id;
        in_sizes += (written ? ", " : "") + std::to_string(t.numel());
        ++written;
      }
      auto outs = m.run(ins);
      size_t total = 0;
      for (size_t i = 0; i < outs.size(); ++i) {
        const auto v = outs[i].contiguous().to_vector<float>();
        h << array("ref_out" + std::to_string(i), v);
        out_names += (i ? ", " : "") + std::string("ref_out") + std::to_string(i);
        out_sizes += (i ? ", " : "") + std::to_string(v.size());
        total += v.size();
      }
      if (ns.empty())
        h << "#define REF_NUM_INPUTS " << written << "\n#define REF_NUM_OUTPUTS " << outs.size()
          << "\n#define REF_OUTPUT_TOTAL " << total << "\n";
      else
        h << "constexpr int num_inputs = " << written << ", num_outputs = " << outs.size()
          << ";\nconstexpr size_t output_total = " << total << ";\n";
      const std::string ptr = any_int ? "const void*" : "const float*";
      h << "typedef " << ptr << " ref_input_ptr;\n";
      if (!index_input.empty())
        h << "#define REF_INDEX_INPUT " << index_input << "\n#define REF_INDEX_COUNT "
          << ins.at(std::stoul(index_input)).numel() << "\n";
      h << "static " << ptr << " const ref_inputs[] = {" << in_names << "};\n"
        << "static const size_t ref_input_sizes[] = {" << in_sizes << "};\n"
        << "static const float* const ref_outputs[] = {" << out_names << "};\n"
        << "static const size_t ref_output_sizes[] = {" << out_sizes << "};\n";
    }
    if (!ns.empty()) h << "\n}  // namespace " << ns << "\n";
    std::ofstream f(argv[2]);
    f << h.str();
    if (!f.good()) throw std::runtime_error(std::string("cannot write ") + argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_micro_ref: %s\n", e.what());
    return 1;
  }
  return 0;
}
