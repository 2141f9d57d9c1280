// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::vision's training transforms: the colour adjustments against torchvision
// (tests/data/vision/geometry.safetensors), and the contracts of the random transforms: the same
// (seed, epoch, index) gives the same output, draws stay in their ranges, mixup and cutmix
// labels sum to 1, and the transforms work inside kiln::data's loader.
#include <kiln/vision.h>

#include <set>

#include "test_util.h"
#include "vision/vision_test_util.h"
#if KILN_VISION_TESTS_WITH_DATA
#include <kiln/data/image.h>
#include <kiln/data/loader.h>
#endif

namespace kiln {
namespace {

using data::ItemKey;
using test::expect_close;
using test::expect_error;
Tensor G(const std::string& k) { return test::ref("geometry", k); }

TEST(VisionColorAdjust, MatchesTorchvision) {
  const Tensor xf = G("x").narrow(0, 0, 1), xu = G("xu");
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
  };
  const Case cases[] = {{"bright", [](const Tensor& x) { return vision::adjust_brightness(x, 1.3); }},
                        {"contrast", [](const Tensor& x) { return vision::adjust_contrast(x, 0.6); }},
                        {"sat", [](const Tensor& x) { return vision::adjust_saturation(x, 1.7); }},
                        {"hue", [](const Tensor& x) { return vision::adjust_hue(x, 0.2); }},
                        {"hue_neg", [](const Tensor& x) { return vision::adjust_hue(x, -0.35); }}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    expect_close(c.f(xf), G(std::string(c.name) + "_f"), 1e-5, 1e-5);
    // u8 truncates like torchvision; a float rounding difference may cross an integer.
    const Tensor yu = c.f(xu);
    EXPECT_EQ(yu.dtype(), u8);
    expect_close(yu, G(std::string(c.name) + "_u8"), 1.0, 0);
    // [C, H, W] works as one image.
    expect_close(c.f(xf.squeeze({0})), G(std::string(c.name) + "_f").squeeze({0}), 1e-5, 1e-5);
  }
  const Tensor gray = rand({2, 1, 4, 5});
  EXPECT_TRUE(equal(vision::adjust_saturation(gray, 0.3), gray));
  EXPECT_TRUE(equal(vision::adjust_hue(gray, 0.3), gray));
  expect_error([] { vision::adjust_hue(zeros({3, 4, 4}), 0.7); }, "vision::adjust_hue", "0.7");
  expect_error([] { vision::adjust_brightness(zeros({2, 4, 4}), 1); }, "vision::adjust_brightness", "[2, 4, 4]");
  expect_error([] { vision::adjust_contrast(zeros({3, 4, 4}), -1); }, "vision::adjust_contrast", "-1");
}

TEST(VisionRandomResizedCrop, DrawsInRangeAndDeterministic) {
  const vision::RandomResizedCrop t{.size = {8, 10}, .scale = {0.2, 0.6}, .ratio = {0.5, 2.0}, .seed = 11};
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>> boxes;
  for (uint64_t i = 0; i < 200; ++i) {
    const vision::CropBox b = t.params(41, 37, {i, 3});
    ASSERT_TRUE(b.top >= 0 && b.left >= 0 && b.top + b.height <= 41 && b.left + b.width <= 37);
    // Sides are rounded: the area and the ratio hold up to that rounding.
    const double area = static_cast<double>(b.height * b.width) / (41.0 * 37.0);
    EXPECT_GE(area, 0.2 * 0.8) << i;
    EXPECT_LE(area, 0.6 * 1.2) << i;
    const double ratio = static_cast<double>(b.width) / static_cast<double>(b.height);
    EXPECT_GE(ratio, 0.5 * 0.85) << i;
    EXPECT_LE(ratio, 2.0 / 0.85) << i;
    boxes.insert({b.top, b.left, b.height, b.width});
  }
  EXPECT_GT(boxes.size(), 150u);  // indices draw differently
  const Tensor img = rand({3, 41, 37});
  const Tensor a = t(img, {5, 1}), b = t(img, {5, 1});
  EXPECT_EQ(a.shape(), (Shape{3, 8, 10}));
  EXPECT_TRUE(equal(a, b));
  EXPECT_FALSE(equal(a, t(img, {5, 2})));  // another epoch
  // The output is the resized window.
  const vision::CropBox w = t.params(41, 37, {5, 1});
  expect_close(
      a, vision::resize(img.unsqueeze(0).narrow(2, w.top, w.height).narrow(3, w.left, w.width), {8, 10}).squeeze({0}));
  // u8 stays u8; a batch takes one window; the fallback is the central crop within the ratio.
  EXPECT_EQ(t(zeros({1, 20, 20}).to(u8), {0, 0}).dtype(), u8);
  EXPECT_EQ(t(zeros({2, 3, 20, 20}), {0, 0}).shape(), (Shape{2, 3, 8, 10}));
  const vision::RandomResizedCrop strip{.size = {4, 4}, .scale = {0.9, 1.0}, .ratio = {1.0, 1.0}};
  const vision::CropBox c = strip.params(3, 50, {1, 0});
  EXPECT_EQ(c.height, 3);
  EXPECT_EQ(c.width, 3);
  EXPECT_EQ(c.left, 23);
  expect_error([&] { t(zeros({4, 4}), {0, 0}); }, "vision::RandomResizedCrop", "[4, 4]");
  expect_error(
      [] {
        vision::RandomResizedCrop{.size = {4, 4}, .scale = {0.5, 0.1}}.params(8, 8, {});
      },
      "vision::RandomResizedCrop", "scale");
}

TEST(VisionColorJitter, DrawsInRangeAndApplies) {
  const vision::ColorJitter j{.brightness = 0.4, .contrast = 0.3, .saturation = 1.5, .hue = 0.1, .seed = 4};
  std::set<std::array<int, 4>> orders;
  for (uint64_t i = 0; i < 300; ++i) {
    const auto p = j.params({i, 0});
    std::array<int, 4> sorted = p.order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::array<int, 4>{0, 1, 2, 3}));
    orders.insert(p.order);
    EXPECT_TRUE(p.factor[0] >= 0.6 && p.factor[0] <= 1.4);
    EXPECT_TRUE(p.factor[1] >= 0.7 && p.factor[1] <= 1.3);
    EXPECT_TRUE(p.factor[2] >= 0.0 && p.factor[2] <= 2.5);
    EXPECT_TRUE(p.factor[3] >= -0.1 && p.factor[3] <= 0.1);
  }
  EXPECT_EQ(orders.size(), 24u);  // every order appears
  const Tensor img = rand({3, 9, 11});
  EXPECT_TRUE(equal(j(img, {7, 2}), j(img, {7, 2})));
  const vision::ColorJitter only{.brightness = 0.5, .seed = 9};
  expect_close(only(img, {3, 1}), vision::adjust_brightness(img, only.params({3, 1}).factor[0]));
  EXPECT_TRUE(equal(vision::ColorJitter{}(img, {0, 0}), img));
  const Tensor black = zeros({3, 5, 5}).to(u8);
  EXPECT_TRUE(equal(j(black, {1, 1}), black));
  expect_error([] { vision::ColorJitter{.hue = 0.6}.params({}); }, "vision::ColorJitter", "0.6");
}

