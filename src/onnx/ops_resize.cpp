// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX Resize (every coordinate transformation, nearest mode, linear and cubic with
// exclude_outside and crop-and-resize extrapolation), Upsample, GridSample. Resize runs one axis
// at a time: host-computed taps and weights, then index_select and weighted sums; contiguous f32
// CPU tensors resized in their last two axes take a direct kernel with the same arithmetic.
#include <cmath>

#include "core/backend.h"
#include "core/parallel.h"
#include "kiln/nn/functional/pool.h"
#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

struct ResizeAttrs {
  std::string mode = "nearest", ctm = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false;
};

}  // namespace

double resize_original_coord(const std::string& m, double x, double scale, int64_t in, double out, double roi_lo,
                             double roi_hi) {
  if (m == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (m == "half_pixel_symmetric") {
    double adj = static_cast<double>(out) / (scale * static_cast<double>(in));
    double center = static_cast<double>(in) / 2;
    double offset = center * (1 - adj);
    return offset + (x + 0.5) / scale - 0.5;
  }
  if (m == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (m == "align_corners") return out == 1 ? 0.0 : x * static_cast<double>(in - 1) / (out - 1);
  if (m == "asymmetric") return x / scale;
  if (m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (m == "tf_crop_and_resize")
    return out > 1
               ? roi_lo * static_cast<double>(in - 1) + x * (roi_hi - roi_lo) * static_cast<double>(in - 1) / (out - 1)
               : 0.5 * (roi_lo + roi_hi) * static_cast<double>(in - 1);
  KILN_CHECK(false, "onnx", "Resize: unknown coordinate_transformation_mode '" << m << "'");
  __builtin_unreachable();
}

int64_t resize_nearest_index(const std::string& mode, double x) {
  double f = std::floor(x);
  if (mode == "floor") return static_cast<int64_t>(f);
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (mode == "round_prefer_ceil") return static_cast<int64_t>(x - f == 0.5 ? f + 1 : std::round(x));
  return static_cast<int64_t>(x - f == 0.5 ? f : std::round(x));  // round_prefer_floor
}

namespace {

// The taps of one resized axis: output o reads inputs idx[k * out + o] with weights
// w[k * out + o] (k < K), plus extra[o] (tf_crop_and_resize extrapolation) when any_extra.
struct Taps {
  int K = 1;
  std::vector<int64_t> idx;
  std::vector<double> w, extra;
  bool any_extra = false;
};

Taps axis_taps(int64_t in, int64_t out, double out_len, double scale, const ResizeAttrs& a, double roi_lo,
               double roi_hi, const OpContext& c) {
  c.check(in > 0 || out == 0, "cannot resize an empty axis");
  int K = a.mode == "nearest" ? 1 : a.mode == "linear" ? 2 : 4;
  c.check(a.mode == "nearest" || a.mode == "linear" || a.mode == "cubic", "unknown mode '" + a.mode + "'");
  std::vector<int64_t> idx(static_cast<size_t>(K * out));
  std::vector<double> w(static_cast<size_t>(K * out), 0.0);
  std::vector<double> extra(static_cast<size_t>(out), 0.0);
  bool any_extra = false;
  auto clampi = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
  for (int64_t o = 0; o < out; ++o) {
    double xo = resize_original_coord(a.ctm, static_cast<double>(o), scale, in, out_len, roi_lo, roi_hi);
    if (a.ctm == "tf_crop_and_resize" && (xo < 0 || xo > static_cast<double>(in - 1))) {
      extra[o] = a.extrapolation;
      any_extra = true;
      for (int k = 0; k < K; ++k) idx[k * out + o] = 0;
      continue;
    }
    if (K == 1) {
      idx[o] = clampi(resize_nearest_index(a.nearest, xo));
      w[o] = 1;
    } else if (K == 2) {
      double xc = std::clamp(xo, 0.0, static_cast<double>(in - 1));
      int64_t x0 = static_cast<int64_t>(std::floor(xc));
      double t = xc - static_cast<double>(x0);
      idx[o] = clampi(x0);
      idx[out + o] = clampi(x0 + 1);
      w[o] = 1 - t;
      w[out + o] = t;
    } else {
      int64_t x0 = static_cast<int64_t>(std::floor(xo));
      double t = xo - static_cast<double>(x0), A = a.cubic_a;
      double c0 = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
      double c1 = ((A + 2) * t - (A + 3)) * t * t + 1;
      double c2 = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
      double c3 = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
      double cs[4] = {c0, c1, c2, c3};
      double total = 0;
      for (int k = 0; k < 4; ++k) {
        int64_t i = x0 - 1 + k;
        if (a.exclude_outside && (i < 0 || i >= in)) cs[k] = 0;
        total += cs[k];
      }
      for (int k = 0; k < 4; ++k) {
        idx[k * out + o] = clampi(x0 - 1 + k);
        w[k * out + o] = a.exclude_outside && total != 0 ? cs[k] / total : cs[k];
      }
    }
  }
  return Taps{K, std::move(idx), std::move(w), std::move(extra), any_extra};
}

// Resizes one axis of x to `out` elements.
Tensor resize_axis(const Tensor& x, int64_t axis, int64_t out, double out_len, double scale, const ResizeAttrs& a,
                   double roi_lo, double roi_hi, const OpContext& c) {
  Taps tp = axis_taps(x.size(axis), out, out_len, scale, a, roi_lo, roi_hi, c);
  const int K = tp.K;
  const auto& idx = tp.idx;
  const auto& w = tp.w;
  const auto& extra = tp.extra;
  const bool any_extra = tp.any_extra;
  Tensor it = tensor(idx, Shape{K, out}, x.device());
  if (K == 1 && !any_extra) return index_select(x, axis, it.select(0, 0));
  Shape ws(x.dim(), 1);
  ws[axis] = out;
  DType dt = is_floating(x.dtype()) ? x.dtype() : f32;
  Tensor wt = tensor(w, Shape{K, out}, x.device()).to(dt);
  Tensor y;
  for (int k = 0; k < K; ++k) {
    Tensor term = index_select(x, axis, it.select(0, k)).to(dt) * wt.select(0, k).reshape(ws);
    y = k == 0 ? term : y + term;
  }
  if (any_extra) y = y + tensor(extra, Shape{out}, x.device()).to(dt).reshape(ws);
  return y.dtype() == x.dtype() ? y : cast(y, x.dtype());
}

// The direct path: a contiguous f32 CPU tensor resized in (at most) its last two axes, no
// extrapolation. One pass per output row: the H taps combined into a row over the input width,
// then the W taps, with the same float operations in the same order as the per-axis path
// (index_select, then term_0 + term_1 + ... of float products), so the results are identical.
bool resize_direct(const Tensor& x, const std::vector<int64_t>& out, const std::vector<double>& scales,
                   const std::vector<int64_t>& sizes, const std::vector<double>& roi, const ResizeAttrs& a,
                   const OpContext& c, Tensor& y) {
  const int64_t r = x.dim();
  if (r < 2 || !x.device().is_cpu() || x.dtype() != f32 || !x.is_contiguous() || !x.impl().storage ||
      a.ctm == "tf_crop_and_resize" || x.numel() == 0)
    return false;
  auto skipped = [&](int64_t i) { return out[i] == x.size(i) && scales[i] == 1.0; };
  for (int64_t i = 0; i + 2 < r; ++i)
    if (!skipped(i)) return false;
  Taps t[2];
  for (int k = 0; k < 2; ++k) {
    const int64_t i = r - 2 + k, in = x.size(i);
    if (skipped(i)) {
      t[k].K = 1;
      t[k].idx.resize(static_cast<size_t>(in));
      for (int64_t j = 0; j < in; ++j) t[k].idx[j] = j;
      t[k].w.assign(static_cast<size_t>(in), 1.0);
      continue;
    }
    double lo = roi.size() == static_cast<size_t>(2 * r) ? roi[i] : 0.0;
    double hi = roi.size() == static_cast<size_t>(2 * r) ? roi[i + r] : 1.0;
    double out_len = sizes.empty() ? static_cast<double>(in) * scales[i] : static_cast<double>(out[i]);
    t[k] = axis_taps(in, out[i], out_len, scales[i], a, lo, hi, c);
    if (t[k].any_extra) return false;
  }
  const bool h_skip = skipped(r - 2), w_skip = skipped(r - 1);
  const int64_t H = x.size(r - 2), W = x.size(r - 1), Ho = out[r - 2], Wo = out[r - 1];
  const int64_t planes = x.numel() / (H * W);
  Shape ys = x.shape();
  ys[r - 2] = Ho;
  ys[r - 1] = Wo;
  y = empty(ys, {.dtype = f32, .device = x.device()});
  if (y.numel() == 0) return true;
  const int KH = t[0].K, KW = t[1].K;
  std::vector<float> wh(t[0].w.begin(), t[0].w.end()), ww(t[1].w.begin(), t[1].w.end());
  const std::vector<int64_t>&ih = t[0].idx, &iw = t[1].idx;
  const float* xp = host_f32(x);
  float* yp = host_f32(y);
  const bool h_weighted = KH > 1 || (!h_skip && a.mode != "nearest");
  const bool w_weighted = KW > 1 || (!w_skip && a.mode != "nearest");
  parallel_for(planes * Ho, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, W + Wo)), [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(W));
    for (int64_t pr = b; pr < e; ++pr) {
      const int64_t p = pr / Ho, oy = pr % Ho;
      const float* xs = xp + p * H * W;
      const float* src = xs + ih[oy] * W;
      if (h_weighted) {
        const float w0 = wh[oy];
        for (int64_t j = 0; j < W; ++j) row[j] = src[j] * w0;
        for (int k = 1; k < KH; ++k) {
          const float* s2 = xs + ih[k * Ho + oy] * W;
          const float wk = wh[k * Ho + oy];
          for (int64_t j = 0; j < W; ++j) row[j] = row[j] + s2[j] * wk;
        }
        src = row.data();
      }
      float* dst = yp + pr * Wo;
      if (!w_weighted) {
        for (int64_t o = 0; o < Wo; ++o) dst[o] = src[iw[o]];
        continue;
      }
      for (int64_t o = 0; o < Wo; ++o) {
        float v = src[iw[o]] * ww[o];
        for (int k = 1; k < KW; ++k) v = v + src[iw[k * Wo + o]] * ww[k * Wo + o];
        dst[o] = v;
      }
    }
  });
  return true;
}

Tensor resize(const OpContext& c, const Tensor& x, std::vector<double> scales, std::vector<int64_t> sizes,
              std::vector<double> roi, const ResizeAttrs& a) {
  int64_t r = x.dim();
  std::vector<int64_t> axes = c.attr_ints("axes");
  if (!axes.empty()) {
    // Expand per-axis arguments to full rank.
    std::vector<double> fs(r, 1.0), froi(2 * r);
    std::vector<int64_t> fz(x.shape().begin(), x.shape().end());
    for (int64_t i = 0; i < r; ++i) {
      froi[i] = 0;
      froi[i + r] = 1;
    }
    size_t na = axes.size();
    for (size_t i = 0; i < na; ++i) {
      int64_t ax = axis_of(c, axes[i], r);
      if (!scales.empty()) fs[ax] = scales.at(i);
      if (!sizes.empty()) fz[ax] = sizes.at(i);
      if (roi.size() == 2 * na) {
        froi[ax] = roi[i];
        froi[ax + r] = roi[i + na];
      }
    }
    if (!scales.empty()) scales = fs;
    if (!sizes.empty()) sizes = fz;
    if (!roi.empty()) roi = froi;
  }
  std::vector<int64_t> out(r);
  if (!sizes.empty()) {
    c.check(static_cast<int64_t>(sizes.size()) == r, "sizes must have one value per dim");
    std::string policy = c.attr_s("keep_aspect_ratio_policy", "stretch");
    scales.assign(r, 1.0);
    if (policy != "stretch") {
      double s = policy == "not_larger" ? INFINITY : 0;
      for (int64_t i = 0; i < r; ++i) {
        if (!axes.empty() && std::find(axes.begin(), axes.end(), i) == axes.end() &&
            std::find(axes.begin(), axes.end(), i - r) == axes.end())
          continue;
        double q = static_cast<double>(sizes[i]) / static_cast<double>(x.size(i));
        s = policy == "not_larger" ? std::min(s, q) : std::max(s, q);
      }
      for (int64_t i = 0; i < r; ++i) {
        bool in_axes = axes.empty() || std::find(axes.begin(), axes.end(), i) != axes.end() ||
                       std::find(axes.begin(), axes.end(), i - r) != axes.end();
        if (!in_axes) {
          out[i] = x.size(i);
          continue;
        }
        scales[i] = s;
        out[i] = static_cast<int64_t>(std::round(s * static_cast<double>(x.size(i))));
      }
    } else {
      for (int64_t i = 0; i < r; ++i) {
        out[i] = sizes[i];
        scales[i] = x.size(i) ? static_cast<double>(sizes[i]) / static_cast<double>(x.size(i)) : 1.0;
      }
    }
  } else {
    c.check(static_cast<int64_t>(scales.size()) == r, "scales must have one value per dim");
    for (int64_t i = 0; i < r; ++i) {
      c.check(scales[i] > 0, "scales must be positive");
      out[i] = static_cast<int64_t>(std::floor(static_cast<double>(x.size(i)) * scales[i]));
    }
  }
  Tensor y_direct;
  if (resize_direct(x, out, scales, sizes, roi, a, c, y_direct)) return y_direct;
  Tensor y = x;
  for (int64_t i = 0; i < r; ++i) {
    double lo = roi.size() == static_cast<size_t>(2 * r) ? roi[i] : 0.0;
    double hi = roi.size() == static_cast<size_t>(2 * r) ? roi[i + r] : 1.0;
    if (out[i] == x.size(i) && scales[i] == 1.0 && a.ctm != "tf_crop_and_resize") continue;
    double out_len = sizes.empty() ? static_cast<double>(x.size(i)) * scales[i] : static_cast<double>(out[i]);
    y = resize_axis(y, i, out[i], out_len, scales[i], a, lo, hi, c);
  }
  return y;
}

std::vector<double> doubles_in(const OpContext& c, size_t i) {
  if (!c.has(i) || c.x(i).numel() == 0) return {};
  return c.value(i).to(f64).reshape({-1}).to_vector<double>();
}

}  // namespace

