// SPDX-License-Identifier: MIT OR Apache-2.0
// The ONNX backend test suite (Debian's libonnx-testdata: node, pytorch-converted,
// pytorch-operator, simple) through the run-time path. Each case's outputs are compared with
// the stored ones (rtol 1e-3, atol 1e-7, as onnx's backend runner); every case listed in
// tests/onnx/expected_pass.txt must pass (the list may only grow).
//   KILN_ONNX_TESTDATA=dir          another data folder (default /usr/share/libonnx-testdata/data)
//   KILN_ONNX_WRITE_TABLE=file.md   writes the per-op table (docs/onnx-ops.md)
//   KILN_ONNX_WRITE_EXPECTED=file   writes the list of passing cases
//   KILN_ONNX_VERBOSE=1             prints every failing case with its message
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "kiln/onnx.h"
#include "kiln/ops.h"
#include "onnx/proto.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

const char* kFolders[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

std::string data_root() {
  const char* e = std::getenv("KILN_ONNX_TESTDATA");
  return e ? e : "/usr/share/libonnx-testdata/data";
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

enum class Status { Pass, Fail, Unsupported };

struct CaseResult {
  std::string folder, name;
  Status status = Status::Fail;
  std::string message;
  std::set<std::string> ops;
  std::set<int64_t> opsets;
};

// Compares one output; "" when it matches.
std::string compare(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) return "dtype " + to_string(got.dtype()) + " vs expected " + to_string(want.dtype());
  if (got.shape() != want.shape()) return "shape " + to_string(got.shape()) + " vs expected " + to_string(want.shape());
  std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  bool exact = !is_floating(want.dtype());
  double rtol = want.dtype() == f16 || want.dtype() == bf16 ? 1e-2 : 1e-3, atol = 1e-7;
  if (want.dtype() == f16 || want.dtype() == bf16) atol = 1e-3;
  for (size_t i = 0; i < a.size(); ++i) {
    if (exact) {
      if (a[i] != b[i])
        return "element " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
      continue;
    }
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::isinf(b[i]) && a[i] == b[i]) continue;
    if (!(std::abs(a[i] - b[i]) <= atol + rtol * std::abs(b[i])))
      return "element " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
  }
  return "";
}

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> v;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    v.push_back(p);
  }
  return v;
}

CaseResult run_case(const std::string& folder, const fs::path& dir) {
  CaseResult r{folder, dir.filename().string()};
  std::string bytes = slurp(dir / "model.onnx");
  try {
    auto m = onnx::proto::parse_model(bytes);
    for (const auto& n : m.graph.nodes)
      r.ops.insert((n.domain.empty() || n.domain == "ai.onnx") ? n.op_type : n.domain + "." + n.op_type);
    for (const auto& o : m.opsets)
      if (o.domain.empty() || o.domain == "ai.onnx") r.opsets.insert(o.version);
  } catch (const Error& e) {
    r.message = e.what();
    return r;
  }
  try {
    onnx::Model model = onnx::Model::from_bytes(bytes, Device::cpu(), {.allow_unsupported = true});
    if (!model.unsupported().empty()) {
      r.status = Status::Unsupported;
      for (const auto& u : model.unsupported()) r.message += (r.message.empty() ? "" : ", ") + u.op_type;
      return r;
    }
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    for (const auto& s : sets) {
      std::vector<Tensor> ins, want;
      std::map<std::string, Tensor> named;
      bool use_names = false;
      auto in_files = numbered(s, "input_");
      for (const auto& p : in_files) {
        std::string b = slurp(p);
        auto tp = onnx::proto::parse_tensor(b);
        Tensor t;
        try {
          t = onnx::tensor_from_proto(b, Device::cpu());
        } catch (const Error& e) {
          r.status = Status::Unsupported;
          r.message = std::string("input data: ") + e.what();
          return r;
        }
        ins.push_back(t);
        if (!tp.name.empty()) named[tp.name] = t;
      }
      if (ins.size() != model.inputs().size()) use_names = named.size() == ins.size();
      for (const auto& p : numbered(s, "output_")) {
        try {
          want.push_back(onnx::load_tensor_proto(p.string(), Device::cpu()));
        } catch (const Error& e) {
          r.status = Status::Unsupported;
          r.message = std::string("output data: ") + e.what();
          return r;
        }
      }
      std::vector<Tensor> got = use_names ? model.run(named) : model.run(ins);
      if (got.size() != want.size()) {
        r.message = "got " + std::to_string(got.size()) + " outputs, expected " + std::to_string(want.size());
        return r;
      }
      for (size_t i = 0; i < got.size(); ++i) {
        std::string d = compare(got[i].contiguous(), want[i]);
        if (!d.empty()) {
          r.message = s.filename().string() + " output " + std::to_string(i) + ": " + d;
          return r;
        }
      }
    }
    r.status = Status::Pass;
  } catch (const Error& e) {
    r.message = e.what();
    r.status = std::string(e.what()).find("not supported") != std::string::npos ? Status::Unsupported : Status::Fail;
  } catch (const std::exception& e) {
    r.message = std::string("std::exception: ") + e.what();
  }
  return r;
}

