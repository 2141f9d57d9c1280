// SPDX-License-Identifier: MIT OR Apache-2.0
// roi_align and roi_pool (torchvision.ops semantics). The sample positions and weights depend
// only on the boxes, so they are found on the host (src/vision/kernels.h) and the input is read
// with index_select and summed with index_add: every device, and autodiff for the input.
#include "kiln/vision/roi.h"

#include <algorithm>
#include <cmath>

#include "kiln/error.h"
#include "kiln/ops.h"
#include "vision/kernels.h"

namespace kiln::vision {

namespace {

/// Checks input [N, C, H, W] (float) and boxes [K, 5] and returns the boxes on the host (f64)
/// with their batch indices.
std::pair<std::vector<double>, std::vector<int64_t>> host_boxes(const char* op, const Tensor& input,
                                                                const Tensor& boxes, RoiSize size) {
  KILN_CHECK(input.defined() && boxes.defined(), op, "input and boxes must be defined");
  KILN_CHECK(input.dim() == 4 && boxes.dim() == 2 && boxes.size(1) == 5, op,
             "input [N, C, H, W] and boxes [K, 5] expected, got " << to_string(input.shape()) << " and "
                                                                  << to_string(boxes.shape()));
  KILN_CHECK(is_floating(input.dtype()), op, "input must be floating point, got " << dtype_name(input.dtype()));
  KILN_CHECK(size.height >= 1 && size.width >= 1, op,
             "output size must be positive, got " << size.height << " x " << size.width);
  const std::vector<double> bv = boxes.to(f64).contiguous().to_vector<double>();
  const int64_t k = boxes.size(0), n = input.size(0);
  std::vector<double> rois(static_cast<size_t>(k * 4));
  std::vector<int64_t> batch(static_cast<size_t>(k));
  for (int64_t r = 0; r < k; ++r) {
    const double b = bv[static_cast<size_t>(r * 5)];
    KILN_CHECK(b >= 0 && b < static_cast<double>(n) && b == std::floor(b), op,
               "box " << r << " has batch index " << b << ", out of range for input " << to_string(input.shape()));
    batch[static_cast<size_t>(r)] = static_cast<int64_t>(b);
    std::copy_n(bv.begin() + r * 5 + 1, 4, rois.begin() + r * 4);
  }
  KILN_CHECK(k == 0 || (input.size(2) >= 1 && input.size(3) >= 1), op,
             "input has empty planes " << to_string(input.shape()));
  return {rois, batch};
}

/// out[row[i]] += w[i] * input pixel pos[i] (over every channel), as [K, C, oh, ow].
Tensor gather_sum(const Tensor& input, int64_t k, RoiSize size, const std::vector<int64_t>& pos,
                  const std::vector<double>& w, const std::vector<int64_t>& row) {
  const int64_t ch = input.size(1), cells = size.height * size.width;
  const Device dev = input.device();
  const auto m = static_cast<int64_t>(pos.size());
  const Tensor pixels = input.permute({0, 2, 3, 1}).reshape({-1, ch});  // [N * H * W, C]
  const Tensor picked = index_select(pixels, 0, tensor(pos, {m}, dev)) * tensor(w, {m, 1}, dev).to(input.dtype());
  const Tensor out =
      index_add(zeros({k * cells, ch}, {.dtype = input.dtype(), .device = dev}), 0, tensor(row, {m}, dev), picked);
  return out.reshape({k, size.height, size.width, ch}).permute({0, 3, 1, 2}).contiguous();
}

}  // namespace

Tensor roi_align(const Tensor& input, const Tensor& boxes, RoiSize output_size, double spatial_scale,
                 int64_t sampling_ratio, bool aligned) {
  const auto [rois, batch] = host_boxes("vision::roi_align", input, boxes, output_size);
  const auto k = static_cast<int64_t>(batch.size());
  detail::RoiAlignParams p{output_size.height, output_size.width, spatial_scale, sampling_ratio, aligned};
  const detail::RoiAlignSamples s =
      detail::roi_align_samples(rois.data(), batch.data(), k, input.size(2), input.size(3), p);
  const int64_t cells = p.out_h * p.out_w;
  std::vector<int64_t> pos, row;
  std::vector<double> w;
  for (int64_t r = 0; r < k; ++r) {
    const int64_t g = s.grid[static_cast<size_t>(r)];
    const double scale = 1.0 / static_cast<double>(std::max<int64_t>(g, 1));
    for (int64_t cell = 0; cell < cells; ++cell)
      for (int64_t q = 0; q < g; ++q)
        for (int64_t j = 0; j < 4; ++j) {
          const auto i = static_cast<size_t>(4 * (s.start[static_cast<size_t>(r)] + cell * g + q) + j);
          if (s.weight[i] == 0) continue;
          pos.push_back(s.pos[i]);
          w.push_back(s.weight[i] * scale);
          row.push_back(r * cells + cell);
        }
  }
  return gather_sum(input, k, output_size, pos, w, row);
}

Tensor roi_pool(const Tensor& input, const Tensor& boxes, RoiSize output_size, double spatial_scale) {
  const char* op = "vision::roi_pool";
  const auto [rois, batch] = host_boxes(op, input, boxes, output_size);
  const auto k = static_cast<int64_t>(batch.size());
  const int64_t ch = input.size(1), h = input.size(2), wd = input.size(3);
  const int64_t oh = output_size.height, ow = output_size.width, cells = oh * ow;
  // The argmax of each bin and channel, found on the host; the output gathers it (autodiff).
  const std::vector<float> xv = input.to(f32).contiguous().to_vector<float>();
  std::vector<int64_t> pos, row;
  for (int64_t r = 0; r < k; ++r) {
    const double* roi = rois.data() + r * 4;
    const auto x0 = static_cast<int64_t>(std::round(roi[0] * spatial_scale));
    const auto y0 = static_cast<int64_t>(std::round(roi[1] * spatial_scale));
    const auto x1 = static_cast<int64_t>(std::round(roi[2] * spatial_scale));
    const auto y1 = static_cast<int64_t>(std::round(roi[3] * spatial_scale));
    const double bh = static_cast<double>(std::max<int64_t>(y1 - y0 + 1, 1)) / static_cast<double>(oh);
    const double bw = static_cast<double>(std::max<int64_t>(x1 - x0 + 1, 1)) / static_cast<double>(ow);
    const int64_t b = batch[static_cast<size_t>(r)];
    for (int64_t ph = 0; ph < oh; ++ph)
      for (int64_t pw = 0; pw < ow; ++pw) {
        const int64_t hs =
            std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(ph) * bh)) + y0, 0, h);
        const int64_t he =
            std::clamp<int64_t>(static_cast<int64_t>(std::ceil(static_cast<double>(ph + 1) * bh)) + y0, 0, h);
        const int64_t ws =
            std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(pw) * bw)) + x0, 0, wd);
        const int64_t we =
            std::clamp<int64_t>(static_cast<int64_t>(std::ceil(static_cast<double>(pw + 1) * bw)) + x0, 0, wd);
        if (he <= hs || we <= ws) continue;  // an empty bin: 0
        for (int64_t c = 0; c < ch; ++c) {
          const float* plane = xv.data() + (b * ch + c) * h * wd;
          int64_t best = hs * wd + ws;
          for (int64_t y = hs; y < he; ++y)
            for (int64_t x = ws; x < we; ++x)
              if (plane[y * wd + x] > plane[best]) best = y * wd + x;
          pos.push_back((b * ch + c) * h * wd + best);
          row.push_back((r * ch + c) * cells + ph * ow + pw);
        }
      }
  }
  const auto m = static_cast<int64_t>(pos.size());
  const Device dev = input.device();
  const Tensor picked = index_select(input.reshape({-1}), 0, tensor(pos, {m}, dev));
  const Tensor out =
      index_add(zeros({k * ch * cells}, {.dtype = input.dtype(), .device = dev}), 0, tensor(row, {m}, dev), picked);
  return out.reshape({k, ch, oh, ow});
}

