// SPDX-License-Identifier: MIT OR Apache-2.0
// Resampling composites: interpolate, grid_sample, affine_grid, pixel_shuffle/unshuffle.
//
// Note [Separable interpolation]
// interpolate resizes one spatial dim at a time, last dim first, with index_select and
// weighted sums of the selected slices; the indices and weights depend only on the sizes, so
// they are computed on the host with PyTorch's exact coordinate formulas (in f32 for f32/f16/
// bf16 inputs, f64 for f64, as PyTorch's opmath type) and enter as small constant tensors.
// Resizing W first, then H, gives PyTorch's nested evaluation order
// out = t0_h * (t0_w * x00 + t1_w * x01) + t1_h * (...), and everything is made of public,
// differentiable tensor ops. grid_sample gathers the 2^d (or 16 for bicubic) neighbours with
// `gather` and sums the weighted values in PyTorch's corner order; 4-d inputs follow
// PyTorch's vectorised CPU kernel formulas, 5-d inputs its scalar 3-d kernel.
#include <cmath>
#include <string>
#include <vector>

#include "kiln/nn/functional/pool.h"
#include "ops/dispatch.h"

namespace kiln::nn::functional {

namespace {

enum class Mode { Nearest, NearestExact, Linear, Cubic, Area };

/// PyTorch's compute_scales_value / area_pixel_compute_scale in the opmath type F.
template <class F>
F scales_value(std::optional<double> scale, int64_t in, int64_t out) {
  return (scale && *scale > 0) ? static_cast<F>(1.0 / *scale) : static_cast<F>(in) / static_cast<F>(out);
}
template <class F>
F area_scale(int64_t in, int64_t out, bool align, std::optional<double> scale) {
  if (align) return out > 1 ? static_cast<F>(in - 1) / static_cast<F>(out - 1) : F(0);
  return scales_value<F>(scale, in, out);
}
template <class F>
F source_index(F scale, int64_t dst, bool align, bool cubic) {
  if (align) return scale * static_cast<F>(dst);
  F src = scale * (static_cast<F>(dst) + static_cast<F>(0.5)) - static_cast<F>(0.5);
  return (!cubic && src < F(0)) ? F(0) : src;
}
/// PyTorch's guard_index_and_lambda (floorf, as there).
template <class F>
void guard_index(F real, int64_t in, int64_t& index, F& lambda) {
  index = std::min(static_cast<int64_t>(std::floor(static_cast<float>(real))), in - 1);
  lambda = std::min(std::max(real - static_cast<F>(index), F(0)), F(1));
}

/// Source rows of nearest / nearest-exact along one dim. `shortcuts`: PyTorch's 2-d nearest
/// kernel maps out == in to the identity and out == 2 * in to i / 2 whatever the scale (its
/// nearest_idx); the 1-d and 3-d kernels use the formula throughout.
std::vector<int64_t> nearest_indices(Mode m, int64_t in, int64_t out, std::optional<double> scale, bool shortcuts) {
  std::vector<int64_t> idx(static_cast<size_t>(out));
  const float s = scales_value<float>(scale, in, out);
  for (int64_t i = 0; i < out; ++i) {
    int64_t v;
    if (m == Mode::Nearest) {
      if (shortcuts && out == in)
        v = i;
      else if (shortcuts && out == 2 * in)
        v = i >> 1;
      else
        v = std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * s)), in - 1);
    } else {
      v = std::min(static_cast<int64_t>(std::floor(static_cast<float>((static_cast<double>(i) + 0.5) * s))), in - 1);
    }
    idx[static_cast<size_t>(i)] = v;
  }
  return idx;
}

