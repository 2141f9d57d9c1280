// SPDX-License-Identifier: MIT OR Apache-2.0
// The main() of the distributed test programs, run by CTest under mpirun (tests/dist/CMakeLists.txt):
// starts the process group, runs the tests on every rank, and prints the full report on rank 0
// only (the other ranks print their failures, prefixed with their rank). The exit status is 0
// when every rank passed.
#include <gtest/gtest.h>

#include <cstdio>

#include "kiln/dist.h"
#include "kiln/ops.h"

namespace {

/// Prints a failed assertion with the rank that saw it; nothing else.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                 r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  kiln::dist::ProcessGroup& pg = kiln::dist::init();
  if (pg.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(pg.rank()));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  // Every rank learns whether any failed, so that all exit with the same status.
  kiln::Tensor f = kiln::scalar_tensor(failed, kiln::i32, kiln::Device::cpu());
  pg.all_reduce(f, kiln::dist::ReduceOp::Max);
  failed = f.item<int32_t>();
  if (pg.rank() == 0)
    std::printf("%s on %d ranks (%s)\n", failed ? "FAILED" : "passed", pg.size(), pg.backend().c_str());
  kiln::dist::finalize();
  return failed;
}
