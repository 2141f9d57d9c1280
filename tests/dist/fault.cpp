// SPDX-License-Identifier: MIT OR Apache-2.0
// A rank that fails in the middle of a job, for tests/dist/run_fault.sh (2 ranks under mpirun):
//   hang: rank 1 stops taking part (sleeps) before an all-reduce;
//   kill: rank 1 is killed (SIGKILL) in the middle of a data-parallel step;
//   exit: rank 1 leaves the program early, without the collective the others wait in.
// Rank 0 must not hang: it fails with a kiln::Error after the group's timeout (KILN_DIST_TIMEOUT)
// and exits (status 3), or mpirun ends it when it sees rank 1 die.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "kiln/dist.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/optim.h"

using namespace kiln;

namespace {
struct Mlp : nn::Module {
  nn::Linear fc1, fc2;
  explicit Mlp(const Device& d)
      : fc1({.in_features = 64, .out_features = 256}, d), fc2({.in_features = 256, .out_features = 10}, d) {}
  Tensor forward(const Tensor& x) { return fc2(relu(fc1(x))); }
  KILN_VISIT(Mlp, fc1, fc2)
};
}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "hang";
  dist::ProcessGroup& pg = dist::init();
  const int rank = pg.rank();
  try {
    const Device d = Device::cpu().autodiff();
    manual_seed(1);
    Mlp net(d);
    dist::DistributedDataParallel ddp(net, pg, {.bucket_bytes = 4096});
    optim::SGD opt(net.parameters(), {.lr = 0.1});
    for (int step = 0; step < 10; ++step) {
      Tensor x = randn({16, 64}).to(d);
      Tensor loss = net.forward(x).square().mean();
      if (rank == 1 && step == 3) {
        std::fprintf(stderr, "rank 1: %s at step 3\n", mode.c_str());
        if (mode == "kill") raise(SIGKILL);
        if (mode == "hang") sleep(600);
        if (mode == "exit") {
          dist::finalize();
          return 0;
        }
      }
      opt.step(ddp.backward(loss));
    }
    Tensor t = ones({4});
    pg.all_reduce(t);
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d caught kiln::Error: %s\n", rank, e.what());
    return 3;
  }
  std::printf("rank %d finished\n", rank);
  return 0;
}
