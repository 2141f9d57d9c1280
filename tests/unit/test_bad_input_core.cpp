// Hostile sizes and values at the core (issue 40, part A): element and byte counts that overflow,
// views that would escape their storage, tensor() with the wrong number of values, allocations
// that cannot succeed and out-of-range DType values. Each must raise a kiln::Error whose text
// starts with the op's "[name]" (Note [Checked sizes] in src/core/checked.h), on the fused CPU,
// the plain CPU and the null device, and leave the process and the allocator usable.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "ir/op.h"
#include "kiln/onnx.h"
#include "kiln/store.h"
#include "onnx/onnx_builder.h"
#include "test_util.h"

using namespace kiln;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

/// The devices every case runs on: fused CPU, plain CPU and the null device (shapes only).
std::vector<Device> devices() { return {Device::cpu(), Device::cpu().without_fusion(), Device::null()}; }

/// The devices that hold data (the null device allocates nothing, so it never runs out).
std::vector<Device> data_devices() { return {Device::cpu(), Device::cpu().without_fusion()}; }

/// Runs f; expects a kiln::Error whose message starts with "[op] " and contains `part`.
template <class F>
void expect_prefixed(F&& f, const std::string& op, const std::string& part = "") {
  std::string msg;
  try {
    f();
  } catch (const Error& e) {
    msg = e.what();
  }
  ASSERT_FALSE(msg.empty()) << "expected a kiln::Error from [" << op << "]";
  EXPECT_EQ(msg.rfind("[" + op + "] ", 0), 0u) << "message: " << msg;
  if (!part.empty()) EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg;
}

#define EXPECT_BAD(stmt, op, ...) expect_prefixed([&] { (void)(stmt); }, op, ##__VA_ARGS__)

TensorOptions on(const Device& d, DType t = f32) { return {.dtype = t, .device = d}; }

}  // namespace

// ---- 1. element and byte counts -------------------------------------------------------------

TEST(BadInputCore, ZerosOfTwoToThe62Elements) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    // 2^62 f32 elements are 2^64 bytes: the byte count overflows int64.
    EXPECT_BAD(zeros({int64_t{1} << 62}, on(d)), "zeros", "bytes");
    EXPECT_BAD(empty({int64_t{1} << 62}, on(d, f64)), "empty", "bytes");
    EXPECT_BAD(ones({int64_t{1} << 61}, on(d, f64)), "ones");
    EXPECT_BAD(full({kMax}, 1.5, on(d, i16)), "full");
  }
}

TEST(BadInputCore, ElementCountOverflow) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    EXPECT_BAD(zeros({int64_t{1} << 40, int64_t{1} << 40}, on(d)), "zeros", "more elements than fit in int64");
    EXPECT_BAD(empty({int64_t{1} << 32, int64_t{1} << 32, 0}, on(d)), "empty", "more elements");
    EXPECT_BAD(zeros({kMax, 2}, on(d, u8)), "zeros");
    EXPECT_BAD(ones({3, 3, 3, kMax / 4}, on(d, bool_)), "ones");
    EXPECT_BAD(empty({-1, 4}, on(d)), "empty", "negative");
    EXPECT_BAD(zeros({4, kMin}, on(d)), "zeros", "negative");
  }
}

TEST(BadInputCore, LargestRepresentableShapesStillWorkOnTheNullDevice) {
  Device n = Device::null();
  Tensor a = zeros({int64_t{1} << 40, int64_t{1} << 20}, on(n, u8));
  EXPECT_EQ(a.numel(), int64_t{1} << 60);
  Tensor b = empty({0, int64_t{1} << 62}, on(n));  // no elements, representable strides
  EXPECT_EQ(b.numel(), 0);
  EXPECT_EQ(b.strides(), (Strides{int64_t{1} << 62, 1}));
  EXPECT_EQ(shape_numel({0, kMax}), 0);
  EXPECT_BAD(shape_numel({kMax, 2}), "numel");
  EXPECT_BAD(contiguous_strides({kMax, 2}), "contiguous_strides", "more elements than fit in int64");
}

