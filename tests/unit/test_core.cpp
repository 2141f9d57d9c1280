// Core: dtypes and promotion, shapes, views, copies, devices, memory stats, errors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <string>
#include <thread>

#include "test_util.h"

using namespace kiln;

namespace {

std::vector<float> iota(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  return v;
}
}  // namespace

TEST(Core, ElementwiseSmoke) {
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  Tensor b = a.exp() + 1;
  auto v = b.to_vector<float>();
  ASSERT_EQ(v.size(), 6u);
  EXPECT_NEAR(v[2], std::exp(3.f) + 1, 1e-4);
}

TEST(Core, PromoteTypesMatchesPyTorchTable) {
  EXPECT_EQ(promote_types(u8, i8), i16);
  EXPECT_EQ(promote_types(bool_, u8), u8);
  EXPECT_EQ(promote_types(i32, i64), i64);
  EXPECT_EQ(promote_types(i64, f16), f16);
  EXPECT_EQ(promote_types(f16, bf16), f32);
  EXPECT_EQ(promote_types(bf16, f64), f64);
  for (int a = 0; a < kNumDTypes; ++a)
    for (int b = 0; b < kNumDTypes; ++b) {
      if (promotion_refused(DType(a), DType(b))) {  // u64 with a signed type, both ways
        EXPECT_THROW(promote_types(DType(a), DType(b)), Error);
        EXPECT_THROW(promote_types(DType(b), DType(a)), Error);
        continue;
      }
      EXPECT_EQ(promote_types(DType(a), DType(b)), promote_types(DType(b), DType(a)));
    }
}

TEST(Core, ScalarPromotionByCategory) {
  Tensor i = tensor({1, 2, 3}, {3});  // int -> i32
  EXPECT_EQ(i.dtype(), i32);
  EXPECT_EQ((i + 1).dtype(), i32);
  EXPECT_EQ((i + 1.5).dtype(), f32);
  EXPECT_EQ((i / 2).dtype(), f32);
  Tensor h = ones({2}, {.dtype = f16});
  EXPECT_EQ((h * 2.5).dtype(), f16);
  Tensor b = tensor({true, false}, {2});
  EXPECT_EQ((b + 1).dtype(), i64);
  // A 0-d tensor of a higher category wins; of the same category it does not.
  Tensor z64 = scalar_tensor(2.0, f64);
  EXPECT_EQ((i + z64).dtype(), f64);
  EXPECT_EQ((ones({2}, {.dtype = f32}) + z64).dtype(), f32);
  EXPECT_EQ((i + scalar_tensor(int64_t{3})).dtype(), i32);
}

TEST(Core, HalfConversionsRoundTrip) {
  for (float f : {0.f, -0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.96e-08f, 1e-3f, 3.14159f}) {
    Half h(f);
    EXPECT_NEAR(float(h), f, std::abs(f) * 1e-3 + 6e-8) << f;
    BFloat16 b(f);
    EXPECT_NEAR(float(b), f, std::abs(f) * 8e-3 + 1e-38) << f;
  }
  EXPECT_TRUE(std::isinf(float(Half(1e6f))));
  EXPECT_TRUE(std::isnan(float(Half(NAN))));
  EXPECT_TRUE(std::isnan(float(BFloat16(NAN))));
  EXPECT_EQ(Half(1.0009765625f).bits, 0x3c01);   // exactly representable
  EXPECT_EQ(Half(1.00048828125f).bits, 0x3c00);  // tie rounds to even
}

