// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX export op coverage: every primitive of the elementwise, reduce, scan, pool, contract,
// conv, index and norm families (and Cat and Pad) is run once through capture -> export -> Kiln's importer and ONNX
// Runtime (when installed) and compared with the CPU. An op without an ONNX form must say so ("has no ONNX form"),
// never export a wrong graph.
//   KILN_ONNX_EXPORT_WRITE_TABLE=docs/onnx-export-ops.md ./kiln_tests --gtest_filter=OnnxExportOps.*
// writes the coverage table.
#include <gtest/gtest.h>
#include <kiln/capture.h>
#include <kiln/kiln.h>
#include <kiln/onnx.h>
#include <kiln/onnx_export.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "ir/op.h"
#include "onnx/proto.h"
#include "onnxruntime_run.h"
#include "ops/dispatch.h"

using namespace kiln;
using ir::OpKind;

namespace {

/// Inputs and attributes of one op's probe.
struct Probe {
  std::vector<Tensor> inputs;
  ir::Attrs attrs;
};

Tensor xs() { return tensor({-2.5f, -1.2f, -0.3f, 0.4f, 0.9f, 1.7f}, {2, 3}); }
Tensor ys() { return tensor({0.7f, -1.3f, 2.1f, -0.4f, 1.1f, 0.6f}, {2, 3}); }
Tensor bools(bool flip) { return tensor({true, false, !flip, flip, true, false}, {2, 3}); }
Tensor ints(int shift) { return tensor({1 + shift, 6, 3, 12, 5, 2}, {2, 3}); }

std::optional<Probe> unary_probe(OpKind k) {
  Probe p{{xs()}, {}};
  switch (k) {
    case OpKind::Bernoulli:
      return std::nullopt;  // random
    case OpKind::LogicalNot:
      p.inputs = {bools(false)};
      break;
    case OpKind::BitwiseNot:
      p.inputs = {ints(0)};
      break;
    case OpKind::Round:
      p.attrs.ints = {0};
      break;
    case OpKind::LeakyRelu:
      p.attrs.reals = {0.1};
      break;
    case OpKind::Elu:
      p.attrs.reals = {1, 1, 1};
      break;
    case OpKind::Softplus:
      p.attrs.reals = {1, 20};
      break;
    case OpKind::Logit:
      p.attrs.reals = {-1};
      break;
    case OpKind::Clamp:
      p.attrs.ints = {1, 1}, p.attrs.reals = {-1, 1};
      break;
    case OpKind::NanToNum:
      p.attrs.reals = {0, 1e30, -1e30};
      break;
    case OpKind::IsInf:
      p.attrs.ints = {0};
      break;
    case OpKind::Cast:
      p.attrs.dtype = DType::I32;
      break;
    default:
      break;
  }
  return p;
}

std::optional<Probe> probe_for(OpKind k) {
  const std::string_view n = ir::op_name(k);
  switch (ir::op_family(k)) {
    case ir::Family::Unary:
      return unary_probe(k);
    case ir::Family::Binary: {
      if (n.starts_with("Logical")) return Probe{{bools(false), bools(true)}, {}};
      if (n.starts_with("Bitwise") || n.starts_with("Shift")) return Probe{{ints(0), ints(-1)}, {}};
      return Probe{{xs(), ys()}, {}};
    }
    case ir::Family::Ternary:
      if (k == OpKind::Where) return Probe{{bools(false), xs(), ys()}, {}};
      return Probe{{xs(), ys(), xs().abs() * 0.3}, {}};
    case ir::Family::Reduce: {
      Probe p{{k == OpKind::Any || k == OpKind::All ? bools(false) : xs()}, {}};
      p.attrs.ints = {0, 1};
      if (k == OpKind::Var) p.attrs.reals = {1, 0};
      return p;
    }
    case ir::Family::Scan: {
      Probe p{{xs()}, {}};
      p.attrs.ints = {1};
      if (k == OpKind::Sort) p.attrs.ints = {1, 0};
      return p;
    }
    case ir::Family::Pool: {
      Probe p{{arange(0, 16, 1, f32).reshape({1, 1, 4, 4})}, {}};
      if (k == OpKind::MaxPool) p.attrs.ints = {2, 2, 2, 2, 2, 0, 0, 1, 1, 0, 0};
      if (k == OpKind::AvgPool) p.attrs.ints = {2, 2, 2, 1, 1, 1, 1, 0, 1, 0};
      if (k == OpKind::AdaptiveAvgPool) p.attrs.ints = {2, 1, 1};
      if (k == OpKind::AdaptiveMaxPool) p.attrs.ints = {2, 1, 1, 0};
      if (k == OpKind::MaxUnpool) return std::nullopt;
      return p;
    }
    case ir::Family::Movement:
      if (k == OpKind::Cat) {
        Probe p{{xs(), ys()}, {}};
        p.attrs.ints = {0};
        return p;
      }
      if (k == OpKind::Pad) {
        Probe p{{xs()}, {}};
        p.attrs.ints = {0, 1, 2, 1, 0};
        p.attrs.reals = {0.5};
        return p;
      }
      return std::nullopt;
    case ir::Family::Contract:
      return Probe{{xs().reshape({1, 2, 3}), ys().reshape({1, 3, 2})}, {}};
    case ir::Family::Conv: {
      if (k == OpKind::ConvWeightGrad) return std::nullopt;  // a gradient: never in an exported graph
      Probe p{{arange(0, 18, 1, f32).reshape({1, 2, 3, 3}) * 0.1}, {}};
      p.inputs.push_back(arange(0, 36, 1, f32).reshape({2, 2, 3, 3}) * 0.05 - 0.8);
      if (k == OpKind::Conv) {
        p.inputs.push_back(tensor({0.5f, -0.25f}));
        p.attrs.ints = {1, 2, 1, 1, 1, 1, 1, 1};
      } else {
        p.attrs.ints = {1, 2, 2, 2, 1, 1, 1, 1, 1, 1};
      }
      return p;
    }
    case ir::Family::Index: {
      Probe p{{xs()}, {}};
      p.attrs.ints = {1};
      if (k == OpKind::Gather)
        p.inputs.push_back(tensor<int64_t>({0, 2, 1, 1, 1, 0}, {2, 3}));
      else if (k == OpKind::IndexSelect)
        p.inputs.push_back(tensor<int64_t>({2, 0}));
      else
        return std::nullopt;
      return p;
    }
    case ir::Family::Norm: {
      Probe p{{xs(), tensor({1.5f, 0.5f, 2.f}), tensor({0.1f, 0.2f, -0.3f})}, {}};
      p.attrs.ints = {1, 1, 1, 0};
      p.attrs.reals = {1e-5};
      return p;
    }
    default:
      return std::nullopt;
  }
}

/// Runs op on the device with inputs; its first output.
Tensor run_op(const ir::Op& op, const std::vector<Tensor>& inputs, const Device& d) {
  ir::Op o = op;
  std::vector<Tensor> in;
  for (const Tensor& t : inputs) in.push_back(t.to(d));
  return detail::run("probe", o, d, in)[0];
}

/// Max deviation relative to max(1, |want|), NaN equal to NaN.
double deviation(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  if (got.shape() != want.shape()) return INFINITY;
  std::vector<double> g = got.to(f64).to_vector<double>(), w = want.to(f64).to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    if (g[i] == w[i]) continue;
    m = std::max(m, std::abs(g[i] - w[i]) / std::max(1.0, std::abs(w[i])));
  }
  return m;
}