void register_resize(Registry& r) {
  r["Resize"] = [](OpContext& c) {
    const Tensor& x = c.x(0);
    ResizeAttrs a;
    a.mode = c.attr_s("mode", "nearest");
    a.ctm = c.attr_s("coordinate_transformation_mode", c.opset >= 11 ? "half_pixel" : "asymmetric");
    a.nearest = c.attr_s("nearest_mode", "round_prefer_floor");
    a.cubic_a = c.attr_f("cubic_coeff_a", -0.75f);
    a.exclude_outside = c.attr_i("exclude_outside", 0) != 0;
    a.extrapolation = c.attr_f("extrapolation_value", 0.0f);
    c.check(c.attr_i("antialias", 0) == 0, "antialias is not supported");
    if (c.opset < 11) {
      if (a.mode == "nearest") a.nearest = "floor";
      c.set(0, resize(c, x, doubles_in(c, 1), {}, {}, a));
      return;
    }
    std::vector<double> roi = doubles_in(c, 1), scales = doubles_in(c, 2);
    std::vector<int64_t> sizes;
    if (c.has(3) && c.x(3).numel() > 0) sizes = c.ints_in(3);
    c.set(0, resize(c, x, scales, sizes, roi, a));
  };
  r["Upsample"] = [](OpContext& c) {
    ResizeAttrs a;
    a.mode = c.attr_s("mode", "nearest");
    a.ctm = "asymmetric";
    a.nearest = "floor";
    std::vector<double> scales;
    if (c.has(1)) {
      scales = doubles_in(c, 1);
    } else {
      for (float f : c.attr_floats("scales")) scales.push_back(f);
    }
    c.set(0, resize(c, c.x(0), scales, {}, {}, a));
  };
  r["GridSample"] = [](OpContext& c) {
    nn::functional::GridSampleOptions o;
    std::string mode = c.attr_s("mode", "bilinear");
    if (mode == "linear") mode = "bilinear";
    if (mode == "cubic") mode = "bicubic";
    o.mode = mode;
    o.padding_mode = c.attr_s("padding_mode", "zeros");
    o.align_corners = c.attr_i("align_corners", 0) != 0;
    const Tensor& x = c.x(0);
    c.set(0, nn::functional::grid_sample(x, c.x(1).to(x.dtype()), o));
  };
}

}  // namespace kiln::onnx