TEST(Core, ViewsShareStorageAndComputeStrides) {
  Tensor x = tensor(iota(24), {2, 3, 4});
  Tensor t = x.transpose(0, 2);
  EXPECT_TRUE(t.is_same_storage(x));
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Strides{1, 4, 12}));
  EXPECT_FALSE(t.is_contiguous());
  auto tv = t.contiguous().to_vector<float>();
  EXPECT_EQ(tv[1], 12.f);  // t[0][0][1] = x[1][0][0]
  EXPECT_EQ(x.permute({1, 0, 2}).shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(x.reshape({6, -1}).shape(), (Shape{6, 4}));
  EXPECT_TRUE(x.reshape({6, 4}).is_same_storage(x));
  EXPECT_FALSE(t.reshape({24}).is_same_storage(x));  // needs a copy
  EXPECT_ERROR(t.view({24}), "[view]");
  EXPECT_EQ(x.unsqueeze(1).shape(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(x.unsqueeze(0).squeeze().shape(), x.shape());
  EXPECT_EQ(x.narrow(2, 1, 2).to_vector<float>()[0], 1.f);
  Tensor s = x.slice(2, 0, std::nullopt, 2);
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.contiguous().to_vector<float>(), (std::vector<float>{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22}));
  EXPECT_EQ(x.select(1, -1).contiguous().to_vector<float>(), (std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23}));
  Tensor f = x.flip({0, 2});
  EXPECT_TRUE(f.is_same_storage(x));
  EXPECT_EQ(f.contiguous().to_vector<float>()[0], 15.f);
  Tensor e = tensor({1.f, 2.f, 3.f}, {3, 1}).expand({3, 4});
  EXPECT_EQ(e.strides(), (Strides{1, 0}));
  EXPECT_EQ(e.contiguous().to_vector<float>()[5], 2.f);
  Tensor m = tensor(iota(9), {3, 3});
  EXPECT_EQ(m.diagonal().contiguous().to_vector<float>(), (std::vector<float>{0, 4, 8}));
  EXPECT_EQ(m.diagonal(1).contiguous().to_vector<float>(), (std::vector<float>{1, 5}));
  EXPECT_EQ(m.diagonal(-2).contiguous().to_vector<float>(), (std::vector<float>{6}));
  EXPECT_EQ(x.movedim({0}, {2}).shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(x.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(x.unflatten(2, {2, 2}).shape(), (Shape{2, 3, 2, 2}));
}

TEST(Core, ViewErrorsNameTheOp) {
  Tensor x = zeros({2, 3});
  EXPECT_ERROR(x.reshape({4, 2}), "[reshape] shape [4, 2] is invalid for input of size 6");
  EXPECT_ERROR(x.reshape({-1, -1}), "[reshape]");
  EXPECT_ERROR(x.permute({0}), "[permute]");
  EXPECT_ERROR(x.permute({0, 0}), "[permute]");
  EXPECT_ERROR(x.transpose(0, 2), "[transpose] dim 2 out of range");
  EXPECT_ERROR(x.expand({3, 3}), "[expand]");
  EXPECT_ERROR(x.narrow(1, 2, 2), "[narrow]");
  EXPECT_ERROR(x.select(0, 2), "[select]");
  EXPECT_ERROR(x.slice(0, 0, 1, 0), "[slice]");
  EXPECT_ERROR(x.diagonal(0, 1, 1), "[diagonal]");
  EXPECT_ERROR(x.as_strided({10}, {1}, 0), "[as_strided]");
  EXPECT_ERROR(Tensor().exp(), "undefined");
  EXPECT_ERROR(x.item<float>(), "[item]");
}

TEST(Core, ZeroDimAndEmpty) {
  Tensor s = scalar_tensor(3.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_FLOAT_EQ((s * 2).item<float>(), 7.f);
  EXPECT_EQ(s.item().to_double(), 3.5);
  Tensor e = zeros({0, 3});
  EXPECT_EQ((e + 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(e.exp().numel(), 0);
  EXPECT_TRUE(e.to_vector<float>().empty());
  EXPECT_EQ((e + ones({3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(s.unsqueeze(0).shape(), (Shape{1}));
  EXPECT_EQ(s.reshape({1, 1}).shape(), (Shape{1, 1}));
}

TEST(Core, CopiesAndConversions) {
  Tensor x = tensor({1.5f, -2.7f, 0.f, 300.f}, {4});
  EXPECT_EQ(x.to(i32).to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 0, 300}));
  EXPECT_EQ(x.to(u8).to_vector<uint8_t>()[0], 1);
  EXPECT_EQ(x.to(bool_).to_vector<bool>(), (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(x.to(f64).dtype(), f64);
  EXPECT_NEAR(x.to(bf16).to_vector<float>()[1], -2.7f, 0.02f);
  Tensor c = x.clone();
  EXPECT_FALSE(c.is_same_storage(x));
  Tensor y = zeros({2, 4});
  y.copy_(x);  // broadcast
  EXPECT_EQ(y.to_vector<float>()[5], -2.7f);
  Tensor z = zeros({3, 3}, {.dtype = i64});
  z.diagonal().copy_(tensor({7.9f, 8.1f, 9.f}, {3}));  // cast and write through a view
  EXPECT_EQ(z.to_vector<int64_t>(), (std::vector<int64_t>{7, 0, 0, 0, 8, 0, 0, 0, 9}));
  EXPECT_ERROR(y.copy_(zeros({3})), "[copy_]");
  // Overlapping source and destination.
  Tensor r = tensor(iota(5), {5});
  r.narrow(0, 1, 4).copy_(r.narrow(0, 0, 4));
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 0, 1, 2, 3}));
}

TEST(Core, NullDeviceTracksShapesOnly) {
  Device n = Device::null();
  Tensor a = empty({4, 1, 3}, {.device = n});
  Tensor b = zeros({5, 1}, {.device = n});
  Tensor c = (a + b).exp();
  EXPECT_EQ(c.shape(), (Shape{4, 5, 3}));
  EXPECT_EQ(c.device(), n);
  EXPECT_EQ((a < 0).dtype(), bool_);
  EXPECT_ERROR(a + zeros({2}, {.device = n}), "[add]");
  EXPECT_ERROR(c.to_vector<float>(), "null");
  EXPECT_ERROR(a + zeros({4, 1, 3}), "one device");
  EXPECT_EQ(Device::from_string("null"), n);
  EXPECT_ERROR(Device::from_string("tpu"), "[Device]");
}

TEST(Core, MemoryStatsSeeAllocationsAndReuse) {
  Device cpu = Device::cpu();
  empty_cache(cpu);
  MemoryStats before = memory_stats(cpu);
  {
    // zeros, not empty: with fusion a value gets memory when it is computed (memory_stats
    // runs queued work first), and an empty tensor that nothing writes is never computed.
    Tensor t = zeros({1 << 20});
    MemoryStats during = memory_stats(cpu);
    EXPECT_GE(during.in_use - before.in_use, 4 << 20);
    EXPECT_GE(during.peak, during.in_use);
  }
  MemoryStats after = memory_stats(cpu);
  EXPECT_EQ(after.in_use, before.in_use);
  EXPECT_GE(after.cached, 4 << 20);
  int64_t allocs = after.allocations;
  {
    Tensor t = zeros({1 << 20});  // served from the cache
    sync(cpu);
  }
  EXPECT_EQ(memory_stats(cpu).cached, after.cached);
  EXPECT_EQ(memory_stats(cpu).allocations, allocs + 1);
  empty_cache(cpu);
  EXPECT_EQ(memory_stats(cpu).cached, 0);
}

TEST(Core, InPlaceOps) {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f}, {2, 2});
  Tensor v = x.t();
  v.add_(tensor({10.f, 20.f}, {2}));  // through a transposed view
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{11, 12, 23, 24}));
  x *= 2;
  x -= 1;
  x /= tensor({1.f, 2.f}, {2});
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{21, 11.5, 45, 23.5}));
  Tensor i = tensor({1, 2}, {2});
  EXPECT_ERROR(i.add_(0.5), "can't be cast");
  EXPECT_ERROR(i.div_(2), "can't be cast");
  EXPECT_ERROR(x.add_(zeros({3})), "[add_]");
  EXPECT_ERROR(zeros({2}).add_(zeros({2, 2})), "[add_]");
  Tensor y = tensor(iota(4), {4});
  y.add_(y.flip({0}));  // overlapping operands are computed out of place first
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3, 3, 3, 3}));
  Tensor z = zeros({3});
  z.fill_(2.5).masked_fill_(tensor({true, false, true}, {3}), -1);
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{-1, 2.5, -1}));
}

