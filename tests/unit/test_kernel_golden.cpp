// SPDX-License-Identifier: MIT OR Apache-2.0
// Golden text of each renderer for five small kernels, so that a change to generated code shows
// in review. The expected files live in tests/data/kernel_golden/<kernel>.<ext>; regenerate them
// with KILN_UPDATE_GOLDEN=1 (then read the diff).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "kiln/kernel.h"
#include "test_paths.h"

using namespace kiln::kernel;

namespace {

std::string golden_dir() { return std::string(KILN_GOLDEN_DIR) + "/../data/kernel_golden"; }

Kernel saxpy() {
  return trace("saxpy", [](Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.inout<float>("y");
    Val a = b.scalar<float>("a"), n = b.scalar<int32_t>("n");
    b.group_size(64);
    Val i = global_id();
    // One load per statement: the operands of one C++ expression are traced in the order the
    // compiler evaluates them, which differs between compilers.
    if_(i < n, [&] {
      Val xi = x[i];
      Val yi = y[i];
      y[i] = a * xi + yi;
    });
  });
}

Kernel group_max() {
  return trace("group_max", [](Builder& b) {
    auto x = b.input<float>("x");
    auto out = b.output<float>("out");
    auto sh = b.shared<float>("sh", 4);
    b.group_size(4);
    Val t = thread_id();
    sh[t] = x[global_id()];
    barrier();
    for (int s = 2; s > 0; s /= 2) {
      if_(t < s, [&] {
        Val mine = sh[t];
        Val other = sh[t + s];
        sh[t] = max(mine, other);
      });
      barrier();
    }
    if_(t == 0, [&] { out[group_id()] = sh[0]; });
  });
}

Kernel count_bits() {
  return trace("count_bits", [](Builder& b) {
    auto x = b.input<uint32_t>("x");
    auto total = b.inout<uint32_t>("total");
    b.group_size(32);
    Var v{Val(x[global_id()])};
    Var c(0u);
    while_([&] { return Val(v) != 0u; },
           [&] {
             c += v & 1u;
             v = Val(v) >> 1u;
           });
    atomic_add(total[0], c);
  });
}

void check(const std::string& file, const std::string& text) {
  std::string path = golden_dir() + "/" + file;
  if (const char* u = std::getenv("KILN_UPDATE_GOLDEN"); u && *u == '1') {
    std::ofstream(path) << text;
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path << " (KILN_UPDATE_GOLDEN=1 writes it)";
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str() == text) return;
  // The first line that differs, rather than both texts whole.
  std::istringstream want(ss.str()), got(text);
  std::string w, g;
  int line = 1;
  while (std::getline(want, w) && std::getline(got, g) && w == g) ++line;
  ADD_FAILURE() << "the rendering of " << file << " changed at line " << line << ":\n  expected: " << w
                << "\n  actual:   " << g << "\nKILN_UPDATE_GOLDEN=1 rewrites " << path << " (then review the diff)";
}

void check_all(const std::string& name, const Kernel& k) {
  check(name + ".cpp", render(k, Target::Cpp));
  check(name + ".cu", render(k, Target::Cuda));
  check(name + ".comp", render(k, Target::Glsl));
  check(name + ".wgsl", render(k, Target::Wgsl));
}

/// Column sums of an [n, 8] matrix: a loop whose bounds every thread shares, which the C++
/// target runs once per group with the loop over the threads inside (and its sums per thread).
Kernel column_sums() {
  return trace("column_sums", [](Builder& b) {
    auto x = b.input<float>("x");
    auto out = b.output<float>("out");
    Val n = b.scalar<int32_t>("n");
    b.group_size(8);
    Val col = thread_id();
    Var sum(0.0f);
    for_(Val(0), n, [&](Val r) {
      Val v = x[r * 8 + col];
      sum += v;
    });
    out[col] = sum;
  });
}

/// A kernel function with a local and a literal argument, called from a kernel in vector mode.
Kernel softplus_call() {
  static const Function softplus("golden_softplus", {Type::F32, Type::F32}, [](const std::vector<Val>& a) {
    Var r(a[0] * a[1]);
    r = log(1.0f + exp(Val(r))) / a[1];
    return Val(r);
  });
  return trace("softplus_call", [](Builder& b) {
    auto x = b.input<float>("x");
    auto y = b.output<float>("y");
    b.group_size(64);
    Val i = global_id();
    y[i] = softplus(x[i], 2.0f);
  });
}

}  // namespace

TEST(KernelGolden, Saxpy) { check_all("saxpy", saxpy()); }
TEST(KernelGolden, GroupMaxWithBarriers) { check_all("group_max", group_max()); }
TEST(KernelGolden, CountBitsWithWhileAndAtomics) { check_all("count_bits", count_bits()); }
TEST(KernelGolden, ColumnSumsWithAUniformLoop) { check_all("column_sums", column_sums()); }
TEST(KernelGolden, AFunctionAndTheMathItCalls) { check_all("softplus_call", softplus_call()); }