TEST(BadInputCore, ReshapeOfEmptyToAnOverflowingShape) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    Tensor e = zeros({0}, on(d));
    EXPECT_BAD(e.reshape({int64_t{1} << 32, int64_t{1} << 32}), "reshape", "more elements than fit in int64");
    EXPECT_BAD(e.view({int64_t{1} << 32, int64_t{1} << 32}), "view");
    EXPECT_BAD(e.reshape({int64_t{1} << 32, int64_t{1} << 32, 0}), "reshape");
    EXPECT_BAD(e.reshape({kMax, kMax, -1}), "reshape");
    EXPECT_BAD(reshape(e, {int64_t{1} << 62, 8}), "reshape");
    EXPECT_EQ(e.reshape({0, int64_t{1} << 40}).shape(), (Shape{0, int64_t{1} << 40}));
    Tensor x = zeros({4}, on(d));
    EXPECT_BAD(x.reshape({kMax, kMax}), "reshape");
    EXPECT_BAD(x.unflatten(0, {kMax, kMax}), "unflatten");
  }
}

TEST(BadInputCore, RepeatAndTileToHugeShapes) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    Tensor x = ones({4}, on(d));
    EXPECT_BAD(x.repeat({int64_t{1} << 62}), "repeat");
    EXPECT_BAD(repeat(x, {int64_t{1} << 32, int64_t{1} << 32}), "repeat");
    EXPECT_BAD(tile(x, {int64_t{1} << 62}), "tile");
    EXPECT_BAD(tile(x, {kMax, 1}), "tile");
    EXPECT_BAD(x.repeat({-1}), "repeat");
    EXPECT_EQ(x.repeat({2, 0}).shape(), (Shape{2, 0}));
  }
}

TEST(BadInputCore, EyeArangeLinspaceOfHugeSizes) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    EXPECT_BAD(eye(int64_t{1} << 32, std::nullopt, on(d)), "eye");
    EXPECT_BAD(eye(int64_t{1} << 31, int64_t{1} << 31, on(d)), "eye");
    EXPECT_BAD(eye(kMax, 2, on(d)), "eye");
    EXPECT_BAD(arange(0, kMax, 1, i64, d), "arange");
    EXPECT_BAD(arange(kMin, kMax, 1, i64, d), "arange");
    EXPECT_BAD(arange(kMax, kMin, -1, i64, d), "arange");
    EXPECT_BAD(arange(0.0, 1e300, 1.0, f32, d), "arange");
    EXPECT_BAD(arange(0.0, 1e300, 1e-300, f64, d), "arange");
    EXPECT_BAD(linspace(0, 1, int64_t{1} << 62, on(d)), "linspace");
    EXPECT_BAD(linspace(0, 1, kMax, on(d)), "linspace");
    EXPECT_BAD(logspace(0, 1, kMax, 10.0, on(d)), "logspace");
  }
}

TEST(BadInputCore, ExpandOfHugeShapes) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    Tensor one = ones({1}, on(d));
    Tensor big = one.expand({int64_t{1} << 62});  // a view of stride 0 is fine
    EXPECT_EQ(big.numel(), int64_t{1} << 62);
    EXPECT_BAD(big.contiguous(), "contiguous", "bytes");
    EXPECT_BAD(big.clone(), "clone");
    EXPECT_BAD(one.expand({int64_t{1} << 40, int64_t{1} << 40}), "expand", "more elements");
    EXPECT_BAD(one.expand({kMax, kMax, 1}), "expand");
    EXPECT_BAD(broadcast_to(one, {int64_t{1} << 32, int64_t{1} << 32}), "broadcast_to");
  }
}

TEST(BadInputCore, ArangeWithExtremeButValidBoundsWorks) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    EXPECT_EQ(arange(kMin, kMax, kMax, i64, d).shape(), (Shape{3}));
    EXPECT_EQ(arange(kMax, kMin, kMin + 1, i64, d).shape(), (Shape{3}));
    EXPECT_EQ(arange(kMax - 1, kMax, 1, i64, d).shape(), (Shape{1}));
  }
}

