// SPDX-License-Identifier: MIT OR Apache-2.0
// Distributed benchmarks (bench/dist/run.sh runs them under mpirun and writes RESULTS.md):
//
//   kiln_bench_dist allreduce [--max-bytes N] [--seconds S]
//     all-reduce (sum) of f32 buffers from 1 KB to 256 MB: Kiln's ProcessGroup::all_reduce
//     against MPI_Allreduce on the same buffer, in the same process, interleaved. One line per
//     size: bytes, MPI seconds, Kiln seconds (the best of several timed batches).
//   kiln_bench_dist cnn [--images N] [--batch B]
//     one epoch of the Fashion-MNIST CNN of examples/fashion-mnist (N images, global batch B)
//     data-parallel on this job's ranks: epoch seconds, backward seconds and the seconds spent
//     waiting for all-reduces after backward (DDPStats), summed over the steps.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../../examples/fashion-mnist/net.h"
#include "kiln/data/loader.h"
#include "kiln/data/sources.h"
#include "kiln/dist.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/optim.h"

using namespace kiln;
namespace F = kiln::nn::functional;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// The best time per call over `batches` batches of `calls` calls of f (the slowest rank's).
template <class Fn>
double best_per_call(Fn f, int calls, int batches) {
  double best = 1e30;
  for (int b = 0; b < batches; ++b) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    double t = since(t0) / calls;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // the slowest rank
    best = std::min(best, t);
  }
  return best;
}

int allreduce(dist::ProcessGroup& pg, size_t max_bytes, double seconds) {
  if (pg.rank() == 0) std::printf("# bytes\tmpi_s\tkiln_s\n");
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    const int64_t n = static_cast<int64_t>(bytes / 4);
    Tensor t = full({n}, 1.0, {.dtype = f32, .device = Device::cpu()});
    float* p = static_cast<float*>(nullptr);
    std::vector<float> host;  // MPI's own buffer, the same size
    host.assign(static_cast<size_t>(n), 1.0f);
    p = host.data();
    // Calls per batch: about seconds / 10 per batch from one trial call of each.
    auto t0 = Clock::now();
    MPI_Allreduce(MPI_IN_PLACE, p, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    pg.all_reduce(t);
    double one = since(t0) / 2;
    MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int calls = std::max(1, static_cast<int>(seconds / 10 / std::max(one, 1e-7)));
    calls = std::min(calls, 2000);
    const int batches = 5;
    double mpi = 1e30, kiln = 1e30;
    for (int round = 0; round < 2; ++round) {  // interleaved, so both see the same machine load
      mpi = std::min(
          mpi, best_per_call(
                   [&] { MPI_Allreduce(MPI_IN_PLACE, p, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
                   calls, batches));
      kiln = std::min(kiln, best_per_call([&] { pg.all_reduce(t); }, calls, batches));
    }
    if (pg.rank() == 0) std::printf("%zu\t%.9f\t%.9f\n", bytes, mpi, kiln);
    std::fflush(stdout);
  }
  return 0;
}

using Net = examples::Net;  // the CNN of examples/fashion-mnist (about 420k parameters)

int cnn(dist::ProcessGroup& pg, size_t images, size_t batch) {
  const Device d = Device::cpu().autodiff();
  manual_seed(0);
  Net net(d);
  data::DatasetPtr<data::ImageItem> all = data::fashion_mnist(true);
  data::DataLoader<data::ImageItem> loader(data::slice(all, 0, images),
                                           {.batch_size = batch,
                                            .seed = 1,
                                            .workers = 1,
                                            .num_shards = static_cast<size_t>(pg.size()),
                                            .shard_index = static_cast<size_t>(pg.rank())});
  optim::AdamW opt(net.parameters(), {.lr = 2e-3, .weight_decay = 5e-4});
  dist::DistributedDataParallel ddp(net, pg);
  double backward = 0, wait = 0, epoch = 0;
  size_t launched = 0, buckets = 0, steps = 0;
  for (int e = 0; e < 2; ++e) {  // epoch 0 warms up (caches, allocator); epoch 1 is timed
    loader.start_epoch(static_cast<uint64_t>(e));
    pg.barrier();
    auto t0 = Clock::now();
    backward = wait = 0;
    launched = buckets = steps = 0;
    while (auto b = loader.next()) {
      Tensor x = b->input.to(d), y = b->target.to(d);
      ddp.sync_buffers();
      Tensor loss = F::cross_entropy(net.forward(x), y);
      opt.step(ddp.backward(loss, static_cast<double>(x.size(0))));
      const dist::DDPStats& s = ddp.last_stats();
      backward += s.backward_seconds;
      wait += s.wait_seconds;
      launched += s.launched_during_backward;
      buckets += s.buckets;
      ++steps;
    }
    pg.barrier();
    epoch = since(t0);
  }
  if (pg.rank() == 0)
    std::printf(
        "# ranks\tthreads\timages\tbatch\tsteps\tepoch_s\tbackward_s\twait_s\tbuckets_per_step\tlaunched_in_backward\n"
        "%d\t%d\t%zu\t%zu\t%zu\t%.3f\t%.3f\t%.3f\t%.1f\t%.1f\n",
        pg.size(), num_threads(), images, batch, steps, epoch, backward, wait,
        static_cast<double>(buckets) / static_cast<double>(std::max<size_t>(1, steps)),
        static_cast<double>(launched) / static_cast<double>(std::max<size_t>(1, steps)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "allreduce";
  size_t max_bytes = size_t{256} << 20, images = 12800, batch = 128;
  double seconds = 1.0;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--max-bytes") max_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--seconds") seconds = std::atof(argv[i + 1]);
    if (a == "--images") images = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--batch") batch = std::strtoull(argv[i + 1], nullptr, 10);
  }
  try {
    dist::ProcessGroup& pg = dist::init({.backend = "mpi"});
    int rc = mode == "cnn" ? cnn(pg, images, batch) : allreduce(pg, max_bytes, seconds);
    dist::finalize();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_bench_dist: %s\n", e.what());
    return 1;
  }
}