/// Taps of linear (2) or cubic (4) interpolation along one dim: indices[tap][out] and
/// weights[tap][out].
template <class F>
void interp_taps(Mode m, int64_t in, int64_t out, bool align, std::optional<double> scale,
                 std::vector<std::vector<int64_t>>& idx, std::vector<std::vector<F>>& w) {
  const int ntaps = m == Mode::Cubic ? 4 : 2;
  idx.assign(static_cast<size_t>(ntaps), std::vector<int64_t>(static_cast<size_t>(out)));
  w.assign(static_cast<size_t>(ntaps), std::vector<F>(static_cast<size_t>(out)));
  const F sc = area_scale<F>(in, out, align, scale);
  for (int64_t i = 0; i < out; ++i) {
    const size_t o = static_cast<size_t>(i);
    F lambda;
    int64_t i0;
    guard_index(source_index<F>(sc, i, align, m == Mode::Cubic), in, i0, lambda);
    if (m == Mode::Linear) {
      idx[0][o] = i0;
      idx[1][o] = i0 + (i0 < in - 1 ? 1 : 0);
      w[0][o] = F(1) - lambda;
      w[1][o] = lambda;
    } else {
      // PyTorch's get_cubic_upsample_coefficients with A = -0.75.
      const F A = F(-0.75);
      auto conv1 = [&](F x) { return ((A + F(2)) * x - (A + F(3))) * x * x + F(1); };
      auto conv2 = [&](F x) { return ((A * x - F(5) * A) * x + F(8) * A) * x - F(4) * A; };
      const F x1 = lambda, x2 = F(1) - lambda;
      w[0][o] = conv2(x1 + F(1));
      w[1][o] = conv1(x1);
      w[2][o] = conv1(x2);
      w[3][o] = conv2(x2 + F(1));
      for (int j = 0; j < 4; ++j) idx[static_cast<size_t>(j)][o] = std::clamp<int64_t>(i0 - 1 + j, 0, in - 1);
    }
  }
}

/// A 1-d constant as a tensor shaped to broadcast along `dim` of a rank-`rank` tensor.
template <class V>
Tensor along(const std::vector<V>& v, int64_t dim, int64_t rank, DType dt, const Device& dev) {
  Shape s{static_cast<int64_t>(v.size())};
  for (int64_t d = dim + 1; d < rank; ++d) s.push_back(1);
  return cast(tensor(v, s, dev), dt);
}

Tensor index_tensor(const std::vector<int64_t>& v, const Device& dev) {
  return tensor(v, Shape{static_cast<int64_t>(v.size())}, dev);
}

bool is_arange(const std::vector<int64_t>& v, int64_t in) {
  if (static_cast<int64_t>(v.size()) != in) return false;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != static_cast<int64_t>(i)) return false;
  return true;
}

template <class F>
Tensor resample_dim(const Tensor& y, Mode m, int64_t dim, int64_t out, bool align, std::optional<double> scale) {
  const int64_t in = y.size(dim);
  // PyTorch's linear kernels copy a dim whose size does not change, whatever the scale
  // (compute_source_index_and_lambda); cubic ones always interpolate.
  if (m == Mode::Linear && in == out) return y;
  std::vector<std::vector<int64_t>> idx;
  std::vector<std::vector<F>> w;
  interp_taps<F>(m, in, out, align, scale, idx, w);
  Tensor acc;
  for (size_t t = 0; t < idx.size(); ++t) {
    Tensor term =
        index_select(y, dim, index_tensor(idx[t], y.device())) * along(w[t], dim, y.dim(), y.dtype(), y.device());
    acc = t == 0 ? term : acc + term;
  }
  return acc;
}

const char* mode_needs(Mode m, int64_t nsp, const std::string& name) {
  if (name == "linear") return nsp == 1 ? nullptr : "3D";
  if (name == "bilinear" || name == "bicubic") return nsp == 2 ? nullptr : "4D";
  if (name == "trilinear") return nsp == 3 ? nullptr : "5D";
  (void)m;
  return nullptr;
}