TEST(BadInputCore, RandomCreationOfHugeSizes) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    EXPECT_BAD(randn({int64_t{1} << 40, int64_t{1} << 40}, on(d)), "randn", "more elements");
    EXPECT_BAD(randn({int64_t{1} << 62}, on(d)), "randn", "bytes");
    EXPECT_BAD(rand({kMax, 2}, on(d)), "rand");
    EXPECT_BAD(normal({kMax, 2}, 0, 1, on(d)), "normal");
    EXPECT_BAD(uniform({kMax, kMax}, 0, 1, on(d)), "uniform");
    EXPECT_BAD(randint(0, 5, {int64_t{1} << 62}, on(d, i64)), "randint");
    EXPECT_BAD(bernoulli({int64_t{1} << 32, int64_t{1} << 32}, 0.5, on(d)), "bernoulli");
    EXPECT_BAD(randperm(int64_t{1} << 62, d), "randperm");
    EXPECT_BAD(randperm(kMax, d), "randperm");
  }
  Device plain = Device::cpu().without_fusion();
  EXPECT_BAD(rand({int64_t{1} << 45}, on(plain)), "rand", "out of memory");
  EXPECT_BAD(randperm(int64_t{1} << 45, plain), "randperm", "out of memory");
  EXPECT_EQ(randperm(int64_t{1} << 45, Device::null()).numel(), int64_t{1} << 45);  // shapes only
}

// ---- 2. views inside their storage --------------------------------------------------------

TEST(BadInputCore, NarrowPastTheEndOverflows) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    Tensor x = zeros({1000}, on(d));
    EXPECT_BAD(x.narrow(0, kMax - 5, 10), "narrow");
    EXPECT_BAD(x.narrow(0, 995, kMax), "narrow");
    EXPECT_BAD(x.narrow(0, -5, kMax), "narrow");
    EXPECT_BAD(x.narrow(0, kMin, 1), "narrow");
    EXPECT_BAD(narrow(x, 0, 1000, 1), "narrow");
    EXPECT_EQ(x.narrow(0, 1000, 0).numel(), 0);
    EXPECT_EQ(x.narrow(0, 990, 10).storage_offset(), 990);
  }
}

TEST(BadInputCore, NarrowPastTheEndCannotWrite) {
  Tensor x = zeros({1000}, on(Device::cpu().without_fusion()));
  EXPECT_BAD(x.narrow(0, kMax - 5, 10).fill_(7), "narrow");
  EXPECT_EQ(x.sum().item<double>(), 0.0);
}

TEST(BadInputCore, AsStridedMustStayInsideItsStorage) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    Tensor x = zeros({1000}, on(d));
    EXPECT_BAD(x.as_strided({3}, {int64_t{1} << 62}, 0), "as_strided", "outside its storage");
    EXPECT_BAD(x.as_strided({2}, {kMax}, 0), "as_strided");
    EXPECT_BAD(x.as_strided({3}, {kMax / 2 + 1}, 0), "as_strided");
    EXPECT_BAD(x.as_strided({2, 2}, {kMax, kMax}, 1), "as_strided");
    EXPECT_BAD(x.as_strided({1}, {1}, 1000), "as_strided");
    EXPECT_BAD(x.as_strided({1}, {1}, -1), "as_strided");
    EXPECT_BAD(x.as_strided({1}, {1}, kMax), "as_strided");
    EXPECT_BAD(x.as_strided({3}, {-1}, 1), "as_strided");  // reaches element -1
    EXPECT_BAD(x.as_strided({2}, {kMin}, 0), "as_strided");
    EXPECT_BAD(x.as_strided({2}, {kMin}, kMax), "as_strided");
    EXPECT_BAD(x.as_strided({1001}, {1}, 0), "as_strided");
    EXPECT_BAD(x.as_strided({10, 10, 11}, {100, 10, 1}, 0), "as_strided");
    EXPECT_BAD(x.as_strided({-1}, {1}, 0), "as_strided");
    EXPECT_BAD(x.as_strided({2}, {1, 1}, 0), "as_strided");
    // In bounds: negative strides from a high offset, stride 0, empty views anywhere >= 0.
    EXPECT_EQ(x.as_strided({3}, {-1}, 2).numel(), 3);
    EXPECT_EQ(x.as_strided({1000}, {1}, 0).numel(), 1000);
    EXPECT_EQ(x.as_strided({5, 7}, {0, 1}, 993).numel(), 35);
    EXPECT_EQ(x.as_strided({0, 3}, {kMax, 1}, 5000).numel(), 0);
    EXPECT_EQ(x.as_strided({1}, {kMax}, 999).numel(), 1);
  }
}

