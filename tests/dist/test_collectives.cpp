// SPDX-License-Identifier: MIT OR Apache-2.0
// Collectives on every rank against the single-process result: each rank can compute every rank's
// input (rank_input below depends only on the rank, the case and the element), so the expected
// result is the same reduction, stacking or copy computed locally with Kiln's ops. Values are
// small multiples of 1/4, whose sums are exact in every dtype, so sums compare exactly whatever
// order MPI adds them in. Run on 1, 2 and 3 ranks (tests/dist/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/dist.h"
#include "kiln/ops.h"

using namespace kiln;
using dist::ReduceOp;

namespace {

dist::ProcessGroup& pg() { return dist::default_group(); }
int R() { return pg().rank(); }
int W() { return pg().size(); }

const std::vector<DType> kAllDTypes = {bool_, u8, i8, i16, i32, i64, f16, bf16, f32, f64};
const std::vector<Shape> kShapes = {{}, {0}, {1}, {7}, {3, 5}, {4, 0, 2}, {2, 3, 4}, {5000}};

/// Rank r's input of case `seed`: small integers (non-negative for u8, 0/1 for bool) plus quarters
/// for floating dtypes, exactly representable in every dtype.
Tensor rank_input(int r, int seed, const Shape& shape, DType dtype, const Device& device = Device::cpu()) {
  int64_t n = shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = (seed * 131 + r * 37 + i * 7 + (i / 3) * 5) % 15;
    double x = static_cast<double>(k - 7);
    if (dtype == u8) x = static_cast<double>(k);
    if (dtype == bool_) x = (k % 3 == 0) ? 1 : 0;
    if (is_floating(dtype)) x += 0.25 * static_cast<double>((i + r) % 4);
    v[static_cast<size_t>(i)] = x;
  }
  return tensor(v, shape, Device::cpu()).to(dtype).to(device);
}

/// Every rank's input, stacked along a new dim 0.
Tensor all_inputs(int seed, const Shape& shape, DType dtype) {
  std::vector<Tensor> xs;
  for (int r = 0; r < W(); ++r) xs.push_back(rank_input(r, seed, shape, dtype));
  return stack(xs, 0);
}

/// The reduction over dim 0 of `all` (every rank's input), computed locally.
Tensor reduce_locally(const Tensor& all, ReduceOp op) {
  DType d = all.dtype();
  if (d == bool_) return op == ReduceOp::Min ? all.all({0}) : all.any({0});
  switch (op) {
    case ReduceOp::Sum:
      return all.to(f64).sum({0}).to(d);
    case ReduceOp::Mean:
      return all.to(f64).mean({0}).to(d);
    case ReduceOp::Max:
      return all.amax({0});
    case ReduceOp::Min:
      return all.amin({0});
  }
  return {};
}

double tolerance(DType d, ReduceOp op) {
  if (op != ReduceOp::Mean) return 0;
  return d == bf16 ? 1e-2 : d == f16 ? 1e-3 : d == f32 ? 1e-6 : 1e-12;
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::abs(g[i] - w[i]), tol * std::max(1.0, std::abs(w[i])))
        << what << ": element " << i << " is " << g[i] << ", expected " << w[i];
}

std::string name(DType d, const Shape& s) { return std::string(dtype_name(d)) + " " + to_string(s); }

std::vector<ReduceOp> ops_for(DType d) {
  if (is_floating(d)) return {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min};
  return {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min};
}

}  // namespace

TEST(DistCollectives, GroupFromTheLauncher) {
  EXPECT_GE(W(), 1);
  EXPECT_GE(R(), 0);
  EXPECT_LT(R(), W());
  EXPECT_EQ(dist::rank(), R());
  EXPECT_EQ(dist::world_size(), W());
  EXPECT_TRUE(dist::is_initialized());
  EXPECT_EQ(pg().backend(), "mpi");
}

TEST(DistCollectives, AllReduceEveryDTypeOpAndShape) {
  int seed = 0;
  for (DType d : kAllDTypes)
    for (ReduceOp op : ops_for(d))
      for (const Shape& s : kShapes) {
        ++seed;
        Tensor t = rank_input(R(), seed, s, d);
        Tensor out = dist::all_reduce(t, op);
        EXPECT_TRUE(out.is_same_storage(t));
        expect_close(t, reduce_locally(all_inputs(seed, s, d), op), tolerance(d, op),
                     "all_reduce(" + std::string(to_string(op)) + ") " + name(d, s));
      }
}

