// SPDX-License-Identifier: MIT OR Apache-2.0
// The MPI backend of kiln::dist.
//
// Note [One thread talks to MPI]: every collective, blocking or not, is a job on one queue that
// a single communication thread runs in order, with MPI's blocking collectives (Open MPI's tuned
// algorithms: its nonblocking ones are slower for large buffers). So the order of collectives is
// the order of the calls on every rank, the caller's thread keeps computing while a job runs
// (data-parallel backward overlaps its all-reduces with the layers below), and a caller waiting
// for a job can give up after the group's timeout, which a thread blocked inside MPI could not.
// After a timeout the group is broken: the communication thread may never come back (a peer is
// gone), later collectives fail at once, and finalize aborts the job (MPI_Abort) instead of
// waiting for the thread or for MPI_Finalize. MPI is initialised with MPI_THREAD_MULTIPLE so
// that the abort may run while the communication thread is inside MPI.
//
// The caller's thread prepares each job's host memory (HostBuffer: the tensor's own memory when
// it is a contiguous CPU tensor, else a copy) and finishes it in wait() (copies back, new
// versions); the communication thread touches raw memory only, never a Tensor.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include "dist/common.h"
#include "kiln/ops.h"

namespace kiln::dist::detail {
namespace {

// ---- types and reductions -----------------------------------------------------------------------

MPI_Datatype g_f16 = MPI_DATATYPE_NULL, g_bf16 = MPI_DATATYPE_NULL;
MPI_Op g_op16[2][3];  // [bf16][sum, max, min]

template <bool BF16, ReduceOp OP>
void op16(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce16(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), *len, BF16, OP);
}

void create_types() {
  MPI_Type_contiguous(2, MPI_BYTE, &g_f16);
  MPI_Type_commit(&g_f16);
  MPI_Type_contiguous(2, MPI_BYTE, &g_bf16);
  MPI_Type_commit(&g_bf16);
  MPI_Op_create(&op16<false, ReduceOp::Sum>, 1, &g_op16[0][0]);
  MPI_Op_create(&op16<false, ReduceOp::Max>, 1, &g_op16[0][1]);
  MPI_Op_create(&op16<false, ReduceOp::Min>, 1, &g_op16[0][2]);
  MPI_Op_create(&op16<true, ReduceOp::Sum>, 1, &g_op16[1][0]);
  MPI_Op_create(&op16<true, ReduceOp::Max>, 1, &g_op16[1][1]);
  MPI_Op_create(&op16<true, ReduceOp::Min>, 1, &g_op16[1][2]);
}

void free_types() {
  for (auto& row : g_op16)
    for (MPI_Op& op : row) MPI_Op_free(&op);
  MPI_Type_free(&g_f16);
  MPI_Type_free(&g_bf16);
}

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::Bool:
    case DType::U8:
      return MPI_UINT8_T;
    case DType::I8:
      return MPI_INT8_T;
    case DType::I16:
      return MPI_INT16_T;
    case DType::I32:
      return MPI_INT32_T;
    case DType::I64:
      return MPI_INT64_T;
    case DType::F16:
      return g_f16;
    case DType::BF16:
      return g_bf16;
    case DType::F32:
      return MPI_FLOAT;
    case DType::F64:
      return MPI_DOUBLE;
    case DType::U16:
      return MPI_UINT16_T;
    case DType::U32:
      return MPI_UINT32_T;
    case DType::U64:
      return MPI_UINT64_T;
  }
  KILN_CHECK(false, "dist", "no MPI type for dtype " << dtype_name(d).data());
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(DType d, ReduceOp op) {
  if (d == DType::F16 || d == DType::BF16) {
    int k = op == ReduceOp::Max ? 1 : op == ReduceOp::Min ? 2 : 0;
    return g_op16[d == DType::BF16][k];
  }
  if (d == DType::Bool) return op == ReduceOp::Min ? MPI_MIN : MPI_MAX;  // and / or of 0 and 1
  switch (op) {
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
    default:
      return MPI_SUM;
  }
}

void check_mpi(int rc, Kind kind, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  KILN_CHECK(false, op_label(kind), call << " failed: " << std::string(msg, static_cast<size_t>(len)));
}