/// The ONNX form of an op that the model tests (test_onnx_export.cpp) cover, or "".
std::string model_tested(OpKind k) {
  switch (k) {
    case OpKind::Fill:
    case OpKind::Arange:
      return "an initializer (folded)";
    default:
      return "";
  }
}

/// One exported probe for ONNX Runtime.
struct OrtCase {
  std::string name, model;
  std::vector<Tensor> inputs;
  Tensor want;
};

/// Writes t's elements as numpy reads them (dtype name returned).
std::string write_raw(const Tensor& t, const std::filesystem::path& p) {
  std::ofstream f(p, std::ios::binary);
  if (t.dtype() == DType::Bool || t.dtype() == DType::U8) {
    std::vector<uint8_t> v = t.to(u8).to_vector<uint8_t>();
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size()));
    return t.dtype() == DType::Bool ? "bool" : "uint8";
  }
  if (t.dtype() == DType::I64) {
    std::vector<int64_t> v = t.to_vector<int64_t>();
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 8));
    return "int64";
  }
  if (t.dtype() == DType::I32) {
    std::vector<int32_t> v = t.to_vector<int32_t>();
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
    return "int32";
  }
  std::vector<float> v = t.to(f32).to_vector<float>();
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return "float32";
}

/// Checks every case's model with onnx.checker and runs it in ONNX Runtime (one python3 run);
/// the deviation of each from the CPU.
std::vector<double> run_all_onnxruntime(const std::vector<OrtCase>& cases) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln_export_ops_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream manifest(dir / "cases.txt");
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string c = std::to_string(i);
    std::ofstream(dir / (c + ".onnx"), std::ios::binary).write(cases[i].model.data(), cases[i].model.size());
    manifest << c;
    for (size_t j = 0; j < cases[i].inputs.size(); ++j) {
      const Tensor& t = cases[i].inputs[j];
      const std::string path = (dir / (c + "_" + std::to_string(j) + ".bin")).string();
      manifest << " " << path << ":" << write_raw(t, path) << ":";
      for (size_t k = 0; k < t.shape().size(); ++k) manifest << (k ? "," : "") << t.shape()[k];
    }
    manifest << "\n";
  }
  manifest.close();
  std::ofstream(dir / "run.py") << "import sys, os, numpy as np, onnx, onnxruntime as ort\n"
                                   "d = sys.argv[1]\n"
                                   "for line in open(os.path.join(d, 'cases.txt')):\n"
                                   "    c, *ins = line.split()\n"
                                   "    m = os.path.join(d, c + '.onnx')\n"
                                   "    onnx.checker.check_model(onnx.load(m), full_check=True)\n"
                                   "    s = ort.InferenceSession(m, providers=['CPUExecutionProvider'])\n"
                                   "    feed = {}\n"
                                   "    for i, spec in zip(s.get_inputs(), ins):\n"
                                   "        p, t, sh = spec.split(':')\n"
                                   "        shape = [int(x) for x in sh.split(',')] if sh else []\n"
                                   "        feed[i.name] = np.fromfile(p, dtype=t).reshape(shape)\n"
                                   "    y = s.run(None, feed)[0]\n"
                                   "    y.astype(np.float64).tofile(os.path.join(d, c + '.out'))\n";
  const std::string cmd = "python3 " + (dir / "run.py").string() + " " + dir.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<double> devs;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::ifstream f(dir / (std::to_string(i) + ".out"), std::ios::binary);
    std::vector<double> y(static_cast<size_t>(cases[i].want.numel()));
    f.read(reinterpret_cast<char*>(y.data()), static_cast<std::streamsize>(y.size() * 8));
    devs.push_back(f ? deviation(tensor(y, cases[i].want.shape()), cases[i].want) : INFINITY);
  }
  fs::remove_all(dir);
  return devs;
}