TEST(DistCollectives, AllReduceWritesThroughNonContiguousViews) {
  for (DType d : {f32, i64, bf16}) {
    // A transposed view, and every other column of a matrix: the other columns stay as they were.
    Tensor base = rank_input(R(), 7, {6, 4}, d);
    Tensor before = base.clone();
    Tensor view = base.slice(1, 0, std::nullopt, 2).t();  // [2, 6], strided
    ASSERT_FALSE(view.is_contiguous());
    dist::all_reduce(view, ReduceOp::Sum);
    Tensor want = reduce_locally(all_inputs(7, {6, 4}, d), ReduceOp::Sum).slice(1, 0, std::nullopt, 2).t();
    expect_close(view, want, 0, "strided all_reduce " + std::string(dtype_name(d)));
    expect_close(base.slice(1, 1, std::nullopt, 2), before.slice(1, 1, std::nullopt, 2), 0, "untouched columns");
  }
}

TEST(DistCollectives, AllReduceOfDeviceMemoryGoesThroughTheHost) {
  // The subset device keeps its memory behind opaque handles: the collective copies it.
  Device sub = Device::from_string("subset");
  Tensor t = rank_input(R(), 3, {3, 4}, f32, sub);
  dist::all_reduce(t, ReduceOp::Max);
  EXPECT_EQ(t.device(), sub);
  expect_close(t.to(Device::cpu()), reduce_locally(all_inputs(3, {3, 4}, f32), ReduceOp::Max), 0, "subset");
}

TEST(DistCollectives, AllReduceOfAParameterBumpsItsVersion) {
  // A tensor written by a collective is new data: a graph that saved it must not use the old values.
  Device ad = Device::cpu().autodiff();
  Tensor w = rank_input(R(), 5, {4}, f32, ad).require_grad();
  Tensor y = (w * w).sum();
  dist::all_reduce(w, ReduceOp::Sum);
  EXPECT_THROW(y.backward(), Error);
}

TEST(DistCollectives, RandomFloatsAgreeBitwiseOnEveryRank) {
  // Sums of arbitrary floats depend on the order of the additions; every rank must still get the
  // same bits (data-parallel replicas stay identical only then).
  manual_seed(1000 + static_cast<uint64_t>(R()));
  Tensor t = randn({100000});
  Tensor mine = t.clone();
  dist::all_reduce(t, ReduceOp::Sum);
  std::vector<Tensor> xs;
  for (int r = 0; r < W(); ++r) {
    manual_seed(1000 + static_cast<uint64_t>(r));
    xs.push_back(randn({100000}).to(f64));
  }
  expect_close(t.to(f64), stack(xs, 0).sum({0}), 1e-5, "random f32 sum");
  Tensor all = dist::all_gather(t);
  for (int r = 0; r < W(); ++r) EXPECT_TRUE(all.select(0, r).equal(t)) << "rank " << r << " got other bits";
}

TEST(DistCollectives, BroadcastFromEveryRoot) {
  int seed = 100;
  for (int root = 0; root < W(); ++root)
    for (DType d : kAllDTypes)
      for (const Shape& s : kShapes) {
        ++seed;
        Tensor t = rank_input(R(), seed, s, d);
        dist::broadcast(t, root);
        expect_close(t, rank_input(root, seed, s, d), 0, "broadcast root " + std::to_string(root) + " " + name(d, s));
      }
  // Into a strided view.
  Tensor base = zeros({4, 6}, {.dtype = i32});
  Tensor view = base.slice(1, 1, std::nullopt, 3);  // [4, 2]
  if (R() == 0) view.copy_(rank_input(0, 9, {4, 2}, i32));
  dist::broadcast(view, 0);
  expect_close(view, rank_input(0, 9, {4, 2}, i32), 0, "strided broadcast");
  EXPECT_EQ(base.slice(1, 0, 1).abs().sum().item<int64_t>(), 0);
}

TEST(DistCollectives, AllGatherStacksTheRanks) {
  int seed = 200;
  for (DType d : kAllDTypes)
    for (const Shape& s : kShapes) {
      ++seed;
      Tensor t = rank_input(R(), seed, s, d);
      Tensor g = dist::all_gather(t);
      Shape want_shape = s;
      want_shape.insert(0, W());
      EXPECT_EQ(g.shape(), want_shape);
      expect_close(g, all_inputs(seed, s, d), 0, "all_gather " + name(d, s));
    }
  Tensor strided = rank_input(R(), 1, {5, 4}, f64).t();
  expect_close(dist::all_gather(strided), all_inputs(1, {5, 4}, f64).transpose(1, 2), 0, "strided all_gather");
}

TEST(DistCollectives, ReduceScatterGivesEachRankItsBlock) {
  int seed = 300;
  for (DType d : kAllDTypes)
    for (ReduceOp op : ops_for(d))
      for (const Shape& inner : std::vector<Shape>{{}, {3}, {2, 5}, {0}}) {
        for (int64_t per : {0, 1, 3}) {
          ++seed;
          Shape s = inner;
          s.insert(0, per * W());
          Tensor t = rank_input(R(), seed, s, d);
          Tensor out = dist::reduce_scatter(t, op);
          Tensor want = reduce_locally(all_inputs(seed, s, d), op).narrow(0, per * R(), per);
          expect_close(out, want, tolerance(d, op), "reduce_scatter(" + std::string(to_string(op)) + ") " + name(d, s));
        }
      }
}

