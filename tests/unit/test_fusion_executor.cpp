// SPDX-License-Identifier: MIT OR Apache-2.0
// The seam between the fusion planner and a backend (src/fusion/executor.h): fusion decorates
// any backend that offers an executor, and passes every op through unfused on one that does not.
// Reference: the same ops on the plain CPU, bitwise.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "bitwise_same.h"
#include "core/backend.h"
#include "fusion/executor.h"
#include "fusion/fusion.h"
#include "fusion_small_limit.h"

using namespace kiln;
using kiln::test::same;
using kiln::test::SmallLimit;

namespace {

Device plain() { return test::plain_cpu(); }

/// An executor that counts launches and hands them to another (the CPU's).
class CountingExecutor final : public fusion::Executor {
 public:
  explicit CountingExecutor(fusion::Executor* inner) : inner_(inner) {}
  bool program_step(const ir::Op& op, fusion::PInstr* ins) const override { return inner_->program_step(op, ins); }
  bool long_reduction(const ir::Op& op) const override { return inner_->long_reduction(op); }
  bool column_reduction(const ir::Op& op, int64_t& width) const override { return inner_->column_reduction(op, width); }
  void run_op(const ir::Op& op, void* const* in, void* const* out) override {
    ++ops;
    inner_->run_op(op, in, out);
  }
  void run_group(fusion::Buffers& mem, const fusion::GroupLaunch& l) override {
    ++groups;
    inner_->run_group(mem, l);
  }
  void run_pipeline(fusion::Buffers& mem, const fusion::PipelineLaunch& p) override {
    ++pipelines;
    inner_->run_pipeline(mem, p);
  }
  int64_t ops = 0, groups = 0, pipelines = 0;

 private:
  fusion::Executor* inner_;
};

/// A base backend of its own over the CPU's memory and kernels, offering the counting
/// executor: what a new host backend with fused kernels looks like to the decorator.
class HostBackend final : public Backend {
 public:
  HostBackend() : cpu_(plain().backend()), exec_(cpu_->fusion_executor()) {}
  DeviceType type() const override { return DeviceType::CPU; }
  std::string name() const override { return "test-host"; }
  std::shared_ptr<Storage> allocate(size_t nbytes) override {
    return std::make_shared<Storage>(cpu_->allocate_memory(nbytes), nbytes, this);
  }
  void release(void* data, size_t nbytes) noexcept override { cpu_->release(data, nbytes); }
  void* allocate_memory(size_t nbytes) override { return cpu_->allocate_memory(nbytes); }
  void execute(const ir::Op& op, Storage* const* in, Storage* const* out) override {
    std::deque<Storage> ins, outs;  // the same memory, as the CPU's storages (not movable)
    std::vector<Storage*> pi, po;
    for (size_t i = 0; i < op.inputs.size(); ++i) pi.push_back(&ins.emplace_back(in[i]->data, in[i]->nbytes, nullptr));
    for (size_t i = 0; i < op.outputs.size(); ++i)
      po.push_back(&outs.emplace_back(out[i]->data, out[i]->nbytes, nullptr));
    cpu_->execute(op, pi.data(), po.data());
  }
  void write(Storage& dst, size_t off, const void* src, size_t n) override {
    if (n) std::memcpy(static_cast<char*>(dst.data) + off, src, n);
  }
  void read(const Storage& src, size_t off, void* dst, size_t n) override {
    if (n) std::memcpy(dst, static_cast<const char*>(src.data) + off, n);
  }
  fusion::Executor* fusion_executor() override { return &exec_; }
  CountingExecutor& counter() { return exec_; }

 private:
  Backend* cpu_;
  CountingExecutor exec_;
};

/// A chain of elementwise ops closed by a row reduction, and a row pipeline (x - max).
std::vector<Tensor> chain(const Tensor& x) {
  Tensor y = (x * 0.5 + 0.25).tanh() * x;
  Tensor s = y.sum({-1});
  Tensor p = (x - x.amax({-1}, true)).exp();
  return {y, s, p};
}

}  // namespace

TEST(FusionExecutor, AnyBackendWithAnExecutorIsFused) {
  SmallLimit keep(0);  // queue every op, whatever its size
  static HostBackend host;
  const Device dev = Device(&host).fusion();
  ASSERT_TRUE(dev.has_fusion());
  Tensor x = randn({64, 4096}).to(plain());
  const std::vector<Tensor> want = chain(x);
  fusion::reset_stats();
  const int64_t groups0 = host.counter().groups, pipes0 = host.counter().pipelines;
  const std::vector<Tensor> got = chain(x.to(dev));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same(got[i], want[i])) << "result " << i;
  EXPECT_GT(fusion::stats().fused_groups, 0);
  EXPECT_GT(host.counter().groups + host.counter().pipelines, groups0 + pipes0)
      << "the decorator ran its groups through the backend's executor";
  EXPECT_EQ(got[0].device(), dev);
}

TEST(FusionExecutor, BackendWithoutOnePassesOpsThrough) {
  SmallLimit keep(0);
  const Device sub = Device::from_string("subset");
  ASSERT_EQ(sub.backend()->fusion_executor(), nullptr);
  const Device dev = sub.fusion();
  ASSERT_TRUE(dev.has_fusion());
  Tensor x = randn({16, 300}).to(plain());
  const std::vector<Tensor> want = chain(x);
  fusion::reset_stats();
  const std::vector<Tensor> got = chain(x.to(dev));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same(got[i], want[i])) << "result " << i;
  const fusion::Stats st = fusion::stats();
  EXPECT_EQ(st.recorded, 0) << "nothing is queued without an executor";
  EXPECT_EQ(st.fused_groups, 0);
  EXPECT_EQ(got[0].device(), dev);
}