struct Row {
  std::string op, family, onnx, status;
};

}  // namespace

TEST(OnnxExportOps, EveryProbedOpExportsRightOrSaysSo) {
  std::vector<Row> rows;
  std::vector<OrtCase> ort_cases;
  std::vector<size_t> ort_rows;
  int exported = 0, refused = 0;
  for (int i = 0; i < ir::kNumOps; ++i) {
    const auto k = static_cast<OpKind>(i);
    const std::string name(ir::op_name(k));
    std::optional<Probe> p = probe_for(k);
    if (!p) {
      rows.push_back(
          {name, "", model_tested(k), model_tested(k).empty() ? "no ONNX form yet" : "exported, tested by models"});
      continue;
    }
    ir::Op op;
    op.kind = k;
    op.attrs = p->attrs;
    CapturedGraph g = capture(
        [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{run_op(op, x, x[0].device())}; }, p->inputs);
    std::string bytes;
    try {
      bytes = onnx::export_bytes(g);
    } catch (const Error& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("has no ONNX form"), std::string::npos) << name << ": " << w;
      rows.push_back({name, "", "", "no ONNX form" + w.substr(w.find("has no ONNX form") + 16)});
      ++refused;
      continue;
    }
    std::set<std::string> types;
    for (const auto& n : onnx::proto::parse_model(bytes).graph.nodes)
      if (n.op_type != "Identity") types.insert(n.op_type);
    std::string form = types.empty() ? "none (an alias)" : "";
    for (const std::string& t : types) form += (form.empty() ? "" : ", ") + t;
    onnx::Model back = onnx::Model::from_bytes(bytes, Device::cpu());
    const double d = deviation(back.run(p->inputs)[0], run_op(op, p->inputs, Device::cpu()));
    EXPECT_LE(d, 1e-6) << name << " exported as " << form;
    ort_cases.push_back({name, bytes, p->inputs, run_op(op, p->inputs, Device::cpu())});
    ort_rows.push_back(rows.size());
    char buf[64];
    std::snprintf(buf, sizeof buf, "exported, deviation %.1e", d);
    rows.push_back({name, "", form, buf});
    ++exported;
  }
  std::cout << exported << " probed ops exported, " << refused << " refused with an error\n";
  const bool ort = test::have_onnxruntime();
  if (ort) {
    std::vector<double> devs = run_all_onnxruntime(ort_cases);
    for (size_t i = 0; i < devs.size(); ++i) {
      EXPECT_LE(devs[i], 1e-6) << ort_cases[i].name << " in ONNX Runtime";
      char buf[64];
      std::snprintf(buf, sizeof buf, "; ONNX Runtime %.1e", devs[i]);
      rows[ort_rows[i]].status += buf;
    }
  } else {
    std::cout << "python3 packages onnx and onnxruntime are not installed: the ONNX Runtime half is skipped\n";
  }
  if (const char* path = std::getenv("KILN_ONNX_EXPORT_WRITE_TABLE")) {
    std::ofstream f(path);
    f << "# ONNX export op coverage\n\n"
         "Generated by `KILN_ONNX_EXPORT_WRITE_TABLE=docs/onnx-export-ops.md ./kiln_tests "
         "--gtest_filter=OnnxExportOps.*` (tests/unit/test_onnx_export_ops.cpp): each primitive of the "
         "elementwise, reduce, scan, pool, contract, conv, index and norm families, and Cat and Pad, is captured, "
         "exported (opset 17), read back "
         "by `kiln::onnx::Model` and run by ONNX Runtime (after `onnx.checker`, when the Python packages are "
         "installed), each compared with the CPU "
         "(deviation relative to max(1, |value|)). Fill and Arange are exported and tested by the models of "
         "tests/unit/test_onnx_export.cpp. See [export.md](export.md).\n\n"
      << exported << " probed ops export, " << refused << " have no ONNX form yet.\n\n"
      << "| Kiln op | ONNX ops | status |\n|---|---|---|\n";
    for (const Row& r : rows) f << "| " << r.op << " | " << r.onnx << " | " << r.status << " |\n";
  }
}