std::string sizes_str(const Dims& d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + ")";
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& o) {
  const char* api = "interpolate";
  detail::check_defined(api, x);
  KILN_CHECK(x.dim() >= 3 && x.dim() <= 5, api,
             "expected a 3-d, 4-d or 5-d input [N, C, *spatial], got shape " << x.shape());
  const int64_t nsp = x.dim() - 2;
  const std::string& name = o.mode;
  Mode m = Mode::Nearest;
  if (name == "nearest")
    m = Mode::Nearest;
  else if (name == "nearest-exact")
    m = Mode::NearestExact;
  else if (name == "linear" || name == "bilinear" || name == "trilinear")
    m = Mode::Linear;
  else if (name == "bicubic")
    m = Mode::Cubic;
  else if (name == "area")
    m = Mode::Area;
  else
    KILN_CHECK(
        false, api,
        "unknown mode '" << name << "'; expected nearest, nearest-exact, linear, bilinear, bicubic, trilinear or area");
  if (const char* need = mode_needs(m, nsp, name))
    KILN_CHECK(
        false, api,
        "got " << x.dim() << "D input (shape " << x.shape() << "), but " << name << " mode needs " << need << " input");
  const bool interp = m == Mode::Linear || m == Mode::Cubic;
  KILN_CHECK(
      !o.align_corners || interp, api,
      "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear");
  const bool align = o.align_corners.value_or(false);
  const bool has_size = !o.size.values().empty(), has_scale = !o.scale_factor.values().empty();
  KILN_CHECK(has_size != has_scale, api,
             (has_size ? "only one of size or scale_factor should be defined"
                       : "either size or scale_factor should be defined"));
  KILN_CHECK(!(has_size && o.recompute_scale_factor.value_or(false)), api,
             "recompute_scale_factor is not meaningful with an explicit size");
  if (interp)
    KILN_CHECK(
        is_floating(x.dtype()), api,
        name << " mode needs a float input, got " << dtype_name(x.dtype()).data() << " (shape " << x.shape() << ")");
  else
    KILN_CHECK(x.dtype() != DType::Bool, api, "not implemented for bool inputs");

  Dims in_sp(x.shape().begin() + 2, x.shape().end()), out_sp;
  std::vector<std::optional<double>> scales(static_cast<size_t>(nsp));
  if (has_size) {
    out_sp = o.size.expand(nsp, api, "size");
  } else {
    const std::vector<double>& sf = o.scale_factor.values();
    KILN_CHECK(
        static_cast<int64_t>(sf.size()) == nsp || sf.size() == 1, api,
        "scale_factor must have 1 or " << nsp << " values for input shape " << x.shape() << ", got " << sf.size());
    const bool recompute = o.recompute_scale_factor.value_or(false) || m == Mode::Area;
    for (int64_t d = 0; d < nsp; ++d) {
      const double s = sf.size() == 1 ? sf[0] : sf[static_cast<size_t>(d)];
      KILN_CHECK(std::isfinite(s) && s > 0, api, "scale_factor must be positive and finite, got " << s);
      out_sp.push_back(static_cast<int64_t>(std::floor(static_cast<double>(in_sp[d]) * s)));
      if (!recompute) scales[static_cast<size_t>(d)] = s;
    }
  }
  bool ok = true;
  for (int64_t d = 0; d < nsp; ++d) ok &= in_sp[d] > 0 && out_sp[d] > 0;
  KILN_CHECK(ok, api,
             "input and output sizes should be greater than 0, but got input " << sizes_str(in_sp) << " and output "
                                                                               << sizes_str(out_sp));
  if (m == Mode::Area) {
    OutputSize os(out_sp);
    return nsp == 1 ? adaptive_avg_pool1d(x, os) : nsp == 2 ? adaptive_avg_pool2d(x, os) : adaptive_avg_pool3d(x, os);
  }
  if (!interp) {
    Tensor y = x;
    for (int64_t d = nsp - 1; d >= 0; --d) {
      std::vector<int64_t> idx = nearest_indices(m, in_sp[d], out_sp[d], scales[static_cast<size_t>(d)], nsp == 2);
      if (is_arange(idx, in_sp[d])) continue;
      y = index_select(y, 2 + d, index_tensor(idx, x.device()));
    }
    return y.is_same_storage(x) ? y.clone() : y;
  }
  const DType dt = x.dtype();
  const bool half = dt == DType::F16 || dt == DType::BF16;
  Tensor y = half ? cast(x, DType::F32) : x;
  for (int64_t d = nsp - 1; d >= 0; --d) {
    if (dt == DType::F64)
      y = resample_dim<double>(y, m, 2 + d, out_sp[d], align, scales[static_cast<size_t>(d)]);
    else
      y = resample_dim<float>(y, m, 2 + d, out_sp[d], align, scales[static_cast<size_t>(d)]);
  }
  if (half) return cast(y, dt);
  return y.is_same_storage(x) ? y.clone() : y;
}