TEST(BadInputCore, ViewsOfViewsStayInside) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    Tensor x = zeros({10, 10}, on(d));
    Tensor v = x.narrow(0, 5, 5);
    EXPECT_BAD(v.as_strided({6, 10}, {10, 1}, v.storage_offset()), "as_strided");
    EXPECT_EQ(v.as_strided({5, 10}, {10, 1}, v.storage_offset()).numel(), 50);
    EXPECT_BAD(v.narrow(0, kMax, 1), "narrow");
    EXPECT_BAD(x.select(0, kMax), "select");
    EXPECT_BAD(x.select(1, kMin), "select");
    Tensor f = x.flip({0, 1});
    EXPECT_EQ(f.storage_offset(), 99);
    EXPECT_BAD(f.as_strided({11}, {-10}, 99), "as_strided");
    EXPECT_EQ(f.as_strided({10}, {-10}, 99).numel(), 10);
  }
}

TEST(BadInputCore, DiagonalWithAHugeOffsetIsEmpty) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    Tensor x = zeros({4, 5}, on(d));
    EXPECT_EQ(x.diagonal(kMax).numel(), 0);
    EXPECT_EQ(x.diagonal(kMin).numel(), 0);
    EXPECT_EQ(x.diagonal(-3).numel(), 1);
  }
}

TEST(BadInputCore, SliceWithHugeStepsAndBounds) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    Tensor x = zeros({10, 3}, on(d));
    Tensor s = x.slice(0, 0, std::nullopt, kMax);
    EXPECT_EQ(s.shape(), (Shape{1, 3}));
    EXPECT_EQ(x.slice(0, kMin, kMax, 3).shape(), (Shape{4, 3}));
    EXPECT_EQ(x.slice(0, kMax, kMin).shape(), (Shape{0, 3}));
    EXPECT_EQ(x.slice(1, 1, std::nullopt, kMax / 2).shape(), (Shape{10, 1}));
    EXPECT_BAD(x.slice(0, 0, 10, 0), "slice");
    EXPECT_BAD(x.slice(0, 0, 10, kMin), "slice");
  }
}

TEST(BadInputCore, UnsqueezeAndPermuteOfHugeStrideViews) {
  Tensor x = zeros({1000}, on(Device::null()));
  Tensor v = x.as_strided({1, 2}, {kMax, 1}, 0);  // one row: the huge stride is never used
  EXPECT_EQ(v.unsqueeze(2).shape(), (Shape{1, 2, 1}));
  EXPECT_EQ(v.t().shape(), (Shape{2, 1}));
  EXPECT_BAD(v.unsqueeze(0).as_strided({2, 2}, {kMax, 1}, 0), "as_strided");
}

// ---- shape inference of other ops ---------------------------------------------------------

TEST(BadInputCore, CatAndPadSizesThatOverflow) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    // Views of stride 0 make huge inputs cheap: the result's size must not wrap to a small one.
    Tensor a = ones({1}, on(d)).expand({kMax});
    Tensor seven = ones({7}, on(d));
    EXPECT_BAD(cat({a, a, seven}), "cat", "overflow");
    EXPECT_BAD(cat({a, seven}), "cat");
    EXPECT_NE(test::error_of([&] { (void)stack({a, a}); }), "");  // named by cat, which stack runs
    Tensor x = ones({3}, on(d));
    EXPECT_BAD(pad(x, {kMax, kMax}), "pad");
    EXPECT_BAD(pad(x, {kMax, 1}), "pad");
    EXPECT_BAD(pad(x, {kMin, kMin}), "pad");
    EXPECT_EQ(pad(x, {-1, -2}).shape(), (Shape{0}));
  }
}

TEST(BadInputCore, ConvAndPoolGeometryThatOverflows) {
  namespace F = nn::functional;
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    Tensor x = ones({1, 1, 4, 4}, on(d)), w = ones({1, 1, 3, 3}, on(d));
    EXPECT_BAD(F::conv2d(x, w, {}, {.padding = kMax / 2 + 1}), "conv2d");
    EXPECT_BAD(F::conv2d(x, w, {}, {.dilation = kMax}), "conv2d");
    EXPECT_BAD(F::conv2d(x, ones({1, 1, 1, 1}, on(d)).expand({1, 1, kMax, 1}), {}, {.dilation = 2}), "conv2d");
    EXPECT_BAD(F::conv_transpose2d(x, w, {}, {.stride = kMax}), "conv_transpose2d");
    EXPECT_BAD(F::conv_transpose2d(x, w, {}, {.dilation = kMax}), "conv_transpose2d");
    EXPECT_BAD(F::avg_pool2d(x, {kMax, 2}, {.padding = kMax / 2}), "avg_pool2d");
    EXPECT_BAD(F::max_pool2d(x, {2, 2}, {.dilation = kMax}), "max_pool2d");
    EXPECT_EQ(F::conv2d(x, w, {}, {.padding = 1}).shape(), (Shape{1, 1, 4, 4}));
    // unfold: a window of size 1 or a single block position never steps its huge dilation / stride.
    EXPECT_EQ(F::unfold(x, {1, 1}, {kMax, kMax}).shape(), (Shape{1, 1, 16}));
    EXPECT_EQ(F::unfold(x, {4, 4}, 1, 0, {kMax, kMax}).shape(), (Shape{1, 16, 1}));
    EXPECT_BAD(F::unfold(x, {2, 2}, {kMax, 1}), "unfold");
    EXPECT_BAD(F::unfold(x, {2, 2}, 1, kMax / 2 + 1), "unfold");
  }
}