TEST(VisionRandomAffine, DrawsInRangeAndApplies) {
  const vision::RandomAffine t{.degrees = 30,
                               .translate = {0.1, 0.2},
                               .scale = {0.8, 1.2},
                               .shear_x = {-5, 5},
                               .interpolation = "bilinear",
                               .seed = 3};
  for (uint64_t i = 0; i < 100; ++i) {
    const auto p = t.params(20, 30, {i, 0});
    EXPECT_TRUE(p.angle >= -30 && p.angle <= 30);
    EXPECT_TRUE(std::abs(p.translate[0]) <= 3 && std::abs(p.translate[1]) <= 4);
    EXPECT_EQ(p.translate[0], std::round(p.translate[0]));
    EXPECT_TRUE(p.scale >= 0.8 && p.scale <= 1.2);
    EXPECT_TRUE(p.shear[0] >= -5 && p.shear[0] <= 5 && p.shear[1] == 0);
  }
  const Tensor img = rand({3, 20, 30});
  const auto p = t.params(20, 30, {4, 4});
  expect_close(t(img, {4, 4}),
               vision::affine(img.unsqueeze(0), p.angle, p.translate, p.scale, p.shear, {.interpolation = "bilinear"})
                   .squeeze({0}));
  EXPECT_TRUE(equal(t(img, {4, 4}), t(img, {4, 4})));
  EXPECT_TRUE(equal(vision::RandomAffine{}(img, {1, 1}), img));  // the identity draw
  expect_error([] { vision::RandomAffine{.translate = {2, 0}}.params(4, 4, {}); }, "vision::RandomAffine", "translate");
}

TEST(VisionCutout, ClearsOneSquare) {
  const vision::Cutout t{.size = 6, .fill = 0.5, .seed = 2};
  const Tensor img = rand({2, 15, 13});
  for (uint64_t i = 0; i < 20; ++i) {
    const vision::CropBox b = t.params(15, 13, {i, 0});
    EXPECT_TRUE(b.height >= 3 && b.height <= 6 && b.width >= 3 && b.width <= 6);  // clipped at most in half
    const Tensor y = t(img, {i, 0});
    const Tensor changed = ne(y, img).any({0});
    EXPECT_LE(changed.sum().item<int64_t>(), b.height * b.width);
    const Tensor box = y.narrow(1, b.top, b.height).narrow(2, b.left, b.width);
    EXPECT_TRUE(equal(box, full(box.shape(), 0.5)));
    EXPECT_TRUE(equal(y, t(img, {i, 0})));
  }
  EXPECT_TRUE(equal(vision::Cutout{.size = 4, .p = 0.0}(img, {1, 1}), img));
  const Tensor zero = zeros({1, 7, 7}).to(u8);
  EXPECT_TRUE(equal(vision::Cutout{.size = 3}(zero, {0, 0}), zero));
  EXPECT_EQ(vision::Cutout{}(zeros({3, 0, 4}), {0, 0}).shape(), (Shape{3, 0, 4}));
}