// ---- grid_sample --------------------------------------------------------------------------

namespace {

/// Coordinate rules of grid_sample for one spatial dim of `size` elements. vec selects the
/// formulas of PyTorch's vectorised 2-d kernel, otherwise those of its scalar 3-d kernel.
struct GridCoord {
  int64_t size;
  bool align, vec;
  int pad;  // 0 zeros, 1 border, 2 reflection

  Tensor unnormalize(const Tensor& c) const {
    const double n = static_cast<double>(size);
    if (vec) return align ? (c + 1) * ((n - 1) / 2) : (c + 1) * (n / 2) - 0.5;
    return align ? (c + 1) / 2 * (n - 1) : ((c + 1) * n - 1) / 2;
  }
  Tensor clip(const Tensor& x) const { return clamp(x, Scalar(0), Scalar(static_cast<double>(size - 1))); }
  Tensor reflect(const Tensor& x) const {
    const double n = static_cast<double>(size);
    if (vec) {
      if (align && size <= 1) return zeros_like(x);
      const double ts = align ? 2 * (n - 1) : 2 * n, low = align ? 0.0 : -0.5;
      Tensor a = abs(x - low);
      Tensor extra = a - trunc(a / ts) * ts;
      return minimum(extra, ts - extra) + low;
    }
    const double tlo = align ? 0 : -1, thi = align ? 2 * (n - 1) : 2 * n - 1;
    if (tlo == thi) return zeros_like(x);
    const double mn = tlo / 2, span = (thi - tlo) / 2;
    Tensor a = abs(x - mn);
    Tensor extra = fmod(a, Scalar(span));
    Tensor flips = floor(a / span);
    Tensor even = eq(fmod(flips, Scalar(2.0)), Scalar(0));
    return where(even, extra + mn, (span - extra) + mn);
  }
  /// Padding applied to an unnormalised coordinate (compute_coordinates).
  Tensor pad_coord(const Tensor& x) const {
    if (pad == 1) return clip(x);
    if (pad == 2) return clip(reflect(x));
    return x;
  }
  Tensor source(const Tensor& c) const { return pad_coord(unnormalize(c)); }
  /// In-bounds mask of integer-valued coordinates (always true for border/reflection except
  /// the +1 neighbour, which the caller masks the same way).
  Tensor inside(const Tensor& i) const {
    return logical_and(gt(i, Scalar(-1)), lt(i, Scalar(static_cast<double>(size))));
  }
  /// i (integer-valued floats) clamped into the dim and converted to i64.
  Tensor index(const Tensor& i) const {
    return cast(clamp(i, Scalar(0), Scalar(static_cast<double>(size - 1))), DType::I64);
  }
};

}  // namespace