TEST(BadInputCore, DeserialisedOpsWithHostileDescriptors) {
  using namespace kiln::ir;
  auto record = [](TensorDesc d) {
    Op op;
    op.kind = OpKind::Neg;
    op.inputs = {d};
    op.outputs = {contiguous_desc({1}, DType::F32)};
    return serialize(op);
  };
  auto check = [](const std::vector<uint8_t>& b) { (void)deserialize(b.data(), b.size()); };
  TensorDesc d = contiguous_desc({4}, DType::F32);
  EXPECT_NO_THROW(check(record(d)));
  d.shape = {kMax, 2};
  d.strides = {2, 1};
  EXPECT_BAD(check(record(d)), "ir::deserialize", "more elements");
  d.shape = {int64_t{1} << 62};
  d.strides = {1};
  EXPECT_BAD(check(record(d)), "ir::deserialize", "bytes");
  d.shape = {-3};
  EXPECT_BAD(check(record(d)), "ir::deserialize", "negative");
  d.shape = {3};
  d.strides = {kMax};
  EXPECT_BAD(check(record(d)), "ir::deserialize", "overflow");
  d.strides = {1};
  d.offset = kMax - 1;
  EXPECT_BAD(check(record(d)), "ir::deserialize", "overflow");
}

// ---- ONNX shape computations ----------------------------------------------------------------

namespace {
/// A model y = op(x, s) with x a graph input of shape x_dims and s an i64 initializer.
std::string onnx_shape_model(const std::string& op, const std::vector<int64_t>& x_dims, const std::vector<int64_t>& s) {
  using namespace kiln::onnx::test;
  Msg g;
  g.msg(1, node(op, {"x", "s"}, {"y"}, "hostile")).bytes(2, "g");
  g.msg(5, tensor_i64("s", {static_cast<int64_t>(s.size())}, s));
  g.msg(11, value_info("x", x_dims)).msg(12, value_info("y", {}));
  return model(g);
}

/// Loads the model and runs it on x: the kiln::Error message, or "" when it succeeds.
std::string onnx_error(const std::string& bytes, const Tensor& x) {
  return test::error_of([&] {
    auto m = onnx::Model::from_bytes(bytes, x.device());
    auto y = m.run({x});
    (void)y.at(0).numel();
  });
}
}  // namespace

TEST(BadInputCore, OnnxShapeOpsWithHostileShapes) {
  for (const Device& d : data_devices()) {
    SCOPED_TRACE(d.str());
    const int64_t b32 = int64_t{1} << 32, b40 = int64_t{1} << 40, b62 = int64_t{1} << 62;
    struct Case {
      int64_t x_size;
      std::vector<int64_t> s;
      const char* op;
    };
    for (const Case& c : {Case{1, {b40, b40}, "Expand"}, Case{1, {kMax, 2}, "Expand"}, Case{4, {b62}, "Tile"},
                          Case{4, {kMax}, "Tile"}, Case{0, {b32, b32}, "Reshape"}, Case{4, {kMax, kMax}, "Reshape"}}) {
      SCOPED_TRACE(c.op);
      std::string msg = onnx_error(onnx_shape_model(c.op, {c.x_size}, c.s), ones({c.x_size}, on(d)));
      EXPECT_EQ(msg.rfind("[", 0), 0u) << msg;
      EXPECT_TRUE(msg.find("int64") != std::string::npos || msg.find("INT64") != std::string::npos) << msg;
    }
  }
}