void write_table(const std::vector<CaseResult>& results, const std::string& path) {
  struct Row {
    std::set<int64_t> opsets;
    int pass = 0, total = 0;
  };
  std::map<std::string, Row> rows;
  std::map<std::string, std::pair<int, int>> folders;
  for (const auto& c : results) {
    auto& f = folders[c.folder];
    ++f.second;
    if (c.status == Status::Pass) ++f.first;
    for (const auto& op : c.ops) {
      auto& row = rows[op];
      row.opsets.insert(c.opsets.begin(), c.opsets.end());
      ++row.total;
      if (c.status == Status::Pass) ++row.pass;
    }
  }
  std::ofstream o(path);
  o << "# ONNX op coverage (run-time path)\n\n"
       "Generated by `KILN_ONNX_WRITE_TABLE=docs/onnx-ops.md ./kiln_tests --gtest_filter=OnnxBackend.*` from the\n"
       "ONNX backend test data of Debian's `libonnx-testdata`. A case counts for every op in its graph;\n"
       "it passes when all its outputs match (rtol 1e-3, atol 1e-7). See docs/onnx.md.\n\n"
       "| folder | passed | cases |\n|---|---:|---:|\n";
  int tp = 0, tt = 0;
  for (const auto& [f, pt] : folders) {
    o << "| " << f << " | " << pt.first << " | " << pt.second << " |\n";
    tp += pt.first;
    tt += pt.second;
  }
  o << "| **all** | " << tp << " | " << tt << " |\n\n| op | opsets seen | passed / cases |\n|---|---|---:|\n";
  for (const auto& [op, row] : rows) {
    std::string os;
    for (int64_t v : row.opsets) os += (os.empty() ? "" : ", ") + std::to_string(v);
    o << "| " << op << " | " << os << " | " << row.pass << " / " << row.total << " |\n";
  }
}

}  // namespace

TEST(OnnxBackend, ConformanceSuite) {
  fs::path root = data_root();
  if (!fs::exists(root / "node")) GTEST_SKIP() << "no ONNX test data at " << root << " (apt install libonnx-testdata)";
  auto t0 = std::chrono::steady_clock::now();
  std::vector<CaseResult> results;
  for (const char* folder : kFolders) {
    fs::path d = root / folder;
    if (!fs::exists(d)) continue;
    std::vector<fs::path> cases;
    for (const auto& e : fs::directory_iterator(d))
      if (fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
    std::sort(cases.begin(), cases.end());
    for (const auto& c : cases) results.push_back(run_case(folder, c));
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::map<std::string, std::array<int, 3>> counts;
  std::set<std::string> passed;
  bool verbose = std::getenv("KILN_ONNX_VERBOSE") != nullptr;
  for (const auto& c : results) {
    counts[c.folder][static_cast<int>(c.status)]++;
    if (c.status == Status::Pass) passed.insert(c.folder + "/" + c.name);
    if (verbose && c.status != Status::Pass)
      std::printf("%s %s/%s: %s\n", c.status == Status::Fail ? "FAIL" : "UNSUP", c.folder.c_str(), c.name.c_str(),
                  c.message.substr(0, 300).c_str());
  }
  for (const auto& [f, n] : counts)
    std::printf("onnx %-18s pass %4d  fail %4d  unsupported %4d\n", f.c_str(), n[0], n[1], n[2]);
  std::printf("onnx total pass %zu of %zu cases in %.1f s\n", passed.size(), results.size(), secs);
  if (const char* p = std::getenv("KILN_ONNX_WRITE_TABLE")) write_table(results, p);
  if (const char* p = std::getenv("KILN_ONNX_WRITE_EXPECTED")) {
    std::ofstream o(p);
    o << "# ONNX backend cases that must pass (tests/onnx/test_onnx_backend.cpp). The list may only grow.\n";
    for (const auto& s : passed) o << s << "\n";
  }
  std::ifstream f(fs::path(KILN_GOLDEN_DIR).parent_path() / "onnx" / "expected_pass.txt");
  ASSERT_TRUE(f.good()) << "missing tests/onnx/expected_pass.txt";
  std::map<std::string, const CaseResult*> by_name;
  for (const auto& c : results) by_name[c.folder + "/" + c.name] = &c;
  std::string line;
  int expected = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto it = by_name.find(line);
    if (it == by_name.end()) continue;  // a case not in this data version
    ++expected;
    EXPECT_EQ(it->second->status, Status::Pass) << line << ": " << it->second->message;
  }
  EXPECT_GE(static_cast<int>(passed.size()), expected);
}
