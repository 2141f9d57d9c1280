// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Distributed training (docs/distributed.md is the chapter): a process group over the processes
// of one job, collectives on tensors, and data-parallel training. The library kiln::dist is built
// when CMake finds MPI (KILN_WITH_MPI); the launcher is the one clusters already have:
//
//   mpirun -np 2 ./train            (Open MPI; as root add --allow-run-as-root)
//   srun -N 4 --ntasks-per-node=8 ./train
//
//   kiln::dist::ProcessGroup& pg = kiln::dist::init();   // rank and size from the launcher
//   kiln::Tensor g = kiln::ones({4});
//   pg.all_reduce(g, kiln::dist::ReduceOp::Sum);          // g holds 4 x size() on every rank
//
//   kiln::dist::DistributedDataParallel ddp(model);       // parameters from rank 0
//   kiln::Gradients grads = ddp.backward(loss);           // averaged over the ranks
//   opt.step(grads);
//
// Collectives take tensors of every dtype, of any strides (views are written through), 0-d and
// empty, on any device (device memory goes through a host copy). Every rank must call the same
// collectives in the same order; a mismatch of the op, dtype or shape between ranks is detected
// and thrown as kiln::Error on every rank, and a collective that the other ranks never join (a
// rank died or hangs) fails with kiln::Error after the group's timeout instead of hanging.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/autodiff.h"
#include "kiln/nn/norm_layers.h"
#include "kiln/tensor.h"

namespace kiln::dist {

/// How all_reduce and reduce_scatter combine the ranks' values. Sum and Mean need a numeric
/// dtype (Sum of bool is a logical or); Mean needs a floating one (f16, bf16, f32, f64); Max and
/// Min take every dtype (of bool: or, and).
enum class ReduceOp : uint8_t { Sum, Mean, Max, Min };
/// "sum", "mean", "max", "min".
std::string_view to_string(ReduceOp op);

/// What a backend returns for one asynchronous collective (ProcessGroup implementations derive
/// from it; users hold a Work).
class WorkImpl {
 public:
  virtual ~WorkImpl() = default;
  /// Whether the collective has finished (successfully or not); never blocks.
  virtual bool is_completed() = 0;
  /// Blocks until it has finished and its results are in place; throws kiln::Error when it
  /// failed or timed out. Later calls return at once (or throw the same error).
  virtual void wait() = 0;
  /// The collective's output tensor (see Work::result); valid after wait().
  virtual Tensor result() = 0;
};

/// A handle to an asynchronous collective. The tensors it reads and writes must not be used until
/// wait() returns; it keeps their memory alive until then. Dropping a Work without waiting lets
/// the collective finish in the background, but results that go through a host copy (tensors that
/// are not contiguous CPU tensors) are written back only by wait().
class Work {
 public:
  /// A finished no-op.
  Work() = default;
  explicit Work(std::shared_ptr<WorkImpl> impl) : impl_(std::move(impl)) {}
  /// See WorkImpl::wait.
  void wait() const {
    if (impl_) impl_->wait();
  }
  bool is_completed() const { return !impl_ || impl_->is_completed(); }
  /// Waits, then returns the output: the tensor itself for all_reduce and broadcast, the new
  /// tensor of all_gather and reduce_scatter; undefined for barrier.
  Tensor result() const {
    if (!impl_) return {};
    impl_->wait();
    return impl_->result();
  }

 private:
  std::shared_ptr<WorkImpl> impl_;
};

/// The processes of one job, numbered 0 .. size() - 1, and the collectives among them. The
/// interface every backend implements (MPI today; a GPU backend such as NCCL plugs in through
/// register_backend). Collectives run in the order they are called; the asynchronous forms return
/// at once and overlap with the caller's work until the Work is waited on.
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  /// This process's rank, 0 .. size() - 1.
  virtual int rank() const = 0;
  /// The number of processes.
  virtual int size() const = 0;
  /// "mpi", "local", ...
  virtual std::string backend() const = 0;
  /// How long a collective waits for the other ranks before it fails.
  virtual std::chrono::milliseconds timeout() const = 0;
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;

