// SPDX-License-Identifier: MIT OR Apache-2.0
// Connected components with statistics (cv::connectedComponentsWithStats), on the host: a
// flood fill from each unlabelled pixel in raster order, so labels follow first pixels.
#include <cstdint>
#include <limits>
#include <vector>

#include "kiln/vision/image.h"
#include "vision/image_util.h"

namespace kiln::vision {

namespace {

/// Labels one plane (nonzero = foreground) and returns its components.
Components label_plane(const uint8_t* fg, int64_t h, int64_t w, int64_t connectivity) {
  std::vector<int32_t> labels(static_cast<size_t>(h * w), 0);
  std::vector<int64_t> stack;
  int32_t next = 1;
  static const int64_t d8[8][2] = {{-1, -1}, {-1, 0}, {-1, 1}, {0, -1}, {0, 1}, {1, -1}, {1, 0}, {1, 1}};
  static const int64_t d4[4][2] = {{-1, 0}, {0, -1}, {0, 1}, {1, 0}};
  for (int64_t start = 0; start < h * w; ++start) {
    if (!fg[start] || labels[static_cast<size_t>(start)]) continue;
    labels[static_cast<size_t>(start)] = next;
    stack.assign(1, start);
    while (!stack.empty()) {
      const int64_t p = stack.back();
      stack.pop_back();
      const int64_t y = p / w, x = p % w;
      for (int64_t k = 0; k < connectivity; ++k) {
        const int64_t ny = y + (connectivity == 8 ? d8[k][0] : d4[k][0]);
        const int64_t nx = x + (connectivity == 8 ? d8[k][1] : d4[k][1]);
        if (ny < 0 || ny >= h || nx < 0 || nx >= w) continue;
        const int64_t q = ny * w + nx;
        if (!fg[q] || labels[static_cast<size_t>(q)]) continue;
        labels[static_cast<size_t>(q)] = next;
        stack.push_back(q);
      }
    }
    ++next;
  }
  // Statistics, the background (label 0) included.
  const auto n = static_cast<size_t>(next);
  std::vector<int64_t> left(n, w), top(n, h), right(n, -1), bottom(n, -1);
  std::vector<int64_t> area(n, 0);
  std::vector<double> sx(n, 0), sy(n, 0);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      const auto l = static_cast<size_t>(labels[static_cast<size_t>(y * w + x)]);
      left[l] = std::min(left[l], x), right[l] = std::max(right[l], x);
      top[l] = std::min(top[l], y), bottom[l] = std::max(bottom[l], y);
      ++area[l];
      sx[l] += static_cast<double>(x), sy[l] += static_cast<double>(y);
    }
  std::vector<int32_t> stats;
  std::vector<double> centroids;
  for (size_t l = 0; l < n; ++l) {
    if (area[l] == 0) {  // only the background can be empty; OpenCV gives these values
      stats.insert(stats.end(), {-1, std::numeric_limits<int32_t>::max(), 0, 0, 0});
    } else {
      stats.insert(stats.end(), {static_cast<int32_t>(left[l]), static_cast<int32_t>(top[l]),
                                 static_cast<int32_t>(right[l] - left[l] + 1),
                                 static_cast<int32_t>(bottom[l] - top[l] + 1), static_cast<int32_t>(area[l])});
    }
    const auto a = static_cast<double>(area[l]);
    centroids.insert(centroids.end(), {sx[l] / a, sy[l] / a});
  }
  Components c;
  c.count = next;
  c.labels = tensor(labels, {h, w});
  c.stats = tensor(stats, {static_cast<int64_t>(n), 5});
  c.centroids = tensor(centroids, {static_cast<int64_t>(n), 2});
  return c;
}

}  // namespace

std::vector<Components> connected_components_batch(const Tensor& x, int64_t connectivity) {
  const char* op = "vision::connected_components";
  KILN_CHECK(x.defined() && x.dim() == 4 && x.size(1) == 1, op,
             "image [N, 1, H, W] expected, got " << (x.defined() ? to_string(x.shape()) : "undefined"));
  KILN_CHECK(connectivity == 4 || connectivity == 8, op, "connectivity must be 4 or 8, got " << connectivity);
  const int64_t h = x.size(2), w = x.size(3);
  const std::vector<uint8_t> fg = (x != 0).to(u8).contiguous().to_vector<uint8_t>();
  std::vector<Components> out;
  for (int64_t i = 0; i < x.size(0); ++i) out.push_back(label_plane(fg.data() + i * h * w, h, w, connectivity));
  return out;
}

Components connected_components(const Tensor& x, int64_t connectivity) {
  const char* op = "vision::connected_components";
  KILN_CHECK(
      x.defined() && x.dim() >= 2 && x.dim() <= 4, op,
      "image [H, W], [1, H, W] or [1, 1, H, W] expected, got " << (x.defined() ? to_string(x.shape()) : "undefined"));
  KILN_CHECK(x.numel() == x.size(-1) * x.size(-2), op,
             "one image expected, got " << to_string(x.shape()) << "; use connected_components_batch");
  return connected_components_batch(x.reshape({1, 1, x.size(-2), x.size(-1)}), connectivity)[0];
}

}  // namespace kiln::vision
