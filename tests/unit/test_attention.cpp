// SPDX-License-Identifier: MIT OR Apache-2.0
// Unit tests for scaled_dot_product_attention: the math against an explicit composite, masks,
// errors, the dropout hook, and the chunked path for long sequences (results and peak memory).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;
namespace F = kiln::nn::functional;

namespace {

Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& add_mask = {}) {
  Tensor s = matmul(q, k.mT()) / std::sqrt(static_cast<double>(q.size(-1)));
  if (add_mask.defined()) s = s + add_mask;
  return matmul(softmax(s, -1), v);
}

}  // namespace

TEST(Attention, MatchesComposite) {
  manual_seed(11);
  Tensor q = randn({2, 3, 5, 8}), k = randn({2, 3, 7, 8}), v = randn({2, 3, 7, 4});
  Tensor o = F::scaled_dot_product_attention(q, k, v);
  EXPECT_EQ(o.shape(), (Shape{2, 3, 5, 4}));
  EXPECT_TRUE(o.allclose(reference(q, k, v), 1e-5, 1e-5));
  Tensor m = randn({5, 7});
  EXPECT_TRUE(F::scaled_dot_product_attention(q, k, v, {.attn_mask = m}).allclose(reference(q, k, v, m), 1e-5, 1e-5));
}

TEST(Attention, BoolMaskAndCausal) {
  manual_seed(12);
  Tensor q = randn({4, 6, 8}), k = randn({4, 6, 8}), v = randn({4, 6, 3});
  Tensor causal = tril(ones({6, 6}, {.dtype = bool_}));
  Tensor a = F::scaled_dot_product_attention(q, k, v, {.attn_mask = causal});
  Tensor b = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
  EXPECT_TRUE(a.allclose(b, 1e-6, 1e-6));
  Tensor add = zeros({6, 6}).masked_fill(logical_not(causal), -INFINITY);
  EXPECT_TRUE(a.allclose(reference(q, k, v, add), 1e-5, 1e-5));
  // A fully masked row gives zeros, as PyTorch.
  Tensor none = zeros({6, 6}, {.dtype = bool_});
  Tensor z = F::scaled_dot_product_attention(q, k, v, {.attn_mask = none});
  EXPECT_TRUE(z.equal(zeros({4, 6, 3})));
}

TEST(Attention, GroupedQueryMatchesRepeatedHeads) {
  manual_seed(13);
  Tensor q = randn({2, 6, 5, 8}), k = randn({2, 2, 7, 8}), v = randn({2, 2, 7, 4});
  Tensor g = F::scaled_dot_product_attention(q, k, v, {.enable_gqa = true});
  Tensor r = F::scaled_dot_product_attention(q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1));
  EXPECT_TRUE(g.allclose(r, 1e-6, 1e-6));
}

TEST(Attention, DropoutHookAndScale) {
  manual_seed(14);
  Tensor q = randn({3, 4}), k = randn({5, 4}), v = randn({5, 2});
  int calls = 0;
  F::SdpaOptions o;
  o.dropout = [&](const Tensor& w) {
    ++calls;
    EXPECT_EQ(w.shape(), (Shape{3, 5}));
    return w * 0;
  };
  EXPECT_TRUE(F::scaled_dot_product_attention(q, k, v, o).equal(zeros({3, 2})));
  EXPECT_EQ(calls, 1);
  Tensor s = F::scaled_dot_product_attention(q, k, v, {.scale = 0.5});
  EXPECT_TRUE(s.allclose(matmul(softmax(matmul(q, k.t()) * 0.5, -1), v), 1e-5, 1e-5));
  Tensor d = F::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5});
  EXPECT_EQ(d.shape(), (Shape{3, 2}));
}

TEST(Attention, Errors) {
  const std::string op = "scaled_dot_product_attention";
  expect_error([] { F::scaled_dot_product_attention(ones({3, 4}), ones({5, 3}), ones({5, 2})); }, op, "embedding size");
  expect_error(
      [] {
        F::scaled_dot_product_attention(ones({3, 4}), ones({5, 4}), ones({6, 2}));
      },
      op, "sequence length");
  expect_error(
      [] {
        F::scaled_dot_product_attention(ones({3, 4}), ones({5, 4}, {.dtype = f64}), ones({5, 2}));
      },
      op, "same dtype");
  expect_error(
      [] {
        F::scaled_dot_product_attention(ones({3, 4}, {.dtype = i32}), ones({5, 4}, {.dtype = i32}),
                                        ones({5, 2}, {.dtype = i32}));
      },
      op, "floating");
  expect_error(
      [] {
        F::scaled_dot_product_attention(ones({3, 4}), ones({5, 4}), ones({5, 2}),
                                        {.attn_mask = ones({3, 5}), .is_causal = true});
      },
      op, "is_causal");
  expect_error(
      [] {
        F::scaled_dot_product_attention(ones({1, 3, 2, 4}), ones({1, 2, 5, 4}), ones({1, 2, 5, 2}),
                                        {.enable_gqa = true});
      },
      op, "divide");
  expect_error(
      [] {
        F::scaled_dot_product_attention(ones({3, 4}), ones({5, 4}), ones({5, 2}), {.attn_mask = ones({4, 5})});
      },
      op, "attn_mask");
}