Tensor grid_sample(const Tensor& x, const Tensor& grid, const GridSampleOptions& o) {
  const char* api = "grid_sample";
  detail::check_defined(api, x);
  detail::check_defined(api, grid);
  detail::check_same_device(api, x, grid);
  KILN_CHECK(x.dim() == 4 || x.dim() == 5, api, "expected a 4-d or 5-d input, got shape " << x.shape());
  const int64_t nsp = x.dim() - 2;
  KILN_CHECK(grid.dim() == x.dim() && grid.size(-1) == nsp && grid.size(0) == x.size(0), api,
             "expected grid of shape [N, *out, " << nsp << "] for input shape " << x.shape() << ", got grid shape "
                                                 << grid.shape());
  KILN_CHECK(is_floating(x.dtype()) && grid.dtype() == x.dtype(), api,
             "expected float input and grid of one dtype, got " << dtype_name(x.dtype()).data() << " and "
                                                                << dtype_name(grid.dtype()).data());
  for (int64_t d = 2; d < x.dim(); ++d)
    KILN_CHECK(x.size(d) > 0, api, "expected input to have non-empty spatial dims, got shape " << x.shape());
  int interp = 0;
  if (o.mode == "bilinear")
    interp = 0;
  else if (o.mode == "nearest")
    interp = 1;
  else if (o.mode == "bicubic")
    interp = 2;
  else
    KILN_CHECK(false, api, "unknown mode '" << o.mode << "'; expected bilinear, nearest or bicubic");
  KILN_CHECK(interp != 2 || nsp == 2, api, "bicubic interpolation only supports 4-d input, got shape " << x.shape());
  int pad = 0;
  if (o.padding_mode == "zeros")
    pad = 0;
  else if (o.padding_mode == "border")
    pad = 1;
  else if (o.padding_mode == "reflection")
    pad = 2;
  else
    KILN_CHECK(false, api, "unknown padding_mode '" << o.padding_mode << "'; expected zeros, border or reflection");

  const DType dt = x.dtype();
  const bool half = dt == DType::F16 || dt == DType::BF16;
  const DType ct = half ? DType::F32 : dt;
  const int64_t N = x.size(0), C = x.size(1);
  Shape out_sp(grid.shape().begin() + 1, grid.shape().end() - 1);
  int64_t M = shape_numel(out_sp), P = 1;
  for (int64_t d = 2; d < x.dim(); ++d) P *= x.size(d);
  Tensor xf = cast(x, ct).reshape({N, C, P});
  Tensor g = cast(grid, ct).reshape({N, M, nsp});
  // Per input spatial dim k (D, H, W order): its coordinate is grid[..., nsp - 1 - k].
  std::vector<GridCoord> gc;
  std::vector<Tensor> coord;
  std::vector<int64_t> stride(static_cast<size_t>(nsp));
  int64_t st = 1;
  for (int64_t k = nsp - 1; k >= 0; --k) {
    stride[static_cast<size_t>(k)] = st;
    st *= x.size(2 + k);
  }
  for (int64_t k = 0; k < nsp; ++k) {
    gc.push_back(GridCoord{x.size(2 + k), o.align_corners, nsp == 2, pad});
    coord.push_back(g.select(2, nsp - 1 - k));
  }
  // Gathers the values at integer-valued coordinates ic[k] ([N, M] each); zero where masked.
  auto fetch = [&](const std::vector<Tensor>& ic, const Tensor& mask) {
    Tensor flat;
    for (int64_t k = 0; k < nsp; ++k) {
      Tensor t = gc[static_cast<size_t>(k)].index(ic[static_cast<size_t>(k)]) * Scalar(stride[static_cast<size_t>(k)]);
      flat = k == 0 ? t : flat + t;
    }
    Tensor v = gather(xf, 2, flat.unsqueeze(1).expand({N, C, M}));
    return mask.defined() ? where(mask.unsqueeze(1), v, Scalar(0)) : v;
  };
  Tensor out;
  if (interp == 1) {
    std::vector<Tensor> ic;
    Tensor mask;
    for (int64_t k = 0; k < nsp; ++k) {
      ic.push_back(round(gc[static_cast<size_t>(k)].source(coord[static_cast<size_t>(k)])));
      if (pad == 0) {
        Tensor in = gc[static_cast<size_t>(k)].inside(ic.back());
        mask = k == 0 ? in : logical_and(mask, in);
      }
    }
    out = fetch(ic, mask);
  } else if (interp == 0) {
    std::vector<Tensor> src, lo;
    for (int64_t k = 0; k < nsp; ++k) {
      src.push_back(gc[static_cast<size_t>(k)].source(coord[static_cast<size_t>(k)]));
      lo.push_back(floor(src.back()));
    }
    // Corner c: bit (nsp - 1 - k) selects the +1 neighbour along dim k, so corners run in
    // PyTorch's order (z, then y, then x; x fastest).
    const int ncorner = 1 << nsp;
    std::vector<Tensor> wlo(static_cast<size_t>(nsp)), whi(static_cast<size_t>(nsp));
    for (int64_t k = 0; k < nsp; ++k) {
      const Tensor& s = src[static_cast<size_t>(k)];
      const Tensor& l = lo[static_cast<size_t>(k)];
      if (nsp == 2) {  // vectorised kernel: w = x - x0, e = 1 - w
        whi[static_cast<size_t>(k)] = s - l;
        wlo[static_cast<size_t>(k)] = 1 - whi[static_cast<size_t>(k)];
      } else {  // scalar 3-d kernel: (x0 + 1 - x) and (x - x0)
        whi[static_cast<size_t>(k)] = s - l;
        wlo[static_cast<size_t>(k)] = (l + 1) - s;
      }
    }
    for (int c = 0; c < ncorner; ++c) {
      std::vector<Tensor> ic;
      Tensor mask, w;
      for (int64_t k = 0; k < nsp; ++k) {
        const bool hi = (c >> (nsp - 1 - k)) & 1;
        Tensor i = hi ? lo[static_cast<size_t>(k)] + 1 : lo[static_cast<size_t>(k)];
        ic.push_back(i);
        Tensor in = gc[static_cast<size_t>(k)].inside(i);
        mask = k == 0 ? in : logical_and(mask, in);
      }
      // Weight products in PyTorch's order: y * x in 2-d (s * e), x * y * z in 3-d.
      if (nsp == 2) {
        w = (((c >> 1) & 1) ? whi[0] : wlo[0]) * ((c & 1) ? whi[1] : wlo[1]);
      } else {
        w = ((c & 1) ? whi[2] : wlo[2]) * (((c >> 1) & 1) ? whi[1] : wlo[1]) * (((c >> 2) & 1) ? whi[0] : wlo[0]);
      }
      Tensor term = fetch(ic, mask) * w.unsqueeze(1);
      out = c == 0 ? term : out + term;
    }
  } else {
    // Bicubic (2-d): padding applies to each tap's coordinate, PyTorch's get_value_bounded.
    const GridCoord& gy = gc[0];
    const GridCoord& gx = gc[1];
    Tensor sx = gx.unnormalize(coord[1]), sy = gy.unnormalize(coord[0]);
    Tensor ix = floor(sx), iy = floor(sy);
    auto coeffs = [](const Tensor& t) {
      const double A = -0.75;
      std::vector<Tensor> c(4);
      Tensor x = t + 1;
      c[0] = ((x * A - 5 * A) * x + 8 * A) * x - 4 * A;
      c[1] = (t * (A + 2) - (A + 3)) * t * t + 1;
      x = 1 - t;
      c[2] = (x * (A + 2) - (A + 3)) * x * x + 1;
      x = 2 - t;
      c[3] = ((x * A - 5 * A) * x + 8 * A) * x - 4 * A;
      return c;
    };
    std::vector<Tensor> cx = coeffs(sx - ix), cy = coeffs(sy - iy);
    auto tap = [&](const GridCoord& gcd, const Tensor& base, int off) { return trunc(gcd.pad_coord(base + off)); };
    std::vector<Tensor> txs, tys;
    for (int j = 0; j < 4; ++j) {
      txs.push_back(tap(gx, ix, j - 1));
      tys.push_back(tap(gy, iy, j - 1));
    }
    for (int i = 0; i < 4; ++i) {
      Tensor row;
      for (int j = 0; j < 4; ++j) {
        Tensor mask;
        if (pad == 0)
          mask = logical_and(gy.inside(tys[static_cast<size_t>(i)]), gx.inside(txs[static_cast<size_t>(j)]));
        Tensor v = fetch({tys[static_cast<size_t>(i)], txs[static_cast<size_t>(j)]}, mask) *
                   cx[static_cast<size_t>(j)].unsqueeze(1);
        row = j == 0 ? v : row + v;
      }
      Tensor term = row * cy[static_cast<size_t>(i)].unsqueeze(1);
      out = i == 0 ? term : out + term;
    }
  }
  Shape os{N, C};
  for (int64_t s : out_sp) os.push_back(s);
  out = out.reshape(os);
  return half ? cast(out, dt) : out;
}

