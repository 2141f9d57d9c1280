// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::vision::deform_conv2d against torchvision (tests/data/vision/deform.safetensors): the
// output and the gradients with respect to input, offset, mask, weight and bias, and
// finite differences.
#include <kiln/vision.h>

#include "gradcheck.h"
#include "test_util.h"
#include "vision/vision_test_util.h"

namespace kiln {
namespace {

using test::expect_close;
using test::expect_error;
Tensor D(const std::string& k) { return test::ref("deform", k); }
bool has(const std::string& k) { return test::vision_data("deform").find(k) != nullptr; }

struct Case {
  const char* name;
  vision::DeformConvOptions o;
};
const Case kCases[] = {
    {"a", {{1, 2}, {1, 1}, {1, 1}}}, {"b", {{2, 1}, {0, 2}, {2, 1}}}, {"c", {{1, 1}, {1, 0}, {1, 1}}}};

TEST(VisionDeform, MatchesTorchvisionInF32AndF64) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const std::string n = c.name;
    const Tensor mask = has(n + "_mask") ? D(n + "_mask") : Tensor();
    const Tensor bias = has(n + "_bias") ? D(n + "_bias") : Tensor();
    const Tensor y = vision::deform_conv2d(D(n + "_x"), D(n + "_offset"), D(n + "_weight"), bias, c.o, mask);
    expect_close(y, D(n + "_out"), 1e-4, 1e-4);
    auto f64_of = [](const Tensor& t) { return t.defined() ? t.to(f64) : t; };
    const Tensor y64 = vision::deform_conv2d(f64_of(D(n + "_x")), f64_of(D(n + "_offset")), f64_of(D(n + "_weight")),
                                             f64_of(bias), c.o, f64_of(mask));
    expect_close(y64, D(n + "_out"), 1e-10, 1e-10);
  }
}

TEST(VisionDeform, GradientsMatchTorchvision) {
  const Device ad = test::ad_device();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const std::string n = c.name;
    std::vector<std::string> names = {"x", "offset", "weight"};
    if (has(n + "_mask")) names.push_back("mask");
    if (has(n + "_bias")) names.push_back("bias");
    std::map<std::string, Tensor> in;
    for (const auto& k : names) in[k] = D(n + "_" + k).to(ad).to(f64).require_grad();
    const Tensor y =
        vision::deform_conv2d(in["x"], in["offset"], in["weight"], in.count("bias") ? in["bias"] : Tensor(), c.o,
                              in.count("mask") ? in["mask"] : Tensor());
    const Gradients g = (y * D(n + "_g").to(ad).to(f64)).sum().backward();
    for (const auto& k : names) {
      SCOPED_TRACE(k);
      expect_close(in[k].grad(g), D(n + "_grad_" + k), 1e-9, 1e-9);
    }
  }
}

TEST(VisionDeform, GradientsMatchFiniteDifferences) {
  // Offsets away from integer positions, where the bilinear weights are smooth.
  const Tensor off = test::rand_input({1, 2 * 2 * 4, 5, 2}, 0.1, 0.4, 5) * 3 - 0.6;
  const vision::DeformConvOptions o{{1, 2}, {1, 0}, {1, 2}};
  EXPECT_EQ(
      test::gradcheck(
          [&](const std::vector<Tensor>& in) { return vision::deform_conv2d(in[0], in[1], in[2], in[3], o, in[4]); },
          {test::rand_input({1, 4, 4, 5}), off, test::rand_input({2, 2, 2, 2}, -1, 1, 2),
           test::rand_input({2}, -1, 1, 3), test::rand_input({1, 2 * 4, 5, 2}, 0, 1, 4)}),
      "");
}

TEST(VisionDeform, ZeroOffsetIsConv2d) {
  const Tensor x = rand({2, 4, 6, 7}), w = rand({6, 2, 3, 3}), b = rand({6});
  const vision::DeformConvOptions o{{2, 1}, {1, 1}, {1, 2}};
  const Tensor off = zeros({2, 18, 3, 5});
  const Tensor y = vision::deform_conv2d(x, off, w, b, o);
  const Tensor ref =
      nn::functional::conv2d(x, w, b, {.stride = {2, 1}, .padding = Dims{1, 1}, .dilation = {1, 2}, .groups = 2});
  expect_close(y, ref, 1e-5, 1e-5);
}

TEST(VisionDeform, EmptyAndBadInput) {
  const Tensor w = zeros({2, 3, 3, 3});
  EXPECT_EQ(vision::deform_conv2d(zeros({0, 3, 5, 5}), zeros({0, 18, 3, 3}), w).shape(), (Shape{0, 2, 3, 3}));
  const Tensor y = vision::deform_conv2d(zeros({1, 3, 5, 5}), zeros({1, 18, 3, 3}), w, ones({2}));
  EXPECT_TRUE(equal(y, ones({1, 2, 3, 3})));
  const char* op = "vision::deform_conv2d";
  expect_error([&] { vision::deform_conv2d(zeros({1, 3, 5, 5}), zeros({1, 17, 3, 3}), w); }, op, "[1, 17, 3, 3]");
  expect_error([&] { vision::deform_conv2d(zeros({1, 3, 5, 5}), zeros({1, 18, 4, 3}), w); }, op, "[1, 18, 3, 3]");
  expect_error([&] { vision::deform_conv2d(zeros({1, 4, 5, 5}), zeros({1, 18, 3, 3}), w); }, op, "weight");
  expect_error(
      [&] {
        vision::deform_conv2d(zeros({1, 3, 5, 5}), zeros({1, 18, 3, 3}), w, zeros({3}));
      },
      op, "bias [2]");
  expect_error(
      [&] {
        vision::deform_conv2d(zeros({1, 3, 5, 5}), zeros({1, 18, 3, 3}), w, {}, {}, zeros({1, 8, 3, 3}));
      },
      op, "mask [1, 9, 3, 3]");
  expect_error([&] { vision::deform_conv2d(zeros({1, 3, 2, 2}), zeros({1, 18, 1, 1}), w); }, op, "does not fit");
  expect_error([&] { vision::deform_conv2d(zeros({1, 3, 5, 5}).to(u8), zeros({1, 18, 3, 3}), w); }, op, "dtype");
}

}  // namespace
}  // namespace kiln
