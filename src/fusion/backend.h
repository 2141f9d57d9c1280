// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The fusion decorator (fusion.cpp: recording, flushes, cutting groups; plan.cpp: planning a
// group; rows.cpp: row pipelines). It plans; the inner backend's executor (fusion/executor.h)
// runs. See Note [Fusion design] in fusion.cpp.
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fusion/executor.h"
#include "fusion/plan.h"

namespace kiln::fusion {

// ---- the backend -------------------------------------------------------------------------------

class FusionBackend final : public Backend, private Buffers {
 public:
  explicit FusionBackend(Backend* inner)
      : inner_(inner),
        exec_(inner->has_data() ? inner->fusion_executor() : nullptr),
        small_alone_(exec_ && exec_->small_ops_alone()) {}
  DeviceType type() const override { return inner_->type(); }
  std::string name() const override { return inner_->name() + "+fusion"; }

  std::shared_ptr<Storage> allocate(size_t nbytes) override {
    if (exec_) exec_->check_allocation(nbytes);
    auto* b = new Buf;
    b->nbytes = nbytes;
    return std::make_shared<Storage>(b, nbytes, this);
  }
  void release(void* data, size_t) noexcept override {
    if (!data) return;
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Buf* b = static_cast<Buf*>(data);
    b->alive = false;
    if (b->refs == 0) free_buf(b);
  }

  void execute(const ir::Op& op, Storage* const* in, Storage* const* out) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Rec r;
    r.in.reserve(op.inputs.size());
    for (size_t i = 0; i < op.inputs.size(); ++i) r.in.push_back(buf_of(in[i]));
    for (size_t i = 0; i < op.outputs.size(); ++i) r.out.push_back(buf_of(out[i]));
    const bool lz = lazy(), small = lz && small_alone_ && is_small(op);
    // A small convolution or product is not queued for its epilogue: its result feeds small ops.
    const bool rec = lz && recordable(op) && !(small && is_anchor(op));
    if (rec && small && independent(r)) {
      bump(&Stats::small_direct);
      run_single(op, r);
      return;
    }
    if (!rec) {
      // An op that cannot be queued runs now; the queue runs first unless no queued op names
      // its buffers (then the order between them changes nothing).
      const bool first = !stream_.empty() && !independent(r);
      if (lz) note_eager(op, first);
      if (first) flush("cannot be queued", &op);
      run_single(op, r);
      return;
    }
    for (Buf* b : r.in) ++b->refs;
    for (Buf* b : r.out) ++b->refs;
    Rec& q = stream_.emplace_back();  // the op is copied once, into its place in the stream
    q.op = op;
    q.in = r.in;
    q.out = r.out;
    bump(&Stats::recorded);
    if (stream_.size() >= kMaxStream) flush("stream length limit");
  }