Tensor affine_grid(const Tensor& theta, const Shape& size, bool align_corners) {
  const char* api = "affine_grid";
  detail::check_defined(api, theta);
  KILN_CHECK(size.size() == 4 || size.size() == 5, api,
             "affine_grid only supports 4-d and 5-d sizes, for 2-d and 3-d affine transforms, got size " << size);
  const int64_t nsp = static_cast<int64_t>(size.size()) - 2;
  KILN_CHECK(is_floating(theta.dtype()), api, "expected a float theta, got " << dtype_name(theta.dtype()).data());
  KILN_CHECK(theta.dim() == 3 && theta.size(0) == size[0] && theta.size(1) == nsp && theta.size(2) == nsp + 1, api,
             "expected a batch of " << nsp << "-d affine matrices of shape [N, " << nsp << ", " << nsp + 1
                                    << "] for size " << size << ", got " << theta.shape());
  for (int64_t s : size) KILN_CHECK(s >= 0, api, "expected a non-negative size, got " << size);
  const TensorOptions to{.dtype = theta.dtype(), .device = theta.device()};
  auto lin = [&](int64_t n) {
    if (n <= 1) return zeros({n}, to);
    Tensor r = linspace(-1, 1, n, to);
    return align_corners ? r : r * Scalar(n - 1) / Scalar(n);
  };
  // Base grid [*sp, nsp + 1] with (x, y[, z], 1) in the last dim.
  Shape sp(size.begin() + 2, size.end());
  std::vector<Tensor> parts;
  for (int64_t c = 0; c < nsp; ++c) {
    const int64_t k = nsp - 1 - c;  // spatial dim that coordinate c runs along
    Shape vs(static_cast<size_t>(nsp), 1);
    vs[static_cast<size_t>(k)] = sp[static_cast<size_t>(k)];
    parts.push_back(lin(sp[static_cast<size_t>(k)]).reshape(vs).expand(sp));
  }
  parts.push_back(ones(sp, to));
  Tensor base = stack(parts, -1).reshape({1, -1, 1, nsp + 1});  // [1, P, 1, nsp + 1]
  Tensor grid = (base * theta.unsqueeze(1)).sum({-1});          // [N, P, nsp]
  Shape os{size[0]};
  for (int64_t s : sp) os.push_back(s);
  os.push_back(nsp);
  return grid.reshape(os);
}

