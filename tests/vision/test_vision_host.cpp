// SPDX-License-Identifier: MIT OR Apache-2.0
// The host fast paths of kiln::vision (CPU f32/u8 without a gradient: src/vision/image_host.cpp,
// image_components.cpp) against a second implementation: the tensor-op paths, which an input
// that requires grad takes, a u8 <-> f32 round trip for order-based ops, and a flood fill for
// connected components. Odd sizes, images smaller than the kernel, non-contiguous inputs.
#include <kiln/vision.h>

#include <random>

#include "gradcheck.h"
#include "test_util.h"
#include "vision/vision_test_util.h"

namespace kiln {
namespace {

using test::expect_close;

/// A random image [shape] of integers 0..255 as f32 on the autodiff CPU (host path unless it
/// requires grad), and the same as u8.
Tensor rand_image(const Shape& s, uint64_t seed) { return test::rand_input(s, 0, 256, seed).floor().to(f32); }

/// f run on the tensor-op path (x requires grad) and on the host path (x does not).
template <class F>
void expect_paths_agree(const Tensor& x, F f, double tol) {
  const Tensor host = f(x.detach());
  const Tensor ops = f(x.detach().require_grad()).detach();
  expect_close(host, ops, tol, tol);
}

const std::vector<Shape> kShapes = {{2, 3, 13, 17}, {1, 1, 1, 1}, {1, 2, 2, 3}, {1, 1, 40, 70}};

TEST(VisionHost, MorphologyMatchesTensorOps) {
  std::mt19937 g(3);
  std::vector<uint8_t> custom(4 * 6);
  for (auto& c : custom) c = g() % 2;
  const std::vector<Tensor> elements = {vision::structuring_element("rect", {3, 3}),
                                        vision::structuring_element("ellipse", {5, 5}),
                                        vision::structuring_element("cross", {3, 5}),
                                        vision::structuring_element("rect", {11, 13}),  // long runs
                                        tensor(custom, {4, 6}).to(u8),
                                        ones({1, 1})};
  uint64_t seed = 1;
  for (const Shape& s : kShapes)
    for (const Tensor& e : elements) {
      SCOPED_TRACE(to_string(s) + " element " + to_string(e.shape()));
      const Tensor x = rand_image(s, seed++);
      for (int64_t it : {1, 2}) {
        expect_paths_agree(
            x, [&](const Tensor& v) { return vision::erode(v, e, it); }, 0);
        expect_paths_agree(
            x, [&](const Tensor& v) { return vision::dilate(v, e, it); }, 0);
      }
      // u8 gives the f32 result exactly (min and max commute with the conversion), saturated:
      // an element without its anchor can make a top-hat negative.
      const Tensor x8 = x.detach().to(u8);
      for (const char* op : {"erode", "dilate", "open", "close", "gradient", "tophat", "blackhat"})
        expect_close(vision::morphology(x8, op, e), clamp(vision::morphology(x.detach(), op, e), 0, 255), 0);
    }
}

TEST(VisionHost, FiltersMatchTensorOps) {
  uint64_t seed = 20;
  for (const Shape& s : kShapes) {
    if (s[2] < 4 || s[3] < 4) continue;  // the tensor path's reflect padding needs pad < size
    SCOPED_TRACE(to_string(s));
    const Tensor x = rand_image(s, seed++) / 255.0;
    expect_paths_agree(
        x,
        [](const Tensor& v) {
          return vision::gaussian_blur(v, {5, 3}, 1.2);
        },
        1e-5);
    expect_paths_agree(
        x,
        [](const Tensor& v) {
          return vision::gaussian_blur(v, {3, 7}, 0, 2.0);
        },
        1e-5);
    expect_paths_agree(
        x,
        [](const Tensor& v) {
          return vision::box_filter(v, {3, 5});
        },
        1e-5);
    expect_paths_agree(
        x,
        [](const Tensor& v) {
          return vision::box_filter(v, {3, 3}, false);
        },
        1e-5);
    for (auto [dx, dy, k] : std::vector<std::array<int, 3>>{{1, 0, 3}, {0, 1, 1}, {1, 1, 5}, {2, 0, 1}, {0, 2, 7}})
      expect_paths_agree(
          x, [&](const Tensor& v) { return vision::sobel(v, dx, dy, k, 0.5, 2); }, 1e-4);
    for (int k : {1, 3, 5})
      expect_paths_agree(
          x, [&](const Tensor& v) { return vision::laplacian(v, k, 2, -1); }, 1e-4);
    // u8 in: the same filter of the same values, rounded half to even (f32 out for Sobel).
    const Tensor x8 = round(x.detach() * 255.0).to(u8);
    const Tensor xf = x8.to(f32);
    expect_close(vision::gaussian_blur(x8, {5, 5}, 0), round(vision::gaussian_blur(xf, {5, 5}, 0)), 0);
    expect_close(vision::sobel(x8, 1, 0, 3), vision::sobel(xf, 1, 0, 3), 1e-4);
  }
  // Images smaller than the kernel reflect more than once: still defined, and constant stays constant.
  const Tensor tiny = full({1, 1, 2, 1}, 0.25f);
  expect_close(vision::gaussian_blur(tiny, {7, 7}, 0), tiny, 1e-6);
  expect_close(vision::box_filter(full({1, 1, 1, 1}, 3.0f), {5, 5}), full({1, 1, 1, 1}, 3.0f), 1e-6);
}

TEST(VisionHost, MedianMatchesTensorOps) {
  uint64_t seed = 40;
  for (const Shape& s : kShapes)
    for (int k : {3, 5, 7, 9, 15}) {
      SCOPED_TRACE(to_string(s) + " k " + std::to_string(k));
      const Tensor x = rand_image(s, seed++);
      if (k <= 7)  // the tensor-op median of 81 or 225 views is slow; u8 against f32 covers those
        expect_paths_agree(
            x, [&](const Tensor& v) { return vision::median_blur(v, k); }, 0);
      expect_close(vision::median_blur(x.detach().to(u8), k), vision::median_blur(x.detach(), k), 0);
    }
}

TEST(VisionHost, ColourAndLayouts) {
  const Tensor rgb = rand_image({2, 3, 5, 7}, 60);
  expect_paths_agree(
      rgb / 255.0, [](const Tensor& v) { return vision::rgb_to_gray(v); }, 1e-6);
  const Tensor rgb8 = rgb.detach().to(u8), i = rgb8.to(i32);
  const Tensor want = ((i.narrow(1, 0, 1) * 4899 + i.narrow(1, 1, 1) * 9617 + i.narrow(1, 2, 1) * 1868 + 8192) >> 14);
  expect_close(vision::rgb_to_gray(rgb8), want, 0);
  // A non-contiguous view gives the result of its contiguous copy.
  const Tensor x = rand_image({1, 2, 9, 6}, 61).detach();
  const Tensor t = x.transpose(2, 3);
  const Tensor e = vision::structuring_element("ellipse", {3, 5});
  expect_close(vision::dilate(t, e), vision::dilate(t.contiguous(), e), 0);
  expect_close(vision::gaussian_blur(t, {3, 5}, 0), vision::gaussian_blur(t.contiguous(), {3, 5}, 0), 0);
  expect_close(vision::median_blur(t.to(u8), 5), vision::median_blur(t.contiguous().to(u8), 5), 0);
  EXPECT_EQ(vision::erode(zeros({0, 1, 4, 4}), e).shape(), (Shape{0, 1, 4, 4}));
  EXPECT_EQ(vision::median_blur(zeros({1, 1, 0, 4}, {.dtype = u8}), 3).shape(), (Shape{1, 1, 0, 4}));
}

TEST(VisionHost, RowRangesOnThreadsGiveOnePassResults) {
  // 600 rows of 256: two row ranges on two threads, split inside the plane.
  const Tensor x = rand_image({1, 1, 600, 256}, 70).detach(), x8 = x.to(u8);
  const Tensor ell = vision::structuring_element("ellipse", {5, 5}), rect = vision::structuring_element("rect", {3, 3});
  auto run = [&] {
    return std::vector<Tensor>{
        vision::erode(x, ell),   vision::dilate(x8, rect, 2), vision::gaussian_blur(x, {5, 5}, 0),
        vision::laplacian(x, 3), vision::median_blur(x8, 5),  vision::median_blur(x8, 9)};
  };
  const int saved = num_threads();
  set_num_threads(1);
  const std::vector<Tensor> one = run();
  set_num_threads(2);
  const std::vector<Tensor> two = run();
  set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i) expect_close(two[i], one[i], 0);
  expect_paths_agree(
      x, [&](const Tensor& v) { return vision::erode(v, ell); }, 0);
}

/// Connected components by flood fill, labels in the raster order of first pixels.
std::vector<int32_t> flood_labels(const std::vector<uint8_t>& fg, int64_t h, int64_t w, int conn) {
  std::vector<int32_t> lab(fg.size(), 0);
  int32_t next = 1;
  for (int64_t s = 0; s < h * w; ++s) {
    if (!fg[size_t(s)] || lab[size_t(s)]) continue;
    std::vector<int64_t> stack{s};
    lab[size_t(s)] = next;
    while (!stack.empty()) {
      const int64_t p = stack.back(), y = p / w, x = p % w;
      stack.pop_back();
      for (int64_t dy = -1; dy <= 1; ++dy)
        for (int64_t dx = -1; dx <= 1; ++dx) {
          const int64_t ny = y + dy, nx = x + dx;
          if ((dy == 0 && dx == 0) || (conn == 4 && dy != 0 && dx != 0)) continue;
          if (ny < 0 || ny >= h || nx < 0 || nx >= w || !fg[size_t(ny * w + nx)] || lab[size_t(ny * w + nx)]) continue;
          lab[size_t(ny * w + nx)] = next;
          stack.push_back(ny * w + nx);
        }
    }
    ++next;
  }
  return lab;
}

TEST(VisionHost, ComponentsMatchFloodFill) {
  std::mt19937 g(7);
  for (auto [h, w, density] : std::vector<std::array<int, 3>>{{37, 53, 50}, {64, 64, 60}, {1, 40, 50}, {30, 1, 70}}) {
    std::vector<uint8_t> fg(size_t(h * w));
    for (auto& v : fg) v = int(g() % 100) < density;
    const Tensor x = tensor(fg, {h, w}).to(u8);
    for (int conn : {4, 8}) {
      SCOPED_TRACE(std::to_string(h) + "x" + std::to_string(w) + " conn " + std::to_string(conn));
      const std::vector<int32_t> want = flood_labels(fg, h, w, conn);
      const vision::Components c = vision::connected_components(x, conn);
      EXPECT_EQ(c.labels.to_vector<int32_t>(), want);
      EXPECT_EQ(c.count, *std::max_element(want.begin(), want.end()) + 1);
      // Areas agree with the labels, and the f32 image labels as its u8 mask.
      const std::vector<int32_t> st = c.stats.to_vector<int32_t>();
      std::vector<int32_t> area(size_t(c.count), 0);
      for (int32_t l : want) ++area[size_t(l)];
      for (int64_t l = 0; l < c.count; ++l) EXPECT_EQ(st[size_t(l * 5 + 4)], area[size_t(l)]);
      expect_close(vision::connected_components(x.to(f32) * 0.5, conn).labels, c.labels, 0);
    }
  }
}

}  // namespace
}  // namespace kiln