// ---- jobs ---------------------------------------------------------------------------------------

/// "[dist.all_reduce] ".
std::string label(Kind k) {
  std::string s(1, '[');
  s += op_label(k);
  s += "] ";
  return s;
}

struct Shared;

/// One collective: what the communication thread runs, and the handle the caller waits on.
class Job final : public WorkImpl {
 public:
  Job(std::shared_ptr<Shared> shared, Kind kind) : shared_(std::move(shared)), kind(kind) {}
  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  void wait() override;
  Tensor result() override { return result_; }
  /// Called by the communication thread.
  void complete(std::string error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      error_ = std::move(error);
    }
    cv_.notify_all();
  }

  std::shared_ptr<Shared> shared_;
  Kind kind;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  DType dtype = DType::F32;
  CallDesc desc;
  std::string invalid;     // thrown once the ranks agree on the call (invalid_call)
  HostBuffer in, out;      // in: the input (and output of in-place collectives); out: a new result
  bool writes_in = false;  // all_reduce, broadcast
  int64_t count = 0;       // elements of one rank's block
  Tensor result_;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false, finished_ = false;
  std::string error_, final_error_;
};

/// What the group's handles share with the communication thread.
struct Shared {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  bool check = true;
  std::atomic<int64_t> timeout_ms{300000};

  std::mutex mu;
  std::condition_variable cv, idle_cv;
  std::deque<std::shared_ptr<Job>> queue;
  bool stop = false, busy = false;
  std::string broken;  // why the group is unusable ("" while it works)

  void mark_broken(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (broken.empty()) broken = why;
  }
  std::string broken_reason() {
    std::lock_guard<std::mutex> lock(mu);
    return broken;
  }

  void loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      std::string why;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;
        job = std::move(queue.front());
        queue.pop_front();
        busy = true;
        why = broken;
      }
      std::string error;
      if (!why.empty()) {
        error = label(job->kind);
        error += "the process group is unusable after an earlier failure: ";
        error += why;
      } else {
        try {
          run(*job);
        } catch (const std::exception& e) {
          error = e.what();
        }
      }
      job->complete(std::move(error));
      job.reset();  // the caller's handle may be gone: the buffers go with the job
      {
        std::lock_guard<std::mutex> lock(mu);
        busy = false;
      }
      idle_cv.notify_all();
    }
  }

  void run(Job& j) {
    if (check) {
      std::vector<CallDesc> all(static_cast<size_t>(size));
      check_mpi(MPI_Allgather(j.desc.v, CallDesc::kInts, MPI_INT64_T, all.data(), CallDesc::kInts, MPI_INT64_T, comm),
                j.kind, "MPI_Allgather");
      std::string m = mismatch(all, rank);
      KILN_CHECK(m.empty(), op_label(j.kind), strip_label(m));
    }
    KILN_CHECK(j.invalid.empty(), op_label(j.kind), strip_label(j.invalid));
    if (j.kind == Kind::Barrier) {
      check_mpi(MPI_Barrier(comm), j.kind, "MPI_Barrier");
      return;
    }
    const MPI_Datatype type = mpi_type(j.dtype);
    const size_t esize = dtype_size(j.dtype);
    constexpr int64_t kChunk = int64_t{1} << 30;  // elements per call (MPI counts are int)
    switch (j.kind) {
      case Kind::AllReduce: {
        auto* p = static_cast<char*>(j.in.data());
        for (int64_t done = 0; done < j.count; done += kChunk) {
          int n = static_cast<int>(std::min(kChunk, j.count - done));
          check_mpi(
              MPI_Allreduce(MPI_IN_PLACE, p + static_cast<size_t>(done) * esize, n, type, mpi_op(j.dtype, j.op), comm),
              j.kind, "MPI_Allreduce");
        }
        if (j.op == ReduceOp::Mean) divide(p, j.count, j.dtype, size);
        break;
      }
      case Kind::Broadcast: {
        auto* p = static_cast<char*>(j.in.data());
        for (int64_t done = 0; done < j.count; done += kChunk) {
          int n = static_cast<int>(std::min(kChunk, j.count - done));
          check_mpi(MPI_Bcast(p + static_cast<size_t>(done) * esize, n, type, j.root, comm), j.kind, "MPI_Bcast");
        }
        break;
      }
      case Kind::AllGather:
        check_mpi(MPI_Allgather(j.in.data(), static_cast<int>(j.count), type, j.out.data(), static_cast<int>(j.count),
                                type, comm),
                  j.kind, "MPI_Allgather");
        break;
      case Kind::ReduceScatter:
        check_mpi(MPI_Reduce_scatter_block(j.in.data(), j.out.data(), static_cast<int>(j.count), type,
                                           mpi_op(j.dtype, j.op), comm),
                  j.kind, "MPI_Reduce_scatter_block");
        if (j.op == ReduceOp::Mean) divide(j.out.data(), j.count, j.dtype, size);
        break;
      case Kind::Barrier:
        break;
    }
  }
};

