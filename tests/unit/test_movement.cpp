// Movement ops: views, cat/stack/split, repeats, roll, pad, meshgrid; values checked against
// naive loops over host copies written here.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "ir/op.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {

/// Host copy of a tensor with its shape, addressed by multi-index.
struct Host {
  Shape shape;
  std::vector<double> v;
  explicit Host(const Tensor& t) : shape(t.shape()), v(t.to_vector<double>()) {}
  Host(Shape s, std::vector<double> d) : shape(std::move(s)), v(std::move(d)) {}
  int64_t flat(const std::vector<int64_t>& idx) const {
    int64_t f = 0;
    for (size_t i = 0; i < idx.size(); ++i) f = f * shape[i] + idx[i];
    return f;
  }
  double at(const std::vector<int64_t>& idx) const { return v[static_cast<size_t>(flat(idx))]; }
};

/// Calls f(idx) for every multi-index of shape (row-major).
void for_each_index(const Shape& s, const std::function<void(const std::vector<int64_t>&)>& f) {
  int64_t n = shape_numel(s);
  std::vector<int64_t> idx(s.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(idx);
    for (size_t d = s.size(); d-- > 0;) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
}

/// A naive expected tensor: shape s, element = f(idx).
Host build(const Shape& s, const std::function<double(const std::vector<int64_t>&)>& f) {
  std::vector<double> v;
  for_each_index(s, [&](const std::vector<int64_t>& idx) { v.push_back(f(idx)); });
  return Host(s, v);
}

void expect_same(const Tensor& got, const Host& want) {
  ASSERT_EQ(got.shape(), want.shape);
  auto g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.v.size());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], want.v[i]) << "at flat index " << i;
}

Tensor seq(const Shape& s, DType dt = f32) { return arange(0, shape_numel(s), 1, dt).reshape(s); }

}  // namespace

// ---- views -------------------------------------------------------------------------------------
TEST(Movement, ViewsShareStorage) {
  Tensor x = seq({2, 3, 4});
  EXPECT_TRUE(reshape(x, {6, 4}).is_same_storage(x));
  EXPECT_TRUE(flatten(x, 1).is_same_storage(x));
  EXPECT_EQ(flatten(x, 1).shape(), (Shape{2, 12}));
  EXPECT_EQ(unflatten(x, 2, {2, 2}).shape(), (Shape{2, 3, 2, 2}));
  EXPECT_TRUE(permute(x, {2, 0, 1}).is_same_storage(x));
  EXPECT_TRUE(transpose(x, 0, 2).is_same_storage(x));
  EXPECT_EQ(movedim(x, {0}, {2}).shape(), (Shape{3, 4, 2}));
  EXPECT_TRUE(unsqueeze(x, 1).is_same_storage(x));
  EXPECT_EQ(squeeze(unsqueeze(x, 1)).shape(), x.shape());
  EXPECT_EQ(squeeze(unsqueeze(x, 1), {1}).shape(), x.shape());
  EXPECT_TRUE(expand(unsqueeze(x, 0), {5, 2, 3, 4}).is_same_storage(x));
  EXPECT_TRUE(broadcast_to(x, {2, 2, 3, 4}).is_same_storage(x));
  EXPECT_TRUE(flip(x, {0}).is_same_storage(x));
  EXPECT_TRUE(fliplr(x).is_same_storage(x));
  EXPECT_TRUE(flipud(x).is_same_storage(x));
  for (auto& p : split(x, 2, 2)) EXPECT_TRUE(p.is_same_storage(x));
  for (auto& p : chunk(x, 2, 1)) EXPECT_TRUE(p.is_same_storage(x));
  for (auto& p : unbind(x, 1)) EXPECT_TRUE(p.is_same_storage(x));
  Tensor a = arange(3, f32), b = arange(2, f32);
  for (auto& g : meshgrid({a, b})) EXPECT_TRUE(g.is_same_storage(a) || g.is_same_storage(b));
  // Writes through a view land in the base.
  transpose(x, 0, 2).fill_(7.f);
  for (double v : x.to_vector<double>()) EXPECT_EQ(v, 7.0);
}