  /// Reduces t over the ranks in place: afterwards every rank's t holds the reduction.
  virtual Work all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::Sum) = 0;
  /// Copies rank `root`'s t into t on every other rank (same shape and dtype on all ranks).
  virtual Work broadcast_async(const Tensor& t, int root = 0) = 0;
  /// Every rank's t stacked along a new first dim: shape [size(), *t.shape()] (the result).
  virtual Work all_gather_async(const Tensor& t) = 0;
  /// t's first dim (a multiple of size(), n * size()) split in size() blocks of n; rank r gets the
  /// reduction over the ranks of block r: shape [n, *t.shape()[1:]] (the result). t must have
  /// at least one dim.
  virtual Work reduce_scatter_async(const Tensor& t, ReduceOp op = ReduceOp::Sum) = 0;
  /// Completes once every rank has called it.
  virtual Work barrier_async() = 0;

  // Blocking forms: the same, waited on.
  /// Returns t (reduced in place).
  Tensor all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum) {
    all_reduce_async(t, op).wait();
    return t;
  }
  /// Returns t (overwritten with root's values on the other ranks).
  Tensor broadcast(const Tensor& t, int root = 0) {
    broadcast_async(t, root).wait();
    return t;
  }
  Tensor all_gather(const Tensor& t) { return all_gather_async(t).result(); }
  Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::Sum) { return reduce_scatter_async(t, op).result(); }
  void barrier() { barrier_async().wait(); }
};

/// Options of init().
struct InitOptions {
  /// "mpi", "local" (one process, no communication), or a registered backend; "" chooses "mpi"
  /// when a launcher started this process (mpirun, srun; see launched_by_launcher), else "local".
  std::string backend;
  /// Seconds a collective waits for the other ranks before it throws (0: the environment
  /// variable KILN_DIST_TIMEOUT, else 300).
  double timeout_seconds = 0;
  /// Before each collective, check that every rank called the same op with the same dtype and
  /// shape (one small exchange; the environment variable KILN_DIST_CHECK=0 turns it off).
  bool check = true;
  /// Divide this machine's cores among its ranks (set_num_threads(cores / ranks per node)) unless
  /// KILN_NUM_THREADS or OMP_NUM_THREADS says otherwise.
  bool divide_threads = true;
};

/// Starts the default process group from the launcher's environment (idempotent: later calls
/// return the same group). The group is finalized at exit, or by finalize().
ProcessGroup& init(const InitOptions& options = {});
/// Whether init() has been called (and finalize() not since).
bool is_initialized();
/// The group of init(); throws kiln::Error before init().
ProcessGroup& default_group();
/// The default group's rank and size; 0 and 1 when there is none.
int rank();
int world_size();
/// Waits for the group's pending collectives and shuts it (and MPI) down. After a collective
/// failed or timed out, the other ranks may never arrive: finalize then aborts the job
/// (MPI_Abort), so that no process hangs at exit.
void finalize();
/// Whether this process was started by a launcher (mpirun, srun, ...) with more than one process.
bool launched_by_launcher();

/// A backend for init(): makes the group of this process.
using BackendFactory = std::function<std::unique_ptr<ProcessGroup>(const InitOptions&)>;
/// Registers (or replaces) a backend under `name`.
void register_backend(const std::string& name, BackendFactory factory);
/// The registered backends' names ("local", "mpi", ...).
std::vector<std::string> backends();

// The collectives of the default group (see ProcessGroup).
inline Tensor all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum) { return default_group().all_reduce(t, op); }
inline Tensor broadcast(const Tensor& t, int root = 0) { return default_group().broadcast(t, root); }
inline Tensor all_gather(const Tensor& t) { return default_group().all_gather(t); }
inline Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::Sum) {
  return default_group().reduce_scatter(t, op);
}
inline void barrier() { default_group().barrier(); }
inline Work all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::Sum) {
  return default_group().all_reduce_async(t, op);
}
inline Work broadcast_async(const Tensor& t, int root = 0) { return default_group().broadcast_async(t, root); }
inline Work all_gather_async(const Tensor& t) { return default_group().all_gather_async(t); }
inline Work reduce_scatter_async(const Tensor& t, ReduceOp op = ReduceOp::Sum) {
  return default_group().reduce_scatter_async(t, op);
}
inline Work barrier_async() { return default_group().barrier_async(); }

/// The sum of t over the ranks of `group` (a new tensor), differentiable: the gradient of t is the
/// sum over the ranks of the result's gradient (torch.distributed.nn.all_reduce). Every rank must
/// run backward through it in the same order, as every rank runs the same model.
Tensor all_reduce_with_grad(const Tensor& t, ProcessGroup& group);

// ---- synchronised batch norm ------------------------------------------------------------------