void Job::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!finished_) {
    const auto timeout = std::chrono::milliseconds(shared_->timeout_ms.load());
    if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.3g", static_cast<double>(timeout.count()) / 1000.0);
      final_error_ = label(kind);
      final_error_ += desc.str();
      final_error_ += " on rank " + std::to_string(shared_->rank) + " did not complete within ";
      final_error_ += secs;
      final_error_ +=
          " s (the group's timeout, KILN_DIST_TIMEOUT): a rank may have died, hang, or not have called the same "
          "collective";
      shared_->mark_broken(final_error_);
    } else if (!error_.empty()) {
      final_error_ = error_;
    } else {
      if (writes_in) in.finish();
      out.finish();
    }
    finished_ = true;
  }
  KILN_CHECK(final_error_.empty(), op_label(kind), strip_label(final_error_));
}

// ---- the group ----------------------------------------------------------------------------------

bool g_initialised_mpi = false;  // we called MPI_Init_thread (and so call MPI_Finalize)
bool g_finalized_mpi = false;

class MpiGroup final : public ProcessGroup {
 public:
  explicit MpiGroup(const InitOptions& o) : s_(std::make_shared<Shared>()) {
    KILN_CHECK(!g_finalized_mpi, "dist.init", "MPI cannot start again in a process that finalized it");
    int inited = 0;
    MPI_Initialized(&inited);
    int provided = 0;
    if (!inited) {
      int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      KILN_CHECK(rc == MPI_SUCCESS, "dist.init", "MPI_Init_thread failed (error " << rc << ")");
      g_initialised_mpi = true;
    } else {
      MPI_Query_thread(&provided);
    }
    KILN_CHECK(provided >= MPI_THREAD_SERIALIZED, "dist.init",
               "this MPI library gives thread level " << provided
                                                      << "; Kiln needs MPI_THREAD_SERIALIZED or better "
                                                         "(one thread runs the collectives)");
    MPI_Comm_dup(MPI_COMM_WORLD, &s_->comm);
    MPI_Comm_set_errhandler(s_->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(s_->comm, &s_->rank);
    MPI_Comm_size(s_->comm, &s_->size);
    create_types();
    s_->timeout_ms = default_timeout(o.timeout_seconds).count();
    const char* chk = std::getenv("KILN_DIST_CHECK");
    s_->check = o.check && !(chk && std::string(chk) == "0");
    if (o.divide_threads && !std::getenv("KILN_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS")) {
      MPI_Comm node;
      MPI_Comm_split_type(s_->comm, MPI_COMM_TYPE_SHARED, s_->rank, MPI_INFO_NULL, &node);
      int local = 1;
      MPI_Comm_size(node, &local);
      MPI_Comm_free(&node);
      int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      set_num_threads(std::max(1, cores / std::max(1, local)));
    }
    worker_ = std::thread([s = s_] { s->loop(); });
  }

  ~MpiGroup() override {
    // Drain the queue (bounded by the timeout), then shut down; abort when a peer is gone.
    bool drained = false;
    {
      std::unique_lock<std::mutex> lock(s_->mu);
      if (s_->broken.empty())
        drained = s_->idle_cv.wait_for(lock, std::chrono::milliseconds(s_->timeout_ms.load()),
                                       [&] { return s_->queue.empty() && !s_->busy; });
      s_->stop = true;
    }
    s_->cv.notify_all();
    std::string why = s_->broken_reason();
    if (!drained && why.empty()) why = "finalize: collectives still pending after the timeout";
    if (!why.empty()) {
      std::fprintf(stderr, "kiln: rank %d aborts the job: %s\n", s_->rank, why.c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
      std::_Exit(1);
    }
    worker_.join();
    free_types();
    MPI_Comm_free(&s_->comm);
    if (g_initialised_mpi) {
      MPI_Finalize();
      g_finalized_mpi = true;
    }
  }

  int rank() const override { return s_->rank; }
  int size() const override { return s_->size; }
  std::string backend() const override { return "mpi"; }
  std::chrono::milliseconds timeout() const override { return std::chrono::milliseconds(s_->timeout_ms.load()); }
  void set_timeout(std::chrono::milliseconds t) override {
    KILN_CHECK(t.count() > 0, "dist.set_timeout", "the timeout must be positive");
    s_->timeout_ms = t.count();
  }

  Work all_reduce_async(const Tensor& t, ReduceOp op) override {
    auto j = make(Kind::AllReduce, t, op, 0);
    j->in = HostBuffer(t, true);
    j->writes_in = true;
    j->count = t.numel();
    j->result_ = t;
    return submit(std::move(j));
  }

  Work broadcast_async(const Tensor& t, int root) override {
    auto j = make(Kind::Broadcast, t, ReduceOp::Sum, root);
    j->root = root;
    j->in = HostBuffer(t, s_->rank == root);
    j->writes_in = s_->rank != root;
    j->count = t.numel();
    j->result_ = t;
    return submit(std::move(j));
  }

  Work all_gather_async(const Tensor& t) override {
    auto j = make(Kind::AllGather, t, ReduceOp::Sum, 0);
    KILN_CHECK(t.numel() <= INT_MAX, "dist.all_gather",
               "tensors of more than " << INT_MAX << " elements are not supported, got " << t.numel());
    Shape shape = t.shape();
    shape.insert(0, s_->size);
    j->result_ = empty(shape, {.dtype = t.dtype(), .device = t.device()});
    j->in = HostBuffer(t, true);
    j->out = HostBuffer(j->result_, false);
    j->count = t.numel();
    return submit(std::move(j));
  }

  Work reduce_scatter_async(const Tensor& t, ReduceOp op) override {
    auto j = make(Kind::ReduceScatter, t, op, 0);
    Shape shape = t.shape();
    if (j->invalid.empty()) shape[0] /= s_->size;  // else the job only reports the error
    if (shape.empty()) shape.push_back(0);
    j->result_ = empty(shape, {.dtype = t.dtype(), .device = t.device()});
    KILN_CHECK(j->result_.numel() <= INT_MAX, "dist.reduce_scatter",
               "blocks of more than " << INT_MAX << " elements are not supported, got " << j->result_.numel());
    j->in = HostBuffer(t, true);
    j->out = HostBuffer(j->result_, false);
    j->count = j->result_.numel();
    return submit(std::move(j));
  }

  Work barrier_async() override {
    auto j = std::make_shared<Job>(s_, Kind::Barrier);
    j->desc = CallDesc::of(Kind::Barrier, nullptr, ReduceOp::Sum, 0);
    return submit(std::move(j));
  }

 private:
  std::shared_ptr<Job> make(Kind kind, const Tensor& t, ReduceOp op, int root) {
    KILN_CHECK(t.defined(), op_label(kind), "the tensor is undefined");
    check_dtype(t.dtype(), op_label(kind).c_str());
    auto j = std::make_shared<Job>(s_, kind);
    j->op = op;
    j->dtype = t.dtype();
    j->desc = CallDesc::of(kind, &t, op, root);
    j->invalid = invalid_call(kind, &t, op, root, s_->size);
    return j;
  }

  Work submit(std::shared_ptr<Job> j) {
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      KILN_CHECK(s_->broken.empty(), op_label(j->kind),
                 "the process group is unusable after an earlier failure: " << s_->broken);
      s_->queue.push_back(j);
    }
    s_->cv.notify_one();
    return Work(std::move(j));
  }

  std::shared_ptr<Shared> s_;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_mpi_group(const InitOptions& options) { return std::make_unique<MpiGroup>(options); }

}  // namespace kiln::dist::detail