Tensor ps_roi_align(const Tensor& input, const Tensor& boxes, RoiSize output_size, double spatial_scale,
                    int64_t sampling_ratio) {
  const char* op = "vision::ps_roi_align";
  const auto [rois, batch] = host_boxes(op, input, boxes, output_size);
  const int64_t oh = output_size.height, ow = output_size.width, cells = oh * ow;
  const int64_t ch = input.size(1), h = input.size(2), wd = input.size(3);
  KILN_CHECK(ch % cells == 0, op,
             "input channels must be a multiple of output height x width (" << oh << " x " << ow << "), got input "
                                                                            << to_string(input.shape()));
  const int64_t co = ch / cells;
  const auto k = static_cast<int64_t>(batch.size());
  // torchvision's geometry: the box shifted by -0.5 pixel, no minimum size (aligned RoI Align).
  detail::RoiAlignParams p{oh, ow, spatial_scale, sampling_ratio, true};
  const detail::RoiAlignSamples s = detail::roi_align_samples(rois.data(), batch.data(), k, h, wd, p);
  std::vector<int64_t> pos, row;
  std::vector<double> w;
  for (int64_t r = 0; r < k; ++r) {
    const int64_t g = s.grid[static_cast<size_t>(r)], b = batch[static_cast<size_t>(r)];
    const double scale = 1.0 / static_cast<double>(std::max<int64_t>(g, 1));
    for (int64_t c = 0; c < co; ++c)
      for (int64_t cell = 0; cell < cells; ++cell) {
        // Output channel c of cell (ph, pw) reads input channel c * cells + ph * ow + pw.
        const int64_t shift = ((b * ch + c * cells + cell) - b) * h * wd;
        for (int64_t q = 0; q < 4 * g; ++q) {
          const auto i = static_cast<size_t>(4 * (s.start[static_cast<size_t>(r)] + cell * g) + q);
          if (s.weight[i] == 0) continue;
          pos.push_back(s.pos[i] + shift);
          w.push_back(s.weight[i] * scale);
          row.push_back((r * co + c) * cells + cell);
        }
      }
  }
  const auto m = static_cast<int64_t>(pos.size());
  const Device dev = input.device();
  const Tensor picked =
      index_select(input.reshape({-1}), 0, tensor(pos, {m}, dev)) * tensor(w, {m}, dev).to(input.dtype());
  const Tensor out =
      index_add(zeros({k * co * cells}, {.dtype = input.dtype(), .device = dev}), 0, tensor(row, {m}, dev), picked);
  return out.reshape({k, co, oh, ow});
}

}  // namespace kiln::vision