TEST(Movement, PermuteValuesAndFlips) {
  Tensor x = seq({2, 3, 4});
  Host h(x);
  expect_same(permute(x, {2, 0, 1}), build({4, 2, 3}, [&](auto& i) { return h.at({i[1], i[2], i[0]}); }));
  expect_same(movedim(x, {0, 1}, {2, 0}), build({3, 4, 2}, [&](auto& i) { return h.at({i[2], i[0], i[1]}); }));
  expect_same(flip(x, {0, 2}), build({2, 3, 4}, [&](auto& i) { return h.at({1 - i[0], i[1], 3 - i[2]}); }));
  expect_same(fliplr(x), build({2, 3, 4}, [&](auto& i) { return h.at({i[0], 2 - i[1], i[2]}); }));
  expect_same(flipud(x), build({2, 3, 4}, [&](auto& i) { return h.at({1 - i[0], i[1], i[2]}); }));
  expect_error([] { fliplr(arange(3)); }, "fliplr", "[3]");
  expect_error([] { flipud(scalar_tensor(1)); }, "flipud");
}

TEST(Movement, BroadcastTensors) {
  auto r = broadcast_tensors({seq({3, 1}), seq({4}), scalar_tensor(2.f)});
  ASSERT_EQ(r.size(), 3u);
  for (auto& t : r) EXPECT_EQ(t.shape(), (Shape{3, 4}));
  expect_same(r[0], build({3, 4}, [](auto& i) { return double(i[0]); }));
  expect_same(r[1], build({3, 4}, [](auto& i) { return double(i[1]); }));
  expect_error([] { broadcast_tensors({seq({3}), seq({4})}); }, "broadcast_tensors");
}

// ---- cat and stack ------------------------------------------------------------------------------
TEST(Movement, CatAlongEachDim) {
  Tensor a = seq({2, 3, 4}), b = seq({2, 3, 4}) + 100;
  Host ha(a), hb(b);
  expect_same(cat({a, b}, 0), build({4, 3, 4}, [&](auto& i) {
                return i[0] < 2 ? ha.at({i[0], i[1], i[2]}) : hb.at({i[0] - 2, i[1], i[2]});
              }));
  expect_same(cat({a, b}, 1), build({2, 6, 4}, [&](auto& i) {
                return i[1] < 3 ? ha.at({i[0], i[1], i[2]}) : hb.at({i[0], i[1] - 3, i[2]});
              }));
  expect_same(concat({a, b, a}, -1), build({2, 3, 12}, [&](auto& i) {
                int64_t k = i[2];
                return k < 4 ? ha.at({i[0], i[1], k}) : k < 8 ? hb.at({i[0], i[1], k - 4}) : ha.at({i[0], i[1], k - 8});
              }));
  // A single input is copied, not aliased.
  Tensor c = cat({a}, 0);
  EXPECT_FALSE(c.is_same_storage(a));
  expect_same(c, ha);
}

TEST(Movement, CatNonContiguousInputs) {
  Tensor base = seq({3, 4});
  Tensor t = seq({4, 3}).t();                 // transposed
  Tensor f = base.flip({0, 1});               // negative strides
  Tensor e = seq({1, 4}).expand({3, 4});      // stride 0
  Tensor s = seq({3, 8}).slice(1, 0, {}, 2);  // stepped
  Host ht(t), hf(f), he(e), hs(s), hb(base);
  std::vector<Host*> hs_ = {&hb, &ht, &hf, &he, &hs};
  Tensor r = cat({base, t, f, e, s}, 0);
  expect_same(r, build({15, 4}, [&](auto& i) { return hs_[static_cast<size_t>(i[0] / 3)]->at({i[0] % 3, i[1]}); }));
  Tensor r1 = cat({base, t, f, e, s}, 1);
  expect_same(r1, build({3, 20}, [&](auto& i) { return hs_[static_cast<size_t>(i[1] / 4)]->at({i[0], i[1] % 4}); }));
}