TEST(BadInputCore, OnnxConstantOfShapeAndRangeWithHostileSizes) {
  using namespace kiln::onnx::test;
  for (const Device& d : data_devices()) {
    SCOPED_TRACE(d.str());
    for (std::vector<int64_t> shape : {std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40},
                                       std::vector<int64_t>{int64_t{1} << 62}, std::vector<int64_t>{kMax, kMax}}) {
      Msg g;
      g.msg(1, node("ConstantOfShape", {"s"}, {"c"}, "cos")).msg(1, node("Add", {"c", "x"}, {"y"}, "add"));
      g.bytes(2, "g").msg(5, tensor_i64("s", {static_cast<int64_t>(shape.size())}, shape));
      g.msg(11, value_info("x", {1})).msg(12, value_info("y", {}));
      std::string msg = onnx_error(model(g), ones({1}, on(d)));
      EXPECT_EQ(msg.rfind("[", 0), 0u) << msg;
      EXPECT_TRUE(msg.find("int64") != std::string::npos || msg.find("INT64") != std::string::npos) << msg;
    }
    for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, kMax}, {kMin, kMax}, {kMax, kMin}}) {
      Msg g;
      g.msg(1, node("Range", {"lo", "hi", "delta"}, {"r"}, "range")).msg(1, node("Add", {"r", "x"}, {"y"}, "add"));
      g.bytes(2, "g").msg(5, tensor_i64("lo", {}, {lo})).msg(5, tensor_i64("hi", {}, {hi}));
      g.msg(5, tensor_i64("delta", {}, {lo < hi ? 1 : -1}));
      g.msg(11, value_info("x", {1}, 7)).msg(12, value_info("y", {}));
      std::string msg = onnx_error(model(g), ones({1}, on(d, i64)));
      EXPECT_EQ(msg.rfind("[", 0), 0u) << msg;
      EXPECT_TRUE(msg.find("int64") != std::string::npos || msg.find("INT64") != std::string::npos) << msg;
    }
  }
}

TEST(BadInputCore, ReshapeOfAViewWithAHugeStride) {
  // On the null device a storage of INT64_MAX bytes is only a size: a two-element view may use a
  // stride near INT64_MAX, and viewing it with a leading 1 would need a stride past int64.
  Tensor x = zeros({kMax}, on(Device::null(), u8));
  Tensor v = x.as_strided({2}, {kMax - 1}, 0);
  EXPECT_BAD(v.view({1, 2}), "view");
  Tensor r = v.reshape({1, 2});  // copies instead
  EXPECT_EQ(r.shape(), (Shape{1, 2}));
  EXPECT_FALSE(r.is_same_storage(x));
  EXPECT_EQ(v.reshape({2, 1}).strides(), (Strides{kMax - 1, kMax - 1}));
}

// ---- 3. tensor(values, shape) --------------------------------------------------------------