TEST(Attention, LongSequenceIsChunked) {
  // L * S = 16M scores: unchunked, each [L, S] f32 temporary is 64 MiB.
  manual_seed(15);
  const int64_t L = 4096, S = 4096, E = 16;
  Tensor q = randn({L, E}), k = randn({S, E}), v = randn({S, 8});
  const Device cpu = Device::cpu();
  reset_peak_memory(cpu);
  int64_t before = memory_stats(cpu).in_use;
  Tensor o = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
  int64_t extra = memory_stats(cpu).peak - before;
  EXPECT_LT(extra, int64_t{40} << 20) << "peak extra bytes " << extra;
  EXPECT_EQ(o.shape(), (Shape{L, 8}));
  // Spot-check rows against the unchunked composite on a slice of queries.
  for (int64_t r0 : {int64_t{0}, int64_t{1500}, int64_t{4000}}) {
    Tensor qs = q.narrow(0, r0, 64);
    Tensor keep = tril(ones({64, S}, {.dtype = bool_}), r0);
    Tensor add = zeros({64, S}).masked_fill(logical_not(keep), -INFINITY);
    EXPECT_TRUE(o.narrow(0, r0, 64).allclose(reference(qs, k, v, add), 1e-4, 1e-5)) << "rows from " << r0;
  }
}

TEST(Attention, ChunkedMatchesUnchunkedWithMask) {
  // Just above the chunking threshold (4M scores) with a float mask and batch dims.
  manual_seed(16);
  Tensor q = randn({2, 1030, 8}), k = randn({2, 2048, 8}), v = randn({2, 2048, 4});
  Tensor m = randn({1030, 2048});
  Tensor o = F::scaled_dot_product_attention(q, k, v, {.attn_mask = m});
  Tensor r = reference(q, k, v, m);
  EXPECT_TRUE(o.allclose(r, 1e-4, 1e-5));
}

TEST(Attention, CausalChunksMatchTheWholeMask) {
  // Just above the causal chunking threshold (1M scores): three chunks of rows, each skipping
  // the keys after its last row; queries fewer than keys (the mask's diagonal starts top left).
  manual_seed(19);
  for (int64_t S : {int64_t{400}, int64_t{448}}) {
    Tensor q = randn({2, 4, 400, 8}), k = randn({2, 4, S, 8}), v = randn({2, 4, S, 6});
    Tensor keep = tril(ones({400, S}, {.dtype = bool_}));
    Tensor add = zeros({400, S}).masked_fill(logical_not(keep), -INFINITY);
    Tensor o = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
    EXPECT_TRUE(o.allclose(reference(q, k, v, add), 1e-4, 1e-5)) << "S = " << S;
  }
}

TEST(Attention, HalfComputesInFloat) {
  manual_seed(17);
  Tensor q = randn({2, 5, 8}), k = randn({2, 6, 8}), v = randn({2, 6, 4});
  Tensor h = F::scaled_dot_product_attention(q.to(f16), k.to(f16), v.to(f16));
  EXPECT_EQ(h.dtype(), f16);
  Tensor r = F::scaled_dot_product_attention(q.to(f16).to(f32), k.to(f16).to(f32), v.to(f16).to(f32));
  EXPECT_TRUE(h.to(f32).allclose(r, 2e-3, 2e-3));
}

TEST(Attention, SameResultWithOneAndTwoThreads) {
  manual_seed(18);
  Tensor q = randn({4, 128, 32}), k = randn({4, 128, 32}), v = randn({4, 128, 32});
  Tensor a = kiln::test::with_threads(1, [&] { return F::scaled_dot_product_attention(q, k, v, {.is_causal = true}); });
  Tensor b = kiln::test::with_threads(2, [&] { return F::scaled_dot_product_attention(q, k, v, {.is_causal = true}); });
  EXPECT_TRUE(a.equal(b));
}