TEST(Movement, CatPromotesDtypes) {
  Tensor a = tensor<int32_t>({1, 2}), b = tensor({0.5f});
  Tensor r = cat({a, b});
  EXPECT_EQ(r.dtype(), f32);
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1.f, 2.f, 0.5f}));
  EXPECT_EQ(cat({tensor<bool>({true, false}, {2}), tensor<uint8_t>({7})}).dtype(), u8);
  Tensor m = cat({tensor<int8_t>({-1}), tensor<uint8_t>({200})});
  EXPECT_EQ(m.dtype(), i16);
  EXPECT_EQ(m.to_vector<int64_t>(), (std::vector<int64_t>{-1, 200}));
  EXPECT_EQ(cat({tensor<double>({1.}), tensor({2.f})}).dtype(), f64);
}

TEST(Movement, CatEveryDtype) {
  for (DType dt : {bool_, u8, i8, i16, i32, i64, f16, bf16, f32, f64}) {
    Tensor a = remainder(seq({2, 3}, f32), 2.f).to(dt), b = remainder(seq({2, 2}, f32), 2.f).to(dt).t();
    Tensor r = cat({a, b.contiguous(), b}, 1);
    EXPECT_EQ(r.dtype(), dt);
    Host ha(a), hb(b);
    expect_same(r, build({2, 7}, [&](auto& i) {
                  int64_t k = i[1];
                  return k < 3 ? ha.at({i[0], k}) : hb.at({i[0], (k - 3) % 2});
                }));
  }
}

TEST(Movement, CatSkipsLegacyEmpty) {
  Tensor x = seq({2, 3});
  Tensor r = cat({empty({0}), x, empty({0}, {.dtype = f64})});
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(r.dtype(), f64);
  Tensor e = cat({empty({0}), empty({0})});
  EXPECT_EQ(e.shape(), (Shape{0}));
  EXPECT_EQ(cat({empty({0, 3}), x}, 0).shape(), (Shape{2, 3}));
  EXPECT_EQ(cat({empty({2, 0}), x}, 1).shape(), (Shape{2, 3}));
  EXPECT_EQ(cat({empty({0, 3}), empty({0, 3})}, 0).shape(), (Shape{0, 3}));
}

TEST(Movement, CatErrors) {
  expect_error([] { cat({}); }, "cat", "non-empty");
  expect_error([] { cat({scalar_tensor(1.f), scalar_tensor(2.f)}); }, "cat", "zero-dimensional");
  expect_error([] { cat({seq({2, 3}), seq({2, 4})}, 0); }, "cat", "[2, 4]");
  expect_error([] { cat({seq({2, 3}), seq({2})}, 0); }, "cat", "number of dimensions");
  expect_error([] { cat({seq({2, 3}), seq({2, 3})}, 2); }, "cat");
  expect_error([] { cat({seq({2}), zeros({2}, {.device = Device::null()})}); }, "cat", "device");
  expect_error([] { cat({seq({2}), Tensor()}); }, "cat", "undefined");
}

TEST(Movement, CatLargeAndManyPiecesThreads) {
  Tensor a = seq({300, 500}), b = seq({300, 700}).flip({1});
  std::vector<Tensor> many;
  for (int i = 0; i < 600; ++i) many.push_back(seq({2, 60}) + i);
  auto run = [&] { return std::pair{cat({a, b}, 1), cat(many, 1)}; };
  auto [r1, m1] = test::with_threads(1, run);
  auto [r2, m2] = test::with_threads(2, run);
  EXPECT_EQ(r1.to_vector<float>(), r2.to_vector<float>());
  EXPECT_EQ(m1.to_vector<float>(), m2.to_vector<float>());
  Host ha(a), hb(b);
  expect_same(r2, build({300, 1200}, [&](auto& i) {
                return i[1] < 500 ? ha.at({i[0], i[1]}) : hb.at({i[0], i[1] - 500});
              }));
  expect_same(m2, build({2, 36000}, [&](auto& i) { return double(i[0] * 60 + i[1] % 60 + i[1] / 60); }));
}

