// SPDX-License-Identifier: MIT OR Apache-2.0
// Data-parallel training: gradients averaged over the ranks in buckets, during backward.
//
// Note [DDP buckets]: the trainable parameters are packed, in reverse order (roughly the order
// backward produces their gradients), into buckets of about DDPOptions::bucket_bytes, one dtype
// per bucket. Each step gets fresh bucket memory (the previous step's gradients stay valid) laid
// out as
//
//   [ gradient of each parameter, times this rank's weight | weight | one flag per parameter ]
//
// A GradReadyScope (autodiff/grad_ready.h) reports each gradient the moment backward has
// finished it; it is copied (and weighted) into its bucket, and once every gradient of a bucket
// is in, the bucket's all-reduce (a sum) starts on the group's communication thread while
// backward goes on. Buckets start strictly in index order on every rank, so the ranks' collectives
// match whatever order their gradients arrive in. After backward, the gradients that never came
// (parameters this rank's loss does not reach) are zeros with their flag 0, and the remaining
// buckets start. Summed, the weight slot holds sum_r weight_r and each flag counts the ranks that
// had a gradient: every gradient is divided by the weights' sum, and a parameter no rank had a
// gradient for gets none. The gradients handed back are views of the bucket memory.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "autodiff/grad_ready.h"
#include "autodiff/graph.h"
#include "core/backend.h"
#include "dist/common.h"
#include "kiln/nn/module.h"
#include "kiln/ops.h"

namespace kiln::dist {

namespace {

using detail::divide;
using detail::scale;
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void put(char* p, DType d, double v) {
  switch (d) {
    case DType::F16:
      *reinterpret_cast<uint16_t*>(p) = Half::from_float(static_cast<float>(v));
      break;
    case DType::BF16:
      *reinterpret_cast<uint16_t*>(p) = BFloat16::from_float(static_cast<float>(v));
      break;
    case DType::F32:
      *reinterpret_cast<float*>(p) = static_cast<float>(v);
      break;
    case DType::F64:
      *reinterpret_cast<double*>(p) = v;
      break;
    default:
      KILN_ASSERT(false);
  }
}

double get(const char* p, DType d) {
  switch (d) {
    case DType::F16:
      return Half::to_float(*reinterpret_cast<const uint16_t*>(p));
    case DType::BF16:
      return BFloat16::to_float(*reinterpret_cast<const uint16_t*>(p));
    case DType::F32:
      return *reinterpret_cast<const float*>(p);
    case DType::F64:
      return *reinterpret_cast<const double*>(p);
    default:
      KILN_ASSERT(false);
  }
  return 0;
}

struct Bucket {
  DType dtype = DType::F32;
  Device memory;                 // where the bucket lives: host memory the group reads in place
  std::vector<size_t> params;    // indices into State::params
  std::vector<int64_t> offsets;  // of each parameter's gradient, in elements
  int64_t numel = 0;             // gradient elements
  // this step
  Tensor buf;
  char* host = nullptr;
  size_t ready = 0;
  std::vector<bool> have;
  Work work;
  size_t esize() const { return dtype_size(dtype); }
  int64_t weight_slot() const { return numel; }
  int64_t flag_slot(size_t k) const { return numel + 1 + static_cast<int64_t>(k); }
};

/// A device with host memory for the gradients of parameters on `d`: d itself (without autodiff)
/// when its memory is host memory, else the CPU.
Device host_memory_device(const Device& d) {
  Device plain = d.without_autodiff();
  Tensor probe = empty({1}, {.dtype = f32, .device = plain});
  return host_storage_data(probe) ? plain : Device::cpu();
}

}  // namespace

struct DistributedDataParallel::State {
  ProcessGroup* group = nullptr;
  DDPOptions opt;
  std::vector<Tensor> params;   // trainable
  std::vector<Tensor> synced;   // every parameter and buffer (broadcast at the start)
  std::vector<Tensor> buffers;  // sync_buffers
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of, slot_of;
  size_t next_launch = 0;
  double weight = 1;
  /// What each gradient is multiplied by in its bucket: the weight, unless backward already ran on
  /// weight * loss (then 1).
  double grad_scale = 1;
  bool in_backward = false;
  DDPStats stats;