TEST(BadInputCore, TensorValuesMustMatchTheShape) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    EXPECT_BAD(tensor(std::vector<float>{1, 2, 3}, {4096, 4096}, d), "tensor", "3 values");
    EXPECT_BAD(tensor(std::vector<float>{1, 2, 3}, {2, 2}, d), "tensor", "[2, 2]");
    EXPECT_BAD(tensor(std::vector<float>{1, 2, 3, 4, 5}, {2, 2}, d), "tensor");
    EXPECT_BAD(tensor(std::vector<int64_t>{}, {1}, d), "tensor");
    EXPECT_BAD(tensor({1.f, 2.f}, {3}, d), "tensor");
    EXPECT_BAD(tensor({1, 2, 3}, Shape{}, d), "tensor");
    EXPECT_BAD(tensor(std::vector<bool>{true, false}, {3}, d), "tensor");
    EXPECT_BAD(tensor({true}, {2}, d), "tensor");
    EXPECT_BAD(tensor(std::vector<float>{1}, {int64_t{1} << 62, 4}, d), "tensor");
    EXPECT_BAD(tensor(std::vector<float>{1}, {-1}, d), "tensor", "negative");
    EXPECT_BAD(from_blob_copy(nullptr, 1, {2}, f32, d), "tensor");
    EXPECT_EQ(tensor(std::vector<float>{}, {0, 5}, d).shape(), (Shape{0, 5}));
    EXPECT_EQ(tensor({7.f}, Shape{}, d).shape(), Shape{});
    EXPECT_EQ(tensor(std::vector<double>{1, 2, 3, 4}, {2, 2}, d).numel(), 4);
  }
  EXPECT_EQ(tensor({1.f, 2.f, 3.f, 4.f}, {2, 2}).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

// ---- 4. out of memory ----------------------------------------------------------------------
// Sizes are chosen to fail at allocation (2^47 bytes and more exceed the address space of
// x86-64 user space and any machine's memory), so nothing is ever touched.

TEST(BadInputCore, EmptyTooLargeForMemoryOnThePlainCpu) {
  Device d = Device::cpu().without_fusion();
  const MemoryStats before = memory_stats(d);
  EXPECT_BAD(empty({int64_t{1} << 45}, on(d)), "empty", "out of memory");
  EXPECT_BAD(empty({int64_t{1} << 45}, on(d)), "empty", "memory_stats");
  EXPECT_BAD(zeros({int64_t{1} << 50}, on(d, u8)), "zeros", "1125899906842624 bytes");
  EXPECT_BAD(ones({int64_t{1} << 59}, on(d, f64)), "ones", "out of memory");
  EXPECT_BAD(ones({int64_t{1} << 60}, on(d, f64)), "ones", "INT64_MAX bytes");
  EXPECT_EQ(memory_stats(d).in_use, before.in_use);
  // The allocator still serves ordinary requests afterwards.
  Tensor ok = ones({1000}, on(d));
  EXPECT_EQ(ok.sum().item<double>(), 1000.0);
}

TEST(BadInputCore, ZerosTooLargeForMemoryOnTheFusedCpu) {
  Device d = Device::cpu();
  // The fused CPU may allocate lazily: the error surfaces at creation or at the sync point.
  std::string msg = test::error_of([&] {
    Tensor t = zeros({int64_t{1} << 45}, on(d));
    sync(d);
    (void)t.narrow(0, 0, 1).item<float>();
  });
  EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("140737488355328 bytes"), std::string::npos) << msg;
  EXPECT_TRUE(msg.rfind("[zeros] ", 0) == 0 || msg.rfind("[sync] ", 0) == 0) << msg;
  EXPECT_EQ(ones({4}, on(d)).sum().item<float>(), 4.f);
}

TEST(BadInputCore, CastToAWiderDtypeTooLargeForMemory) {
  for (const Device& d : data_devices()) {
    SCOPED_TRACE(d.str());
    Tensor x = ones({1}, on(d, u8)).expand({int64_t{1} << 45});
    std::string msg = test::error_of([&] {
      Tensor y = x.to(f64);
      sync(d);
      (void)y.narrow(0, 0, 1).item<double>();
    });
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind("[", 0), 0u) << msg;
  }
  // The plain CPU allocates at the call: the error names the op the user called.
  Tensor x = ones({1}, on(Device::cpu().without_fusion(), u8)).expand({int64_t{1} << 45});
  EXPECT_BAD(x.contiguous(), "contiguous", "out of memory");
  EXPECT_BAD(x.to(f64), "cast", "out of memory");
  // On the null device nothing is allocated, so a huge cast is only a shape.
  Tensor n = ones({1}, on(Device::null(), u8)).expand({int64_t{1} << 45}).to(f64);
  EXPECT_EQ(n.dtype(), f64);
}

TEST(BadInputCore, SavingATensorTooLargeForMemory) {
  const std::string path = ::testing::TempDir() + "kiln_bad_input_core_huge.safetensors";
  for (const Device& d : data_devices()) {
    SCOPED_TRACE(d.str());
    Tensor huge = ones({1}, on(d, u8)).expand({int64_t{1} << 47});  // 128 TiB once contiguous
    EXPECT_BAD(store::save_safetensors(path, {{"w", huge}}), "safetensors", "out of memory");
    EXPECT_FALSE(std::ifstream(path).good()) << "a failed save left " << path;
  }
  // Byte counts past int64 in the file's layout: refused before anything is written.
  Tensor big = ones({1}, on(Device::null(), f64)).expand({int64_t{1} << 59});
  EXPECT_BAD(store::save_safetensors(path, {{"a", big}, {"b", big}}), "safetensors", "overflow");
  EXPECT_FALSE(std::ifstream(path).good());
}

// ---- 6. out-of-range DType values ----------------------------------------------------------

