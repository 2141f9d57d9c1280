// Printing: exact strings as PyTorch prints them (dtype and device names are Kiln's).
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <limits>
#include <sstream>

using namespace kiln;

namespace {
Tensor f32v(std::initializer_list<float> v) { return tensor(v); }
}  // namespace

TEST(Print, FloatMatrix) {
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  EXPECT_EQ(a.str(), "tensor([[1., 2., 3.],\n        [4., 5., 6.]])");
  std::ostringstream os;
  os << a;
  EXPECT_EQ(os.str(), a.str());
}

TEST(Print, FixedPointCommonWidth) {
  EXPECT_EQ(f32v({1.5f, 2.25f, -3.f}).str(), "tensor([ 1.5000,  2.2500, -3.0000])");
  EXPECT_EQ(f32v({0.1f, 0.25f}).str(), "tensor([0.1000, 0.2500])");
  EXPECT_EQ(f32v({-0.f, 1.f}).str(), "tensor([-0., 1.])");
  EXPECT_EQ(f32v({0.f, 0.f}).str(), "tensor([0., 0.])");
}

TEST(Print, Scientific) {
  EXPECT_EQ(f32v({1e-5f, 1.f}).str(), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(f32v({1e10f, 1.f}).str(), "tensor([1.0000e+10, 1.0000e+00])");
  // Ratio above 1000 between the largest and smallest non-zero magnitude.
  EXPECT_EQ(f32v({2000.5f, 1.5f}).str(), "tensor([2.0005e+03, 1.5000e+00])");
}

TEST(Print, NanInf) {
  float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32v({nan, inf, -inf, 1.f}).str(), "tensor([nan, inf, -inf, 1.])");
  EXPECT_EQ(f32v({nan, 1.5f}).str(), "tensor([   nan, 1.5000])");
  EXPECT_EQ(f32v({nan}).str(), "tensor([nan])");
}

TEST(Print, IntegersAndBools) {
  EXPECT_EQ(tensor<int64_t>({1, -20, 300}).str(), "tensor([  1, -20, 300])");
  EXPECT_EQ(tensor<int32_t>({1, 2, 3}).str(), "tensor([1, 2, 3], dtype=i32)");
  EXPECT_EQ(tensor<uint8_t>({1, 255}).str(), "tensor([  1, 255], dtype=u8)");
  EXPECT_EQ(tensor<int8_t>({-1, 2}).str(), "tensor([-1,  2], dtype=i8)");
  EXPECT_EQ(tensor<int16_t>({7}).str(), "tensor([7], dtype=i16)");
  EXPECT_EQ(tensor<bool>({true, false, true}, {3}).str(), "tensor([ True, False,  True])");
}

TEST(Print, OtherFloatDtypes) {
  EXPECT_EQ(tensor<double>({1., 2.}).str(), "tensor([1., 2.], dtype=f64)");
  EXPECT_EQ(f32v({1.5f, 2.f}).to(f16).str(), "tensor([1.5000, 2.0000], dtype=f16)");
  EXPECT_EQ(f32v({1.f, -2.f}).to(bf16).str(), "tensor([ 1., -2.], dtype=bf16)");
}

TEST(Print, ZeroDim) {
  EXPECT_EQ(scalar_tensor(3.5).str(), "tensor(3.5000)");
  EXPECT_EQ(scalar_tensor(2.0).str(), "tensor(2.)");
  EXPECT_EQ(scalar_tensor(7).str(), "tensor(7)");
  EXPECT_EQ(scalar_tensor(true).str(), "tensor(True)");
  EXPECT_EQ(scalar_tensor(2.5, f64).str(), "tensor(2.5000, dtype=f64)");
  EXPECT_EQ(scalar_tensor(std::nan("")).str(), "tensor(nan)");
}

TEST(Print, Empty) {
  EXPECT_EQ(empty({0}).str(), "tensor([])");
  EXPECT_EQ(empty({0, 3}).str(), "tensor([], size=[0, 3])");
  EXPECT_EQ(empty({0}, {.dtype = i64}).str(), "tensor([], dtype=i64)");
  EXPECT_EQ(empty({2, 0}, {.dtype = bool_}).str(), "tensor([], size=[2, 0], dtype=bool)");
}

TEST(Print, LineWrapping) {
  Tensor a = arange(30, f32);
  EXPECT_EQ(a.str(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
            "        28., 29.])");
  // The dtype suffix moves to its own line when it would pass 80 columns.
  EXPECT_EQ(arange(14, f64).str(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.],\n"
            "       dtype=f64)");
}

TEST(Print, ThreeDims) {
  EXPECT_EQ(arange(8).reshape({2, 2, 2}).str(),
            "tensor([[[0, 1],\n"
            "         [2, 3]],\n"
            "\n"
            "        [[4, 5],\n"
            "         [6, 7]]])");
}

TEST(Print, NonContiguous) {
  Tensor a = arange(1, 7).reshape({2, 3});
  EXPECT_EQ(a.t().str(), "tensor([[1, 4],\n        [2, 5],\n        [3, 6]])");
  EXPECT_EQ(a.flip({1}).str(), "tensor([[3, 2, 1],\n        [6, 5, 4]])");
}

TEST(Print, Summarized) {
  EXPECT_EQ(arange(2000).str(), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  EXPECT_EQ(arange(10000).reshape({100, 100}).str(),
            "tensor([[   0,    1,    2,  ...,   97,   98,   99],\n"
            "        [ 100,  101,  102,  ...,  197,  198,  199],\n"
            "        [ 200,  201,  202,  ...,  297,  298,  299],\n"
            "        ...,\n"
            "        [9700, 9701, 9702,  ..., 9797, 9798, 9799],\n"
            "        [9800, 9801, 9802,  ..., 9897, 9898, 9899],\n"
            "        [9900, 9901, 9902,  ..., 9997, 9998, 9999]])");
  // Exactly 1000 elements are printed in full; the formatter only sees the edge items.
  EXPECT_EQ(arange(1000).str().find("..."), std::string::npos);
  Tensor f = cat({f32v({0.5f}), arange(1, 1001, 1, f32)});
  EXPECT_EQ(f.str(),
            "tensor([5.0000e-01, 1.0000e+00, 2.0000e+00,  ..., 9.9800e+02, 9.9900e+02,\n"
            "        1.0000e+03])");
}

TEST(Print, NullDevice) {
  Device n = Device::null();
  EXPECT_EQ(zeros({2, 3}, {.device = n}).str(), "tensor(..., size=[2, 3], device=null)");
  EXPECT_EQ(zeros({4}, {.dtype = i64, .device = n}).str(), "tensor(..., size=[4], device=null, dtype=i64)");
  EXPECT_EQ(zeros({}, {.device = n}).str(), "tensor(..., size=[], device=null)");
}

TEST(Print, Undefined) { EXPECT_EQ(Tensor().str(), "tensor(undefined)"); }