  void build_buckets() {
    bucket_of.assign(params.size(), 0);
    slot_of.assign(params.size(), 0);
    std::vector<size_t> open;  // per bucket being filled: index into buckets, one per (dtype, device)
    for (size_t i = params.size(); i-- > 0;) {
      const Tensor& p = params[i];
      KILN_CHECK(p.is_floating_point(), "DistributedDataParallel",
                 "parameter " << static_cast<long long>(i) << " has dtype " << dtype_name(p.dtype()).data()
                              << "; gradients need a floating-point dtype");
      Device mem = host_memory_device(p.device());
      size_t b = buckets.size();
      for (size_t o : open)
        if (buckets[o].dtype == p.dtype() && buckets[o].memory == mem) b = o;
      const size_t bytes = static_cast<size_t>(p.numel()) * p.element_size();
      if (b < buckets.size() && buckets[b].numel > 0 &&
          static_cast<size_t>(buckets[b].numel) * buckets[b].esize() + bytes > opt.bucket_bytes) {
        open.erase(std::find(open.begin(), open.end(), b));
        b = buckets.size();
      }
      if (b == buckets.size()) {
        Bucket nb;
        nb.dtype = p.dtype();
        nb.memory = mem;
        buckets.push_back(std::move(nb));
        open.push_back(b);
      }
      Bucket& bk = buckets[b];
      bucket_of[i] = b;
      slot_of[i] = bk.params.size();
      bk.params.push_back(i);
      bk.offsets.push_back(bk.numel);
      bk.numel += p.numel();
    }
  }

  void begin(double w) {
    KILN_CHECK(std::isfinite(w) && w >= 0, "DistributedDataParallel", "the weight must be finite and >= 0, got " << w);
    weight = w;
    grad_scale = w;
    next_launch = 0;
    stats = DDPStats{};
    stats.buckets = buckets.size();
    for (Bucket& b : buckets) {
      b.buf = empty({b.numel + 1 + static_cast<int64_t>(b.params.size())}, {.dtype = b.dtype, .device = b.memory});
      b.host = static_cast<char*>(host_storage_data(b.buf));
      KILN_ASSERT(b.host != nullptr);
      b.ready = 0;
      b.have.assign(b.params.size(), false);
      b.work = Work();
    }
  }

  void ready(size_t i, const Tensor& g) {
    Bucket& b = buckets[bucket_of[i]];
    const size_t k = slot_of[i];
    if (b.have[k]) return;
    const Tensor& p = params[i];
    KILN_CHECK(g.numel() == p.numel(), "DistributedDataParallel",
               "the gradient of parameter " << static_cast<long long>(i) << " has shape " << g.shape()
                                            << ", the parameter " << p.shape());
    char* dst = b.host + static_cast<size_t>(b.offsets[k]) * b.esize();
    g.copy_to_host(dst, b.dtype);
    if (grad_scale != 1.0) scale(dst, p.numel(), b.dtype, grad_scale);
    put(b.host + static_cast<size_t>(b.flag_slot(k)) * b.esize(), b.dtype, 1.0);
    b.have[k] = true;
    if (++b.ready == b.params.size()) launch_ready();
  }

  /// Starts the buckets that are complete, in index order.
  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].ready == buckets[next_launch].params.size()) {
      Bucket& b = buckets[next_launch++];
      put(b.host + static_cast<size_t>(b.weight_slot()) * b.esize(), b.dtype, weight);
      b.work = group->all_reduce_async(b.buf, ReduceOp::Sum);
      if (in_backward) ++stats.launched_during_backward;
    }
  }

  /// Zeros for the gradients that never came; starts every bucket not started yet.
  void launch_rest() {
    for (Bucket& b : buckets) {
      for (size_t k = 0; k < b.params.size(); ++k) {
        if (b.have[k]) continue;
        const Tensor& p = params[b.params[k]];
        std::memset(b.host + static_cast<size_t>(b.offsets[k]) * b.esize(), 0,
                    static_cast<size_t>(p.numel()) * b.esize());
        put(b.host + static_cast<size_t>(b.flag_slot(k)) * b.esize(), b.dtype, 0.0);
        b.have[k] = true;
      }
      b.ready = b.params.size();
    }
    launch_ready();
  }

  /// Waits for every bucket; puts the averaged gradients into grads.
  void finish(Gradients& grads) {
    auto t0 = Clock::now();
    for (Bucket& b : buckets) b.work.wait();
    stats.wait_seconds = seconds_since(t0);
    for (Bucket& b : buckets) {
      const double total = get(b.host + static_cast<size_t>(b.weight_slot()) * b.esize(), b.dtype);
      for (size_t k = 0; k < b.params.size(); ++k) {
        const Tensor& p = params[b.params[k]];
        grads.remove(p);
        if (get(b.host + static_cast<size_t>(b.flag_slot(k)) * b.esize(), b.dtype) <= 0) continue;
        KILN_CHECK(total > 0, "DistributedDataParallel",
                   "the ranks' weights sum to " << total << "; at least one rank must give a positive weight");
        if (total != 1.0) divide(b.host + static_cast<size_t>(b.offsets[k]) * b.esize(), p.numel(), b.dtype, total);
        Tensor g = b.buf.narrow(0, b.offsets[k], p.numel()).view(p.shape());
        if (g.device() != p.device()) g = g.to(p.device());
        grads.accumulate(p.impl().autograd, g);
      }
      autodiff::bump_version(b.buf);
      b.buf = Tensor();
      b.host = nullptr;
    }
  }

  void broadcast(const std::vector<Tensor>& ts, int root) {
    if (group->size() == 1) return;
    std::vector<Work> works;
    works.reserve(ts.size());
    for (const Tensor& t : ts) works.push_back(group->broadcast_async(t, root));
    for (Work& w : works) w.wait();
  }
};