TEST(VisionMixUp, LabelsSumToOneAndLambdaIsBeta) {
  const vision::MixUp m{.alpha = 0.4, .num_classes = 5, .seed = 8};
  const Tensor x = rand({6, 3, 4, 4});
  const Tensor labels = tensor<int64_t>({0, 4, 2, 2, 1, 3}, {6});
  const vision::Mixed r = m(x, labels, {2, 1});
  const double lam = m.lambda({2, 1});
  expect_close(r.labels.sum({1}), ones({6}), 1e-6);
  expect_close(r.images, x * lam + x.roll({1}, {0}) * (1 - lam), 1e-6);
  const Tensor onehot = one_hot(labels, 5).to(f32);
  expect_close(r.labels, onehot * lam + onehot.roll({1}, {0}) * (1 - lam), 1e-6);
  EXPECT_TRUE(equal(r.images, m(x, labels, {2, 1}).images));
  // Beta(0.4, 0.4): mean 1/2, variance 1/(4 (2 alpha + 1)) = 0.1389.
  double s = 0, s2 = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    const double l = m.lambda({static_cast<uint64_t>(i), 7});
    ASSERT_TRUE(l >= 0 && l <= 1);
    s += l, s2 += l * l;
  }
  const double mean = s / n, var = s2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.02);
  EXPECT_NEAR(var, 0.1389, 0.01);
  const char* op = "vision::MixUp";
  expect_error([&] { m(x, tensor<int64_t>({0, 5, 1, 1, 1, 1}, {6}), {}); }, op, "[0, 5)");
  expect_error([&] { m(x, zeros({5}, {.dtype = i64}), {}); }, op, "[6]");
  expect_error([&] { m(x.to(u8), labels, {}); }, op, "float");
  expect_error([&] { vision::MixUp{.alpha = 0, .num_classes = 5}(x, labels, {}); }, op, "alpha");
}

TEST(VisionCutMix, PastesABoxAndMixesLabelsByArea) {
  const vision::CutMix m{.alpha = 1.0, .num_classes = 3, .seed = 5};
  const Tensor x = rand({4, 2, 12, 10});
  const Tensor soft = softmax(rand({4, 3}), 1);
  int boxes = 0;
  for (uint64_t i = 0; i < 30; ++i) {
    const vision::CropBox b = m.params(12, 10, {i, 0});
    const vision::Mixed r = m(x, soft, {i, 0});
    expect_close(r.labels.sum({1}), ones({4}), 1e-6);
    const double lam = 1.0 - static_cast<double>(b.height * b.width) / 120.0;
    expect_close(r.labels, soft * lam + soft.roll({1}, {0}) * (1 - lam), 1e-6);
    const Tensor pasted = r.images.narrow(2, b.top, b.height).narrow(3, b.left, b.width);
    EXPECT_TRUE(equal(pasted, x.roll({1}, {0}).narrow(2, b.top, b.height).narrow(3, b.left, b.width)));
    EXPECT_EQ(ne(r.images, x).sum().item<int64_t>() <= 4 * 2 * b.height * b.width, true);
    boxes += b.height * b.width > 0;
  }
  EXPECT_GT(boxes, 20);
}

#if KILN_VISION_TESTS_WITH_DATA
/// A small dataset of u8 images labelled by index.
data::DatasetPtr<data::ImageItem> tiny_images(int n) {
  std::vector<data::ImageItem> items;
  for (int i = 0; i < n; ++i) items.push_back({(rand({3, 14, 12}) * 255).to(u8), i % 4});
  return data::in_memory(std::move(items));
}

TEST(VisionTransformsInLoader, SameDrawsWhateverTheWorkers) {
  auto ds = tiny_images(10);
  auto aug = data::map_image(ds, vision::RandomResizedCrop{.size = {8, 8}, .seed = 1});
  aug = data::map_image(aug, vision::ColorJitter{.brightness = 0.3, .hue = 0.05, .seed = 2});
  aug = data::map_image(aug, vision::Cutout{.size = 3, .seed = 3});
  auto run = [&](size_t workers) {
    data::DataLoader<data::ImageItem> loader(aug, {.batch_size = 4, .seed = 5, .workers = workers});
    vision::MixBatches mixed(loader, vision::CutMix{.num_classes = 4, .seed = 6});
    std::vector<Tensor> out;
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      mixed.start_epoch(epoch);
      while (auto b = mixed.next()) {
        EXPECT_EQ(b->input.size(2), 8);
        expect_close(b->target.sum({1}), ones({b->target.size(0)}), 1e-6);
        out.push_back(b->input);
        out.push_back(b->target);
      }
    }
    return out;
  };
  const auto a = run(0), b = run(2);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), 12u);  // 3 batches x 2 epochs
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(equal(a[i], b[i])) << i;
  EXPECT_FALSE(equal(a[0], a[6]));  // epochs draw differently
}
#endif

}  // namespace
}  // namespace kiln