/// Batch norm whose training statistics are those of the global batch: every rank's part of the
/// batch is normalised with the mean and variance over all ranks' parts (two all-reduces per call
/// in forward and two in backward), so a data-parallel model with batch norm trains as one process
/// on the whole batch. Input [N, C, *] (any rank from 2). In eval mode it is plain batch norm with
/// the running statistics. Its state has BatchNorm's names, so checkpoints load either way.
/// The group is the default group unless one is given (looked up at the first training call).
struct SyncBatchNorm : nn::BatchNormBase {
  SyncBatchNorm() = default;
  explicit SyncBatchNorm(const nn::BatchNormConfig& c, const Device& device = Device::default_device(),
                         ProcessGroup* group = nullptr);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_VISIT(SyncBatchNorm, weight, bias, running_mean, running_var, num_batches_tracked)
};

/// Makes every batch norm of `model` (BatchNorm1d/2d/3d, at any depth) synchronised over `group`
/// (nullptr: the default group) as torch.nn.SyncBatchNorm.convert_sync_batchnorm does; returns
/// how many. The setting belongs to the module objects (copies of the model keep it).
size_t convert_sync_batch_norm(nn::Module& model, ProcessGroup* group = nullptr);

// ---- data-parallel training -------------------------------------------------------------------

/// Options of DistributedDataParallel.
struct DDPOptions {
  /// Gradient bytes per bucket. Parameters are packed into buckets in reverse order (the order
  /// backward produces their gradients); a bucket's all-reduce starts as soon as its last
  /// gradient is ready, while backward goes on with the layers below.
  size_t bucket_bytes = size_t{1} << 20;
  /// sync_buffers() broadcasts the buffers (batch-norm running statistics) from rank 0; the
  /// Learner calls it before every step, as PyTorch's DDP does before every forward.
  bool broadcast_buffers = true;
  /// Synchronise the model's batch norms over the group (convert_sync_batch_norm) at construction.
  bool sync_batch_norm = false;
};

/// What the last backward() did, for benchmarks and tests.
struct DDPStats {
  size_t buckets = 0;
  /// Buckets whose all-reduce started before backward returned (overlapped with it).
  size_t launched_during_backward = 0;
  /// Seconds in backward (with the all-reduces it started) and waiting for the rest afterwards.
  double backward_seconds = 0, wait_seconds = 0;
};

/// Data-parallel training: every rank holds the whole model and its share of each batch;
/// backward() averages the gradients over the ranks, so after opt.step(grads) the ranks' models
/// stay identical. Construction broadcasts the parameters and buffers from rank 0, so every rank
/// starts from rank 0's initialisation.
class DistributedDataParallel {
 public:
  /// The model's parameters and buffers; the model must outlive this object.
  explicit DistributedDataParallel(nn::Module& model, const DDPOptions& options = {});
  DistributedDataParallel(nn::Module& model, ProcessGroup& group, const DDPOptions& options = {});
  /// Explicit parameters (tensors that require gradients) and buffers.
  DistributedDataParallel(std::vector<Tensor> params, std::vector<Tensor> buffers, ProcessGroup& group,
                          const DDPOptions& options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// loss.backward(), with each parameter's gradient replaced by the weighted mean over the
  /// ranks, sum_r weight_r * grad_r / sum_r weight_r, where weight_r is the `weight` given on rank
  /// r. The default weights make it the plain mean (PyTorch's DDP); give each rank's item count
  /// when the ranks' batches differ in size, and the result is the gradient of the mean loss over
  /// the global batch. A parameter that gets no gradient on a rank counts as a zero gradient
  /// there; one that gets none on any rank gets none. The all-reduces run during backward.
  /// Backward runs on weight * loss, so where gradients cross ranks (SyncBatchNorm) the result is
  /// the gradient of sum_r weight_r * loss_r / sum_r weight_r. create_graph is not supported.
  Gradients backward(const Tensor& loss, double weight = 1.0, const BackwardOptions& options = {});
  /// The same averaging for gradients computed elsewhere (no overlap with backward).
  Gradients average(Gradients grads, double weight = 1.0);
  /// Copies the parameters and buffers of rank `root` to every rank.
  void broadcast_parameters(int root = 0);
  /// Copies the buffers of rank 0 to every rank (nothing when options().broadcast_buffers is off).
  void sync_buffers();

  ProcessGroup& group() const;
  const DDPOptions& options() const;
  /// The number of buckets and the parameters in each (indices into the parameter list).
  std::vector<std::vector<size_t>> buckets() const;
  const DDPStats& last_stats() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kiln::dist
