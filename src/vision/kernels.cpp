// SPDX-License-Identifier: MIT OR Apache-2.0
// Host kernels shared by kiln::vision and the ONNX importer: greedy NMS, RoI Align samples.
#include "vision/kernels.h"

#include <algorithm>
#include <cmath>

namespace kiln::vision::detail {

std::vector<int64_t> order_by_score(const float* scores, int64_t n, std::optional<float> min_score) {
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    if (!min_score || scores[i] > *min_score) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return scores[x] > scores[y]; });
  return order;
}

namespace {

/// Whether the IoU of boxes a and b (x1, y1, x2, y2) exceeds threshold (boxes that do not
/// overlap, or have zero area, never do).
bool overlaps(const float* a, const float* b, float threshold) {
  const float ix0 = std::max(a[0], b[0]), ix1 = std::min(a[2], b[2]);
  const float iy0 = std::max(a[1], b[1]), iy1 = std::min(a[3], b[3]);
  if (ix1 <= ix0 || iy1 <= iy0) return false;
  const float inter = (ix1 - ix0) * (iy1 - iy0);
  const float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
  const float uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

}  // namespace

std::vector<int64_t> greedy_nms(const float* boxes, const std::vector<int64_t>& order, float iou_threshold,
                                int64_t max_keep, const int64_t* groups) {
  std::vector<int64_t> kept;
  for (int64_t i : order) {
    if (max_keep >= 0 && static_cast<int64_t>(kept.size()) >= max_keep) break;
    const float* cand = boxes + i * 4;
    const bool suppressed = std::any_of(kept.begin(), kept.end(), [&](int64_t k) {
      return (!groups || groups[k] == groups[i]) && overlaps(cand, boxes + k * 4, iou_threshold);
    });
    if (!suppressed) kept.push_back(i);
  }
  return kept;
}

namespace {

/// Appends the four corners of one bilinear sample of an [h, w] plane at (y, x), as RoI Align
/// takes it: a sample more than one pixel outside gives zero weights.
void add_sample(RoiAlignSamples& s, int64_t base, double y, double x, int64_t h, int64_t w) {
  if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) {
    s.pos.insert(s.pos.end(), {base, base, base, base});
    s.weight.insert(s.weight.end(), {0.0, 0.0, 0.0, 0.0});
    return;
  }
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  auto y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x);
  int64_t y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= h - 1) y = static_cast<double>(y0 = y1 = h - 1);
  if (x0 >= w - 1) x = static_cast<double>(x0 = x1 = w - 1);
  const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0);
  s.pos.insert(s.pos.end(), {base + y0 * w + x0, base + y0 * w + x1, base + y1 * w + x0, base + y1 * w + x1});
  s.weight.insert(s.weight.end(), {(1 - ly) * (1 - lx), (1 - ly) * lx, ly * (1 - lx), ly * lx});
}

}  // namespace

RoiAlignSamples roi_align_samples(const double* rois, const int64_t* batch, int64_t nr, int64_t h, int64_t w,
                                  const RoiAlignParams& p) {
  RoiAlignSamples s;
  s.start.push_back(0);
  const double off = p.aligned ? 0.5 : 0.0;
  const auto oh = static_cast<double>(p.out_h), ow = static_cast<double>(p.out_w);
  for (int64_t r = 0; r < nr; ++r) {
    const double* roi = rois + r * 4;
    const double x0 = roi[0] * p.spatial_scale - off, y0 = roi[1] * p.spatial_scale - off;
    double rw = roi[2] * p.spatial_scale - off - x0, rh = roi[3] * p.spatial_scale - off - y0;
    if (!p.aligned) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    const double bh = rh / oh, bw = rw / ow;
    const int64_t gh = p.sampling_ratio > 0 ? p.sampling_ratio : static_cast<int64_t>(std::ceil(rh / oh));
    const int64_t gw = p.sampling_ratio > 0 ? p.sampling_ratio : static_cast<int64_t>(std::ceil(rw / ow));
    const int64_t base = batch[r] * h * w;
    for (int64_t ph = 0; ph < p.out_h; ++ph)
      for (int64_t pw = 0; pw < p.out_w; ++pw)
        for (int64_t iy = 0; iy < gh; ++iy)
          for (int64_t ix = 0; ix < gw; ++ix)
            add_sample(
                s, base,
                y0 + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh),
                x0 + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw), h,
                w);
    s.grid.push_back(std::max<int64_t>(gh, 0) * std::max<int64_t>(gw, 0));
    s.start.push_back(static_cast<int64_t>(s.pos.size() / 4));
  }
  return s;
}

}  // namespace kiln::vision::detail