// ---- pixel shuffle ------------------------------------------------------------------------

Tensor pixel_shuffle(const Tensor& x, int64_t r) {
  const char* api = "pixel_shuffle";
  detail::check_defined(api, x);
  KILN_CHECK(x.dim() >= 3, api, "expected an input of at least 3 dims, got shape " << x.shape());
  KILN_CHECK(r > 0, api, "upscale_factor must be greater than 0, got " << r);
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  KILN_CHECK(
      c % (r * r) == 0, api,
      "expects its input's 'channel' dimension to be divisible by the square of upscale_factor, but input.size(-3)="
          << c << " is not divisible by " << r * r);
  Shape lead(x.shape().begin(), x.shape().end() - 3);
  const int64_t nl = static_cast<int64_t>(lead.size());
  Shape s6 = lead;
  for (int64_t v : {c / (r * r), r, r, h, w}) s6.push_back(v);
  Dims perm;
  for (int64_t i = 0; i < nl; ++i) perm.push_back(i);
  for (int64_t v : {0, 3, 1, 4, 2}) perm.push_back(nl + v);
  Shape os = lead;
  for (int64_t v : {c / (r * r), h * r, w * r}) os.push_back(v);
  return x.reshape(s6).permute(perm).contiguous().reshape(os);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t r) {
  const char* api = "pixel_unshuffle";
  detail::check_defined(api, x);
  KILN_CHECK(x.dim() >= 3, api, "expected an input of at least 3 dims, got shape " << x.shape());
  KILN_CHECK(r > 0, api, "downscale_factor must be greater than 0, got " << r);
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  KILN_CHECK(
      h % r == 0 && w % r == 0, api,
      "expects height and width of its input (shape " << x.shape() << ") to be divisible by downscale_factor " << r);
  Shape lead(x.shape().begin(), x.shape().end() - 3);
  const int64_t nl = static_cast<int64_t>(lead.size());
  Shape s6 = lead;
  for (int64_t v : {c, h / r, r, w / r, r}) s6.push_back(v);
  Dims perm;
  for (int64_t i = 0; i < nl; ++i) perm.push_back(i);
  for (int64_t v : {0, 2, 4, 1, 3}) perm.push_back(nl + v);
  Shape os = lead;
  for (int64_t v : {c * r * r, h / r, w / r}) os.push_back(v);
  return x.reshape(s6).permute(perm).contiguous().reshape(os);
}

}  // namespace kiln::nn::functional