TEST(Core, DefaultDeviceAndThreads) {
  EXPECT_TRUE(Device::default_device().is_cpu());
  EXPECT_GE(num_threads(), 1);
  EXPECT_ERROR(set_num_threads(0), "[set_num_threads]");
}

TEST(Core, TemporariesLendTheirBuffers) {
  Tensor a = randn_like(zeros({1000}));
  Tensor t = a.exp();
  const void* buf = t.impl().storage.get();
  Tensor r = std::move(t) + 1;  // the temporary's buffer carries the result
  EXPECT_EQ(r.impl().storage.get(), buf);
  auto expect = a.exp().to_vector<float>();
  auto got = r.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], expect[i] + 1);
  // A named tensor is never overwritten.
  Tensor named = a.exp();
  Tensor r2 = named + 1;
  EXPECT_NE(r2.impl().storage.get(), named.impl().storage.get());
  EXPECT_FLOAT_EQ(named.to_vector<float>()[0], expect[0]);
  // Chains of temporaries keep a flat peak.
  Device cpu = Device::cpu();
  Tensor big = zeros({1 << 18});
  reset_peak_memory(cpu);
  int64_t base = memory_stats(cpu).in_use;
  Tensor chain = (big.exp() + 1) * 2 + 3;
  EXPECT_LE(memory_stats(cpu).peak - base, (1 << 20) + 4096);
}