  void write(Storage& dst, size_t off, const void* src, size_t n) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Buf* b = buf_of(&dst);
    if (b->refs) flush("write into a queued buffer");
    materialise(b);
    Storage tmp(b->real, b->nbytes, inner_, unowned_memory());
    inner_->write(tmp, off, src, n);
  }
  void read(const Storage& src, size_t off, void* dst, size_t n) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Buf* b = buf_of(&src);
    if (b->refs) flush("read");
    materialise(b);
    Storage tmp(b->real, b->nbytes, inner_, unowned_memory());
    inner_->read(tmp, off, dst, n);
  }
  bool has_data() const override { return inner_->has_data(); }
  void* host_data(Storage& s) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Buf* b = buf_of(&s);
    if (b->refs) flush("host access");
    materialise(b);
    return inner_->type() == DeviceType::CPU ? b->real : nullptr;
  }
  std::shared_ptr<Storage> wrap_host(void* data, size_t nbytes, std::shared_ptr<void> owner) override {
    // On the CPU the host memory is the inner memory; a GPU may import it (a storage of its own,
    // which the buffer then holds).
    std::shared_ptr<Storage> inner;
    if (inner_->type() != DeviceType::CPU || !inner_->has_data()) {
      inner = inner_->wrap_host(data, nbytes, std::move(owner));
      if (!inner) return nullptr;
    }
    auto* b = new Buf;
    b->nbytes = nbytes;
    b->real = inner ? inner->data : data;
    b->owner = inner ? std::shared_ptr<void>(inner) : owner ? std::move(owner) : std::make_shared<int>(0);
    return std::make_shared<Storage>(b, nbytes, this);
  }
  void sync() override {
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      flush("sync");
    }
    inner_->sync();
  }
  /// Memory is allocated when a value is computed, so queued work runs first.
  MemoryStats memory_stats() const override {
    const_cast<FusionBackend*>(this)->flush_all("memory_stats");
    return inner_->memory_stats();
  }
  void reset_peak_memory() override { inner_->reset_peak_memory(); }
  void empty_cache() override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    flush("empty_cache");
    inner_->empty_cache();
  }
  Backend* inner() override { return inner_; }
  Layer layer() const override { return Layer::Fusion; }
  Backend* rewrap(Backend* inner) override { return fusion::fusion_backend(inner); }

  void flush_all(const char* why) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    flush(why);
  }

 private:
  bool lazy() const { return enabled() && exec_ != nullptr; }

  /// Whether every result of op has at most small_limit() elements (a limit of 0: never).
  /// Inputs may be larger (a reduction, a convolution's weights): what fusion keeps out of
  /// memory is the results passed between ops.
  static bool is_small(const ir::Op& op) {
    const int64_t lim = small_limit();
    if (lim <= 0) return false;
    for (const auto& d : op.outputs)
      if (d.numel() > lim) return false;
    // A row op over the trailing dims of a large input is queued: it may lead a row pipeline.
    return !is_row_kind(op.kind) || op.inputs.empty() || op.inputs[0].numel() <= lim || row_dims(op) == 0;
  }
  /// Whether no queued op names a buffer of r: running r ahead of the queue changes nothing.
  static bool independent(const Rec& r) {
    for (Buf* b : r.in)
      if (b->refs) return false;
    for (Buf* b : r.out)
      if (b->refs) return false;
    return true;
  }

  Buf* buf_of(const Storage* s) {
    KILN_CHECK(s->backend == this && s->data != nullptr, "fusion",
               "a buffer of another device reached the fusion decorator");
    return static_cast<Buf*>(s->data);
  }

  void note_eager(const ir::Op& op, bool flushes) {
    bump(&Stats::eager);
    if (debug_on()) {
      const char* w = step_refusal(op);
      std::string why = is_row_kind(op.kind) ? "row op on a non-float dtype" : w ? w : "";
      dbg("not queued: " + std::string(ir::op_name(op.kind)) + " (" + why + "); runs now" +
          (flushes           ? ", after flushing " + std::to_string(stream_.size()) + " queued ops"
           : stream_.empty() ? ""
                             : ", ahead of " + std::to_string(stream_.size()) + " independent queued ops"));
    }
  }

  void free_buf(Buf* b) noexcept {
    if (b->real && !b->owner) inner_->release(b->real, b->nbytes);
    delete b;
  }

  void materialise(Buf* b) override {
    if (b->real || b->nbytes == 0) return;
    b->real = inner_->allocate_memory(b->nbytes);  // given back in free_buf
  }

  /// Runs op now on the inner backend over the buffers of r (r.op is not read).
  void run_single(const ir::Op& op, const Rec& r) {
    if (exec_) {  // what the inner backend's execute does, without Storage records of the memory
      SmallVec<void*, 4> in, out;
      for (Buf* b : r.in) {
        materialise(b);
        in.push_back(b->real);
      }
      for (Buf* b : r.out) {
        materialise(b);
        out.push_back(b->real);
      }
      exec_->run_op(op, in.data(), out.data());
      return;
    }
    // Storages of the inner backend over the buffers' memory: inline for up to 8 (no allocation
    // per op), in a deque beyond that (Storage cannot move; an empty deque allocates, so it is
    // made only when needed).
    std::optional<Storage> inline_tmp[8];
    size_t used = 0;
    std::optional<std::deque<Storage>> more;
    auto wrap = [&](Buf* b) -> Storage* {
      materialise(b);
      if (used < std::size(inline_tmp))
        return &inline_tmp[used++].emplace(b->real, b->nbytes, inner_, unowned_memory());
      if (!more) more.emplace();
      return &more->emplace_back(b->real, b->nbytes, inner_, unowned_memory());
    };
    SmallVec<Storage*, 4> in, out;
    for (Buf* b : r.in) in.push_back(wrap(b));
    for (Buf* b : r.out) out.push_back(wrap(b));
    inner_->execute(op, in.data(), out.data());
  }

  /// Runs the queue. why: the reason, for debug output ("op <kind> <why>" when `op` is given).
  void flush(const char* why, const ir::Op* op = nullptr) {
    if (stream_.empty()) return;
    // The queue's storage is recycled (a spare vector with its capacity), not reallocated.
    std::vector<Rec> s = std::move(stream_);
    stream_ = std::move(spare_);
    stream_.clear();
    if (stream_.capacity() < kMaxStream) stream_.reserve(kMaxStream);
    bump(&Stats::flushes);
    if (debug_on())
      dbg("flush (" + (op ? "op " + std::string(ir::op_name(op->kind)) + " " : std::string()) + why +
          "): " + std::to_string(s.size()) + " queued ops");
    // Each op's buffer references are dropped as soon as it has run (release), so memory of
    // values that die inside the stream goes back to the allocator for the ops after them; the
    // rest (an exception, a nested flush) are dropped at the end.
    std::vector<char> released(s.size(), 0);
    struct Drop {
      FusionBackend* self;
      std::vector<Rec>& s;
      std::vector<char>* saved;
      ~Drop() {
        for (size_t q = 0; q < s.size(); ++q) self->release(s, q);
        self->released_ = saved;
        s.clear();
        if (self->spare_.capacity() < s.capacity()) self->spare_ = std::move(s);
      }
    } drop{this, s, released_};
    released_ = &released;
    // Queued work completes at a sync point: a buffer that cannot be allocated now is reported
    // as "[sync] out of memory ..." unless a user op (whose call flushed) is already named.
    detail::OpScope scope("sync");
    run_stream(s);
  }

  /// Drops record q's buffer references (it has run, or is dead); its buffers may be freed.
  void release(const std::vector<Rec>& s, size_t q) noexcept {
    if (!released_ || (*released_)[q]) return;
    (*released_)[q] = 1;
    for (Buf* b : s[q].in) unref(b);
    for (Buf* b : s[q].out) unref(b);
  }

  void unref(Buf* b) noexcept {
    if (--b->refs == 0 && !b->alive) free_buf(b);
  }

  void run_stream(const std::vector<Rec>& s);
  void run_ops(const std::vector<Rec>& s, std::vector<size_t> order);
  size_t try_conv_epilogue(const std::vector<Rec>& s, const std::vector<size_t>& order, size_t head);
  size_t cut_group(const std::vector<Rec>& s, const std::vector<size_t>& order, size_t start, Group& g,
                   std::vector<size_t>& hoisted, std::string& why, bool hoist = true);
  bool epilogue_fits(const std::vector<Rec>& s, size_t i, const Group& g) const;
  bool try_add_step(const std::vector<Rec>& s, size_t j, Group& g, std::string& why);
  bool try_tail(const std::vector<Rec>& s, size_t j, Group& g, std::string& why);
  /// Plans group g into gs_[slot]: its stores, plan (cached by signature), sources and program
  /// (plan.cpp).
  GroupScratch& plan_group(const std::vector<Rec>& s, const Group& g, size_t slot);
  /// Plans g and runs it on the executor (with `matmul`: as that product's epilogue).
  void run_group(const std::vector<Rec>& s, const Group& g, const Rec* matmul = nullptr);
  size_t try_row_pipeline(const std::vector<Rec>& s, const std::vector<size_t>& order, size_t head, const Group* first,
                          size_t end);
  void run_row_pipeline(const std::vector<Rec>& s, const std::vector<Stage>& stages, const Shape& S, int64_t k);

  Backend* inner_;
  /// The inner backend's executor: ops may be queued, and run_single runs through it (null:
  /// every op passes through unfused).
  Executor* const exec_;
  const bool small_alone_;                 ///< exec_->small_ops_alone(), asked once
  std::vector<char>* released_ = nullptr;  ///< per record of the stream being flushed
  std::recursive_mutex mu_;
  std::vector<Rec> stream_, spare_;  // the queue, and storage for the next one
  std::deque<GroupScratch> gs_;      ///< planned groups: one, or one per stage of a row pipeline
  std::unordered_map<std::string, std::shared_ptr<Plan>> plans_;
};

}  // namespace kiln::fusion