TEST(Movement, Stack) {
  Tensor a = seq({2, 3}), b = seq({2, 3}).t().contiguous().t() * 2;  // same values layout-wise
  Host ha(a), hb(b);
  for (int64_t d : {0, 1, 2, -1}) {
    Tensor r = stack({a, b}, d);
    int64_t w = d < 0 ? d + 3 : d;
    Shape s = {2, 3};
    s.insert(static_cast<size_t>(w), 2);
    expect_same(r, build(s, [&](auto& i) {
                  std::vector<int64_t> j = i;
                  int64_t which = j[static_cast<size_t>(w)];
                  j.erase(j.begin() + w);
                  return which == 0 ? ha.at(j) : hb.at(j);
                }));
  }
  EXPECT_EQ(stack({scalar_tensor(1.f), scalar_tensor(2.f)}).to_vector<float>(), (std::vector<float>{1.f, 2.f}));
  expect_error([] { stack({seq({2, 3}), seq({3, 2})}); }, "stack", "[3, 2]");
  expect_error([] { stack({}); }, "stack");
}

TEST(Movement, HVStack) {
  Tensor a = tensor({1.f, 2.f}), b = tensor({3.f});
  EXPECT_EQ(hstack({a, b}).to_vector<float>(), (std::vector<float>{1.f, 2.f, 3.f}));
  EXPECT_EQ(hstack({scalar_tensor(1.f), a}).shape(), (Shape{3}));
  Tensor m = seq({2, 2}), n = seq({2, 1});
  expect_same(hstack({m, n}), Host({2, 3}, {0, 1, 0, 2, 3, 1}));
  expect_same(vstack({a, tensor({5.f, 6.f})}), Host({2, 2}, {1, 2, 5, 6}));
  expect_same(vstack({m, a}), Host({3, 2}, {0, 1, 2, 3, 1, 2}));
  EXPECT_EQ(vstack({scalar_tensor(1.f), scalar_tensor(2.f)}).shape(), (Shape{2, 1}));
}

// ---- splitting ----------------------------------------------------------------------------------
TEST(Movement, SplitChunkUnbind) {
  Tensor x = seq({7, 2});
  auto p = split(x, 3);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(p[2].shape(), (Shape{1, 2}));
  EXPECT_EQ(p[2].to_vector<float>(), (std::vector<float>{12.f, 13.f}));
  auto q = split(x, std::vector<int64_t>{1, 0, 6});
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[1].shape(), (Shape{0, 2}));
  EXPECT_EQ(q[2].to_vector<float>()[0], 2.f);
  auto c = chunk(arange(5), 4);  // ceil(5/4) = 2 -> sizes 2, 2, 1
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2].to_vector<int64_t>(), (std::vector<int64_t>{4}));
  auto ce = chunk(empty({0, 3}), 3);
  ASSERT_EQ(ce.size(), 3u);
  auto se = split(empty({0}), 0);
  ASSERT_EQ(se.size(), 1u);
  auto u = unbind(x, 1);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[1].to_vector<float>(), (std::vector<float>{1.f, 3.f, 5.f, 7.f, 9.f, 11.f, 13.f}));
  expect_error([&] { split(x, 0); }, "split", "split_size");
  expect_error([&] { split(x, std::vector<int64_t>{1, 2}); }, "split", "sum");
  expect_error([] { split(scalar_tensor(1), 1); }, "split");
  expect_error([&] { chunk(x, 0); }, "chunk", "greater than 0");
  expect_error([] { unbind(scalar_tensor(1)); }, "unbind");
}

// ---- repeats ------------------------------------------------------------------------------------
TEST(Movement, Repeat) {
  Tensor x = seq({2, 3});
  Host h(x);
  expect_same(repeat(x, {2, 1, 2}), build({2, 2, 6}, [&](auto& i) { return h.at({i[1] % 2, i[2] % 3}); }));
  // Non-contiguous input, and repeats of 1 still copy.
  Tensor t = x.t();
  Host ht(t);
  Tensor r = repeat(t, {1, 1});
  EXPECT_FALSE(r.is_same_storage(x));
  expect_same(r, ht);
  expect_same(repeat(t, {2, 3}), build({6, 6}, [&](auto& i) { return ht.at({i[0] % 3, i[1] % 2}); }));
  EXPECT_EQ(repeat(x, {0, 2}).shape(), (Shape{0, 6}));
  EXPECT_EQ(repeat(scalar_tensor(3.f), {2}).to_vector<float>(), (std::vector<float>{3.f, 3.f}));
  expect_error([&] { repeat(x, {2}); }, "repeat", "[2, 3]");
  expect_error([&] { repeat(x, {-1, 2}); }, "repeat");
  // tile pads the reps with leading 1s.
  expect_same(tile(x, {2}), build({2, 6}, [&](auto& i) { return h.at({i[0], i[1] % 3}); }));
  expect_same(tile(x, {2, 1, 1}), build({2, 2, 3}, [&](auto& i) { return h.at({i[1], i[2]}); }));
}