TEST(Core, TransposedCopiesMatchElementwise) {
  // contiguous() of transposed views (the tiled path) against element-by-element reads,
  // with batch dims, odd sizes and every element width.
  Tensor base = arange(3 * 37 * 53).reshape({3, 37, 53});
  for (DType t : {i16, f32, f64}) {
    Tensor x = base.to(t);
    Tensor y = x.transpose(1, 2).contiguous();
    ASSERT_TRUE(y.is_contiguous());
    auto got = y.to_vector<double>();
    auto src = base.to_vector<int64_t>();
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t i = 0; i < 53; ++i)
        for (int64_t j = 0; j < 37; ++j)
          ASSERT_EQ(got[static_cast<size_t>((b * 53 + i) * 37 + j)],
                    double(src[static_cast<size_t>((b * 37 + j) * 53 + i)]));
    Tensor z = x.permute({2, 0, 1}).contiguous();  // the other layout falls back to rows
    EXPECT_TRUE(equal(z, x.permute({2, 0, 1})));
  }
}

TEST(Core, MethodFormsMatchFreeFunctions) {
  manual_seed(3);
  Tensor x = randn({4, 5});
  Tensor y = randn({4, 5});
  Tensor idx = tensor<int64_t>({2, 0, 1}, {3});
  EXPECT_TRUE(x.add(y, 2).equal(add(x, y, 2)));
  EXPECT_TRUE(x.div(y).equal(div(x, y)));
  EXPECT_TRUE(x.gt(0).equal(gt(x, 0)));
  EXPECT_TRUE(x.where(x > 0, 0.0).equal(where(x > 0, x, 0.0)));
  EXPECT_TRUE(x.masked_fill(x < 0, 1).equal(masked_fill(x, x < 0, 1)));
  EXPECT_TRUE(x.cumsum(1).equal(cumsum(x, 1)));
  EXPECT_TRUE(x.sort(1).first.equal(sort(x, 1).first));
  EXPECT_TRUE(x.topk(2).second.equal(topk(x, 2).second));
  EXPECT_TRUE(x.index_select(0, idx).equal(index_select(x, 0, idx)));
  EXPECT_TRUE(x.gather(0, idx.unsqueeze(1).expand({3, 5})).equal(gather(x, 0, idx.unsqueeze(1).expand({3, 5}))));
  EXPECT_TRUE(x.tril().equal(tril(x)));
  EXPECT_TRUE(x.repeat({2, 1}).equal(repeat(x, {2, 1})));
  EXPECT_EQ(x.chunk(2, 1).size(), 2u);
  EXPECT_TRUE(x.roll({1}, {0}).equal(roll(x, {1}, {0})));
  EXPECT_TRUE(x.norm().equal(norm(x)));
  EXPECT_TRUE(x.logsumexp({1}).equal(logsumexp(x, {1})));
  EXPECT_TRUE(x.view_as(y.t().contiguous()).shape() == Shape({5, 4}));
  EXPECT_EQ(idx.type_as(x).dtype(), f32);
}