TEST(BadInputCore, OutOfRangeDtypesInCreation) {
  const DType bad = static_cast<DType>(200);
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    EXPECT_BAD(zeros({2}, on(d, bad)), "zeros", "invalid dtype value 200");
    EXPECT_BAD(empty({2}, on(d, bad)), "empty", "invalid dtype");
    EXPECT_BAD(ones({}, on(d, static_cast<DType>(kNumDTypes))), "ones",
               "invalid dtype value " + std::to_string(kNumDTypes));
    EXPECT_BAD(full({3}, 1.0, on(d, static_cast<DType>(255))), "full", "255");
    EXPECT_BAD(eye(3, std::nullopt, on(d, bad)), "eye");
    EXPECT_BAD(arange(0, 5, 1, static_cast<DType>(42), d), "arange");
    EXPECT_BAD(linspace(0, 1, 5, on(d, bad)), "linspace");
    EXPECT_BAD(scalar_tensor(1.0, static_cast<DType>(99), d), "scalar_tensor");
    EXPECT_BAD(from_blob_copy("abcd", {4}, static_cast<DType>(77), d), "tensor");
  }
}

TEST(BadInputCore, OutOfRangeDtypesInCasts) {
  for (const Device& d : devices()) {
    SCOPED_TRACE(d.str());
    Tensor x = ones({2, 3}, on(d));
    EXPECT_BAD(x.to(static_cast<DType>(42)), "to", "invalid dtype value 42");
    EXPECT_BAD(cast(x, static_cast<DType>(42)), "cast", "42");
    EXPECT_BAD(x.to(d, static_cast<DType>(77)), "to", "77");
    EXPECT_BAD(x.to(Device::null(), static_cast<DType>(77)), "to");
    EXPECT_BAD(x.copy_(ones({2, 3}, on(d, static_cast<DType>(77)))), "ones");
    EXPECT_EQ(x.to(f64).dtype(), f64);  // still fine afterwards
  }
}

TEST(BadInputCore, DtypeTablesAreSafeForAnyValue) {
  for (int v = kNumDTypes; v < 256; v += 7) {
    const DType t = static_cast<DType>(v);
    EXPECT_FALSE(is_valid_dtype(t));
    EXPECT_EQ(dtype_name(t), "dtype(" + std::to_string(v) + ")");
    EXPECT_EQ(to_string(t), "dtype(" + std::to_string(v) + ")");
    EXPECT_BAD(dtype_size(t), "dtype_size", "invalid dtype value " + std::to_string(v));
    EXPECT_BAD(promote_types(t, f32), "promote_types");
    EXPECT_BAD(promote_types(f32, t), "promote_types");
    EXPECT_BAD(check_dtype(t, "my_op"), "my_op");
  }
  EXPECT_EQ(dtype_name(static_cast<DType>(255)), "dtype(255)");
  for (int v = 0; v < kNumDTypes; ++v) {
    EXPECT_TRUE(is_valid_dtype(static_cast<DType>(v)));
    EXPECT_NO_THROW(check_dtype(static_cast<DType>(v), "my_op"));
  }
  static_assert(dtype_size(f64) == 8 && dtype_size(bool_) == 1);  // still usable in constant expressions
}

TEST(BadInputCore, HostCopiesTooLargeForTheHost) {
  // An expanded view of one element can name more elements than any host can hold: the copy to
  // the host is refused before anything is allocated, naming to_vector.
  for (const Device& dev : {Device::cpu(), Device::cpu().without_fusion()}) {
    Tensor huge = ones({1}, {.device = dev}).expand({int64_t{1} << 61});
    test::expect_error([&] { (void)huge.to_vector<float>(); }, "to_vector", "too many bytes");
    test::expect_error([&] { (void)huge.to_vector<bool>(); }, "to_vector", "too many bytes");
  }
}

TEST(BadInputCore, CompositesNameTheOpTheUserCalled) {
  // Errors raised by the ops a composite calls name the composite.
  for (const Device& dev : {Device::cpu(), Device::cpu().without_fusion(), Device::null()}) {
    const TensorOptions o{.device = dev};
    test::expect_error([&] { broadcast_to(ones({3}, o), {4}); }, "broadcast_to");
    test::expect_error([&] { repeat_interleave(ones({2}, o), int64_t{1} << 62); }, "repeat_interleave");
    Tensor big = ones({1}, o).expand({int64_t{1} << 62});
    test::expect_error([&] { stack({big, big}); }, "stack");
    test::expect_error([&] { logspace(0, 1, -1, 10.0, o); }, "logspace");
  }
  test::expect_error([] { zeros_like(Tensor()); }, "zeros_like");
  test::expect_error([] { full_like(Tensor(), 1); }, "full_like");
}