TEST(Movement, RepeatInterleave) {
  Tensor x = seq({2, 3});
  Host h(x);
  expect_same(repeat_interleave(x, 2), build({12}, [&](auto& i) { return h.v[static_cast<size_t>(i[0] / 2)]; }));
  expect_same(repeat_interleave(x, 2, 1), build({2, 6}, [&](auto& i) { return h.at({i[0], i[1] / 2}); }));
  expect_same(repeat_interleave(x.t(), 3, 0), build({9, 2}, [&](auto& i) { return h.at({i[1], i[0] / 3}); }));
  EXPECT_EQ(repeat_interleave(x, 0, 0).shape(), (Shape{0, 3}));
  Tensor reps = tensor<int64_t>({1, 0, 2});
  expect_same(repeat_interleave(x, reps, 1), Host({2, 3}, {0, 2, 2, 3, 5, 5}));
  expect_same(repeat_interleave(tensor({7.f, 8.f}), tensor<int32_t>({2, 1})), Host({3}, {7, 7, 8}));
  expect_same(repeat_interleave(x, scalar_tensor(2), 0), build({4, 3}, [&](auto& i) {
                return h.at({i[0] / 2, i[1]});
              }));
  EXPECT_EQ(repeat_interleave(x, tensor<int64_t>({0, 0}), 0).shape(), (Shape{0, 3}));
  expect_error([&] { repeat_interleave(x, -1); }, "repeat_interleave", "negative");
  expect_error([&] { repeat_interleave(x, tensor<int64_t>({1, 2}), 1); }, "repeat_interleave", "[2]");
  expect_error([&] { repeat_interleave(x, tensor({1.f, 2.f}), 0); }, "repeat_interleave", "integer");
  expect_error([&] { repeat_interleave(x, tensor<int64_t>({1, -2}), 0); }, "repeat_interleave", "negative");
}

// ---- roll ---------------------------------------------------------------------------------------
TEST(Movement, Roll) {
  Tensor x = seq({3, 4});
  Host h(x);
  auto m = [](int64_t a, int64_t n) { return ((a % n) + n) % n; };
  expect_same(roll(x, {5}),
              build({3, 4}, [&](auto& i) { return h.v[static_cast<size_t>(m(i[0] * 4 + i[1] - 5, 12))]; }));
  expect_same(roll(x, {1}, {0}), build({3, 4}, [&](auto& i) { return h.at({m(i[0] - 1, 3), i[1]}); }));
  expect_same(roll(x, {-1, 6}, {0, 1}), build({3, 4}, [&](auto& i) { return h.at({m(i[0] + 1, 3), m(i[1] - 6, 4)}); }));
  Tensor t = x.t();
  Host ht(t);
  expect_same(roll(t, {2}, {1}), build({4, 3}, [&](auto& i) { return ht.at({i[0], m(i[1] - 2, 3)}); }));
  Tensor z = roll(x, {0}, {1});
  EXPECT_FALSE(z.is_same_storage(x));
  expect_same(z, h);
  EXPECT_EQ(roll(empty({0, 2}), {1}, {0}).shape(), (Shape{0, 2}));
  EXPECT_EQ(roll(scalar_tensor(4.f), {3}).item<float>(), 4.f);
  expect_error([&] { roll(x, {1, 2}, {0}); }, "roll", "align");
  expect_error([&] { roll(x, {1, 2}); }, "roll");
}

