// SPDX-License-Identifier: MIT OR Apache-2.0
// Every fuzzing seed (tests/fuzz/corpus/<target>/) and every crasher found by fuzzing and fixed
// (tests/fuzz/crashers/<target>/) goes through its parser: it must parse or throw kiln::Error,
// never crash or throw anything else. The folder name picks the parser (the libFuzzer target's).
// Weights parsers must also name the input in their errors. fuzz_ops is not a parser: its seeds
// are op programs (tests/fuzz/fuzz_ops.h) that catch kiln::Error per op.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/onnx.h>
#include <kiln/store.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "fuzz/fuzz_ops.h"
#include "test_paths.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

const fs::path kFuzzDir = fs::path(KILN_GOLDEN_DIR) / ".." / "fuzz";

/// Parses one input; returns whether its kiln::Error messages must contain the input's name.
using Parser = std::function<bool(const std::vector<uint8_t>&, const std::string&)>;

bool check_tensors(const store::TensorMap& m, const std::string& name) {
  for (auto& [k, t] : m.tensors) EXPECT_GE(t.numel(), 0) << name << " " << k;
  return true;
}

const std::map<std::string, Parser>& parsers() {
  static const std::map<std::string, Parser> p = {
      {"fuzz_safetensors",
       [](const std::vector<uint8_t>& b, const std::string& n) {
         return check_tensors(store::parse_safetensors(b.data(), b.size(), n), n);
       }},
      {"fuzz_torch", [](const std::vector<uint8_t>& b,
                        const std::string& n) { return check_tensors(store::parse_torch(b.data(), b.size(), n), n); }},
      {"fuzz_onnx",
       [](const std::vector<uint8_t>& b, const std::string&) {
         // From bytes the loader has no file name; its errors name the node or field instead.
         auto m = onnx::Model::from_bytes(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()),
                                          Device::null(), {.allow_unsupported = true});
         (void)m.inputs();
         return false;
       }},
      {"fuzz_ops",
       [](const std::vector<uint8_t>& b, const std::string&) {
         // Ops on tensors built from the bytes; kiln::Error is caught inside, per op.
         fuzz::run_ops(b.data(), b.size());
         return false;
       }},
  };
  return p;
}

/// Runs every file under kFuzzDir/<kind>/<target>/; returns how many ran.
int run_all(const std::string& kind) {
  int n = 0;
  fs::path root = kFuzzDir / kind;
  if (!fs::is_directory(root)) return 0;
  for (auto& target : fs::directory_iterator(root)) {
    if (!target.is_directory()) continue;
    std::string tname = target.path().filename().string();
    // The remote protocol's seeds run in kiln_remote_tests (tests/remote), which links kiln_remote.
    if (tname == "fuzz_remote") continue;
    auto it = parsers().find(tname);
    EXPECT_NE(it, parsers().end()) << "no parser for the fuzz target folder " << target.path();
    if (it == parsers().end()) continue;
    for (auto& f : fs::directory_iterator(target.path())) {
      if (!f.is_regular_file()) continue;
      std::ifstream in(f.path(), std::ios::binary);
      std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      std::string name = f.path().filename().string();
      try {
        it->second(bytes, name);
      } catch (const Error& e) {
        // A weights parser's error must name the input.
        if (tname != "fuzz_onnx" && tname != "fuzz_ops")
          EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << f.path() << " threw a non-kiln exception: " << e.what();
      }
      ++n;
    }
  }
  return n;
}

}  // namespace

TEST(StoreFuzzCorpus, SeedsParseOrThrowKilnError) { EXPECT_GT(run_all("corpus"), 0); }

TEST(StoreFuzzCorpus, FixedCrashersParseOrThrowKilnError) { run_all("crashers"); }