TEST(DistCollectives, AsyncFormsOverlapAndCompleteInAnyWaitOrder) {
  std::vector<Tensor> ts;
  std::vector<dist::Work> works;
  for (int i = 0; i < 8; ++i) {
    ts.push_back(rank_input(R(), 400 + i, {1000 + i}, f32));
    works.push_back(dist::all_reduce_async(ts.back(), ReduceOp::Sum));
  }
  Tensor g = rank_input(R(), 499, {3, 2}, i16);
  dist::Work gw = dist::all_gather_async(g);
  dist::Work bw = dist::barrier_async();
  for (size_t i = works.size(); i-- > 0;) works[i].wait();
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(works[static_cast<size_t>(i)].is_completed());
    expect_close(ts[static_cast<size_t>(i)], reduce_locally(all_inputs(400 + i, {1000 + i}, f32), ReduceOp::Sum), 0,
                 "async all_reduce " + std::to_string(i));
  }
  expect_close(gw.result(), all_inputs(499, {3, 2}, i16), 0, "async all_gather");
  bw.wait();
  EXPECT_FALSE(bw.result().defined());
  works[0].wait();  // waiting again returns at once
}

TEST(DistCollectives, LargeBuffers) {
  const int64_t n = int64_t{1} << 22;  // 16 MB of f32
  Tensor t = full({n}, static_cast<double>(R() + 1), {.dtype = f32});
  dist::all_reduce(t, ReduceOp::Mean);
  const double want = (W() + 1) / 2.0;
  EXPECT_EQ(t.amin().item<double>(), want);
  EXPECT_EQ(t.amax().item<double>(), want);
}

TEST(DistCollectives, BarrierCompletes) {
  for (int i = 0; i < 3; ++i) dist::barrier();
}

// ---- errors -----------------------------------------------------------------------------------

namespace {
/// Runs f, expecting a kiln::Error whose message contains `part`.
template <class F>
void expect_error(F f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

/// After an error the group still works.
void expect_group_works() {
  Tensor t = ones({3}, {.dtype = i32});
  dist::all_reduce(t, ReduceOp::Sum);
  EXPECT_EQ(t.sum().item<int64_t>(), 3 * W());
}
}  // namespace

TEST(DistErrors, ShapesThatDifferAcrossRanks) {
  if (W() < 2) GTEST_SKIP() << "needs 2 ranks";
  Tensor t = zeros({R() == 1 ? 5 : 4, 3});
  expect_error([&] { dist::all_reduce(t, ReduceOp::Sum); }, "the ranks called different collectives");
  expect_error([&] { dist::all_gather(t); }, "rank 1: all_gather of f32 [5, 3]");
  expect_error([&] { dist::broadcast(t, 0); }, "[dist.broadcast]");
  expect_group_works();
}

TEST(DistErrors, DTypesThatDifferAcrossRanks) {
  if (W() < 2) GTEST_SKIP() << "needs 2 ranks";
  Tensor t = zeros({4}, {.dtype = R() == 0 ? f32 : f64});
  expect_error([&] { dist::all_reduce(t, ReduceOp::Sum); }, "rank 0: all_reduce(sum) of f32 [4]");
  expect_group_works();
}

TEST(DistErrors, DifferentCollectivesOrOps) {
  if (W() < 2) GTEST_SKIP() << "needs 2 ranks";
  Tensor t = zeros({4});
  expect_error(
      [&] {
        if (R() == 0)
          dist::all_reduce(t, ReduceOp::Sum);
        else
          dist::broadcast(t, 0);
      },
      "different collectives");
  expect_error([&] { dist::all_reduce(t, R() == 0 ? ReduceOp::Max : ReduceOp::Min); }, "all_reduce(max)");
  expect_error([&] { dist::broadcast(t, R() == 0 ? 0 : 1); }, "broadcast(root 1)");
  expect_group_works();
}

TEST(DistErrors, InvalidCallsFailOnEveryRank) {
  expect_error([] { dist::all_reduce(ones({3}, {.dtype = i32}), ReduceOp::Mean); }, "needs a floating-point tensor");
  expect_error([] { dist::broadcast(ones({3}), W()); }, "is not a rank of this group");
  if (W() > 1)
    expect_error([] { dist::reduce_scatter(ones({W() + 1}), ReduceOp::Sum); },
                 "must be a multiple of the group's size");
  expect_error([] { dist::reduce_scatter(scalar_tensor(1.0), ReduceOp::Sum); }, "0-d");
  expect_error([] { dist::all_reduce(Tensor(), ReduceOp::Sum); }, "undefined");
  expect_group_works();
}