// ---- pad ----------------------------------------------------------------------------------------
namespace {
/// The source index for output position o of a dim of size n padded by lo in `mode` (-1: value).
int64_t naive_src(const std::string& mode, int64_t o, int64_t lo, int64_t n) {
  int64_t i = o - lo;
  if (i >= 0 && i < n) return i;
  if (mode == "constant") return -1;
  if (mode == "replicate") return std::clamp<int64_t>(i, 0, n - 1);
  if (mode == "circular") return ((i % n) + n) % n;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;  // reflect
  return i;
}

Host naive_pad(const Host& x, const Shape& pads, const std::string& mode, double value) {
  Shape s = x.shape;
  size_t r = s.size();
  std::vector<int64_t> lo(r, 0);
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    lo[r - 1 - k] = pads[2 * k];
    s[r - 1 - k] += pads[2 * k] + pads[2 * k + 1];
  }
  return build(s, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> src(r);
    for (size_t d = 0; d < r; ++d) {
      src[d] = naive_src(mode, o[d], lo[d], x.shape[d]);
      if (src[d] < 0) return value;
    }
    return x.at(src);
  });
}
}  // namespace

TEST(Movement, PadEveryModeMatchesNaive) {
  Tensor x = seq({2, 3, 4}) - 5;
  std::vector<Tensor> inputs = {x, x.transpose(1, 2).contiguous().transpose(1, 2), x.flip({2}).contiguous().flip({2})};
  for (const std::string mode : {"constant", "reflect", "replicate", "circular"}) {
    for (const Shape& pads : {Shape{1, 2}, Shape{0, 3, 2, 1}, Shape{3, 0, 1, 2, 1, 1}, Shape{}}) {
      for (auto& in : inputs) {
        Tensor r = pad(in, pads, mode, 9.5);
        expect_same(r, naive_pad(Host(in), pads, mode, 9.5));
      }
    }
  }
}

TEST(Movement, PadNonContiguousAndNegative) {
  Tensor x = seq({4, 5}).t();  // [5, 4], transposed strides
  Host h(x);
  for (const std::string mode : {"constant", "reflect", "replicate", "circular"})
    expect_same(pad(x, {2, 3, 1, 1}, mode, -1), naive_pad(h, {2, 3, 1, 1}, mode, -1));
  // Negative pads crop in constant mode.
  Tensor c = pad(x, {-1, 2, 0, -3});
  expect_same(c, build({2, 5}, [&](auto& i) { return i[1] + 1 < 4 ? h.at({i[0], i[1] + 1}) : 0.0; }));
  EXPECT_EQ(pad(x, {-4, 0}).shape(), (Shape{5, 0}));
  // Empty input, constant mode: all value.
  expect_same(pad(empty({0}), {1, 2}, "constant", 3), Host({3}, {3, 3, 3}));
  Tensor e = seq({1, 3}).expand({3, 3});
  expect_same(pad(e, {1, 1}, "reflect"), naive_pad(Host(e), {1, 1}, "reflect", 0));
}

TEST(Movement, PadDtypes) {
  for (DType dt : {bool_, u8, i8, i16, i32, i64, f16, bf16, f32, f64}) {
    Tensor x = remainder(seq({2, 3}), 2.f).to(dt);
    for (const std::string mode : {"constant", "reflect", "replicate", "circular"}) {
      Tensor r = pad(x, {1, 2, 1, 0}, mode, 1);
      EXPECT_EQ(r.dtype(), dt);
      expect_same(r, naive_pad(Host(x), {1, 2, 1, 0}, mode, 1));
    }
  }
  EXPECT_EQ(pad(tensor<int64_t>({1}), {1, 0}, "constant", 7).to_vector<int64_t>(), (std::vector<int64_t>{7, 1}));
}

TEST(Movement, PadErrors) {
  Tensor x = seq({2, 3});
  expect_error([&] { pad(x, {1}); }, "pad", "divisible by 2");
  expect_error([&] { pad(x, {1, 1, 1, 1, 1, 1}); }, "pad", "[2, 3]");
  expect_error([&] { pad(x, {3, 0}, "reflect"); }, "pad", "less than");
  expect_error([&] { pad(x, {-1, 0}, "replicate"); }, "pad", "negative");
  expect_error([&] { pad(x, {4, 0}, "circular"); }, "pad", "more than once");
  expect_error([&] { pad(x, {1, 0}, "wrap"); }, "pad", "unknown");
  expect_error([&] { pad(x, {-2, -2}); }, "pad", "negative");
  expect_error([&] { pad(empty({2, 0}), {1, 1}, "replicate"); }, "pad", "non-empty");
}