namespace {
std::vector<Tensor> buffers_of(nn::Module& m) {
  std::vector<Tensor> b;
  for (auto& [name, t] : m.named_buffers()) b.push_back(t);
  return b;
}
}  // namespace

DistributedDataParallel::DistributedDataParallel(nn::Module& model, const DDPOptions& options)
    : DistributedDataParallel(model, default_group(), options) {}

DistributedDataParallel::DistributedDataParallel(nn::Module& model, ProcessGroup& group, const DDPOptions& options)
    : DistributedDataParallel(model.parameters(), buffers_of(model), group, options) {
  if (options.sync_batch_norm) convert_sync_batch_norm(model, &group);
}

DistributedDataParallel::DistributedDataParallel(std::vector<Tensor> params, std::vector<Tensor> buffers,
                                                 ProcessGroup& group, const DDPOptions& options)
    : s_(std::make_unique<State>()) {
  s_->group = &group;
  s_->opt = options;
  KILN_CHECK(options.bucket_bytes > 0, "DistributedDataParallel", "bucket_bytes must be positive");
  for (const Tensor& p : params) {
    KILN_CHECK(p.defined(), "DistributedDataParallel", "a parameter is undefined");
    s_->synced.push_back(p);
    if (p.requires_grad()) s_->params.push_back(p);
  }
  for (const Tensor& b : buffers) {
    KILN_CHECK(b.defined(), "DistributedDataParallel", "a buffer is undefined");
    s_->synced.push_back(b);
    s_->buffers.push_back(b);
  }
  s_->build_buckets();
  broadcast_parameters(0);
}

DistributedDataParallel::~DistributedDataParallel() = default;

Gradients DistributedDataParallel::backward(const Tensor& loss, double weight, const BackwardOptions& options) {
  KILN_CHECK(!options.create_graph, "DistributedDataParallel::backward",
             "create_graph is not supported: the averaged gradients are not differentiable");
  State& s = *s_;
  s.begin(weight);
  // Backward of weight * loss rather than weighting each gradient afterwards: the same for a model
  // whose ranks are independent, and right where gradients cross ranks during backward
  // (synchronised batch norm): each rank's part of the gradient of sum_r weight_r * loss_r.
  const Tensor weighted = weight == 1.0 ? loss : loss * weight;
  s.grad_scale = 1.0;
  auto t0 = Clock::now();
  Gradients grads;
  {
    autodiff::GradReadyScope scope(s.params, [&s](size_t i, const Tensor& g) { s.ready(i, g); });
    s.in_backward = true;
    struct Reset {
      bool& b;
      ~Reset() { b = false; }
    } reset{s.in_backward};
    grads = weighted.backward(options);
  }
  s.launch_rest();
  s.stats.backward_seconds = seconds_since(t0);
  s.finish(grads);
  return grads;
}

Gradients DistributedDataParallel::average(Gradients grads, double weight) {
  State& s = *s_;
  s.begin(weight);
  for (size_t i = 0; i < s.params.size(); ++i) {
    Tensor g = grads.get(s.params[i]);
    if (g.defined()) s.ready(i, g);
  }
  s.launch_rest();
  s.finish(grads);
  return grads;
}

void DistributedDataParallel::broadcast_parameters(int root) { s_->broadcast(s_->synced, root); }

void DistributedDataParallel::sync_buffers() {
  if (s_->opt.broadcast_buffers) s_->broadcast(s_->buffers, 0);
}

ProcessGroup& DistributedDataParallel::group() const { return *s_->group; }
const DDPOptions& DistributedDataParallel::options() const { return s_->opt; }
const DDPStats& DistributedDataParallel::last_stats() const { return s_->stats; }

std::vector<std::vector<size_t>> DistributedDataParallel::buckets() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : s_->buckets) out.push_back(b.params);
  return out;
}

}  // namespace kiln::dist