// Note [Scalar constants]: the 0-d tensors of Scalar operands are shared between calls, so no op
// may write into one: not a temporary's buffer reuse, not an in-place op, not autodiff.
TEST(Core, SharedScalarOperandsAreNeverWritten) {
  const Device plain = Device::cpu().without_fusion();
  for (const Device& d : {plain, plain.fusion(), plain.autodiff(), plain.fusion().autodiff()}) {
    SCOPED_TRACE(d.str());
    Tensor x = tensor(iota(6), {2, 3}, d);
    for (int round = 0; round < 3; ++round) {
      Tensor y = x * 2.5;
      y.add_(1.0).mul_(2.5);  // in place into a result of the constant 2.5
      Tensor t = x + 0.0;
      Tensor r = std::move(t) * 2.5;  // the temporary lends its buffer, never the constant
      r.sub_(2.5);
      Tensor w = where(x > 2.0, x, 7.0);
      w.fill_(2.5);
      w.add_(1.0);
      Tensor z = 2.5 - x;
      std::vector<float> vy = y.to_vector<float>(), vr = r.to_vector<float>(), vz = z.to_vector<float>();
      for (int i = 0; i < 6; ++i) {
        EXPECT_FLOAT_EQ(vy[i], (2.5f * i + 1) * 2.5f);
        EXPECT_FLOAT_EQ(vr[i], 2.5f * i - 2.5f);
        EXPECT_FLOAT_EQ(vz[i], 2.5f - i);
      }
      EXPECT_EQ(w.to_vector<float>(), std::vector<float>(6, 3.5f));
      EXPECT_EQ(where(x > 2.0, x, 7.0).to_vector<float>(), (std::vector<float>{7, 7, 7, 3, 4, 5}));
    }
    // The same bytes in another dtype are another constant.
    EXPECT_EQ((tensor({1, 2}, {2}, d) * 2).to_vector<int32_t>(), (std::vector<int32_t>{2, 4}));
    EXPECT_EQ((x * 2).to_vector<float>()[1], 2.f);
    EXPECT_EQ((x.to(f64) * 2.5).dtype(), f64);
    EXPECT_EQ((x.to(f16) * 0.1).to(f32).to_vector<float>()[1], static_cast<float>(Half(0.1f)));
    EXPECT_EQ((tensor({true, false}, {2}, d) + true).dtype(), DType::Bool);
  }
  // Gradients through a scalar operand, twice: the saved constant is unchanged.
  const Device ad = plain.fusion().autodiff();
  Tensor p = tensor({1.f, -2.f}, {2}, ad).require_grad();
  for (int i = 0; i < 2; ++i) {
    Gradients g = ((p * 3.0) * p).sum().backward();
    EXPECT_EQ(p.grad(g).to_vector<float>(), (std::vector<float>{6, -12}));
  }
  // Each thread has its own constants.
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> got(4);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      Tensor a = ones({3});
      for (int i = 0; i < 200; ++i) a = a * 1.0 + static_cast<double>(k);
      got[static_cast<size_t>(k)] = a.to_vector<float>();
    });
  for (auto& t : threads) t.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(got[static_cast<size_t>(k)], std::vector<float>(3, 1.f + 200.f * k));
}