TEST(Movement, PadLargeThreads) {
  Tensor x = seq({64, 300, 7}).transpose(1, 2);  // [64, 7, 300], non-contiguous
  for (const std::string mode : {"constant", "reflect"}) {
    auto run = [&] { return pad(x, {5, 4, 2, 3}, mode, 1.5); };
    Tensor a = test::with_threads(1, run);
    Tensor b = test::with_threads(2, run);
    EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
    expect_same(b, naive_pad(Host(x), {5, 4, 2, 3}, mode, 1.5));
  }
}

// ---- meshgrid -----------------------------------------------------------------------------------
TEST(Movement, Meshgrid) {
  Tensor a = tensor({1.f, 2.f, 3.f}), b = tensor({4.f, 5.f});
  auto ij = meshgrid({a, b});
  ASSERT_EQ(ij.size(), 2u);
  expect_same(ij[0], build({3, 2}, [](auto& i) { return double(i[0] + 1); }));
  expect_same(ij[1], build({3, 2}, [](auto& i) { return double(i[1] + 4); }));
  auto xy = meshgrid({a, b}, "xy");
  expect_same(xy[0], build({2, 3}, [](auto& i) { return double(i[1] + 1); }));
  expect_same(xy[1], build({2, 3}, [](auto& i) { return double(i[0] + 4); }));
  auto three = meshgrid({a, b, scalar_tensor(7.f)}, "xy");
  EXPECT_EQ(three[2].shape(), (Shape{2, 3, 1}));
  expect_error([&] { meshgrid({a, b}, "ji"); }, "meshgrid", "indexing");
  expect_error([&] { meshgrid({seq({2, 2})}); }, "meshgrid", "[2, 2]");
  expect_error([&] { meshgrid({a, tensor<int64_t>({1})}); }, "meshgrid", "dtype");
}

// ---- null device ------------------------------------------------------------------------------
TEST(Movement, NullDeviceShapes) {
  TensorOptions o{.dtype = f32, .device = Device::null()};
  Tensor a = zeros({2, 3}, o), b = zeros({2, 5}, o);
  EXPECT_EQ(cat({a, b}, 1).shape(), (Shape{2, 8}));
  EXPECT_EQ(stack({a, a}, 1).shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(pad(a, {1, 1, 2, 2}, "replicate").shape(), (Shape{6, 5}));
  EXPECT_EQ(repeat(a, {2, 2}).shape(), (Shape{4, 6}));
  EXPECT_EQ(roll(a, {1}, {1}).shape(), (Shape{2, 3}));
  EXPECT_EQ(repeat_interleave(a, 3, 1).shape(), (Shape{2, 9}));
  EXPECT_EQ(cat({a, zeros({2, 3}, {.dtype = f64, .device = Device::null()})}).dtype(), f64);
  expect_error([&] { repeat_interleave(a, tensor<int64_t>({1, 2}, Device::null()), 0); }, "repeat_interleave", "null");
  expect_error([&] { cat({a, b}, 0); }, "cat", "[2, 5]");
}

// Inference re-checks Pad records (they may come from deserialisation, not the frontend).
TEST(Movement, PadInferRejectsOutOfRangeRecords) {
  auto make = [](std::initializer_list<int64_t> ints) {
    ir::Op op;
    op.kind = ir::OpKind::Pad;
    op.attrs.ints.assign(ints.begin(), ints.end());
    op.inputs = {ir::contiguous_desc({2, 3}, f32)};
    return op;
  };
  for (auto ints : {std::initializer_list<int64_t>{1, 3, 0}, {3, 4, 0}, {2, -1, 0}, {7, 1, 1}, {0, 1}}) {
    ir::Op op = make(ints);
    EXPECT_THROW(ir::infer(op), Error);
  }
  ir::Op ok = make({1, 2, 2, 1, 1});
  ir::infer(ok);
  EXPECT_EQ(ok.outputs[0].shape, (Shape{4, 7}));
}
