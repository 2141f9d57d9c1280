// SPDX-License-Identifier: MIT OR Apache-2.0
// Host fast paths of kiln::vision's morphology, separable filters, median and grey conversion
// (image_host.h). Note [Row rings]: morphology and the median walk each plane one output row at
// a time; each source row is padded (and, for morphology, reduced along W) once, when it first
// enters a window, into slot row % k of a ring of k rows, and the output row is a k-way
// combination of ring rows. The window of output row y with k rows starting at y - a reads
// source rows in [y - a, y - a + k) only (borders clamp into that range), the k rows the ring
// holds at that time, so row y - a + o sits in slot ((y - a) mod k + o) mod k: one modulo per
// output row.
#include "vision/image_host.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/backend.h"
#include "core/parallel.h"
#include "kiln/ops.h"
#include "vision/image_simd.h"

namespace kiln::vision::detail {

bool host_fast(const Tensor& x) {
  return x.defined() && x.device().is_cpu() && (x.dtype() == f32 || x.dtype() == u8) && !x.requires_grad();
}

namespace {

template <class T>
const T* host_ptr(const Tensor& c) {
  const auto* base = static_cast<const char*>(host_storage_data(c));
  KILN_CHECK(base != nullptr, "vision", "a CPU tensor without host memory");
  return reinterpret_cast<const T*>(base + c.storage_offset() * static_cast<int64_t>(sizeof(T)));
}

template <class T>
T* host_out(const Tensor& y) {
  return const_cast<T*>(host_ptr<T>(y));
}

/// Index p of a row or column of n (n >= 1) under BORDER_REFLECT_101 (gfedcb|abcdefgh|gfedcba).
int64_t reflect101(int64_t p, int64_t n) {
  if (n == 1) return 0;
  while (p < 0 || p >= n) p = p < 0 ? -p : 2 * n - 2 - p;
  return p;
}

/// The ring of Note [Row rings]: k slots of `len` elements each, source rows prepared in order.
template <class T>
struct Ring {
  int64_t k, len, next = 0;  ///< next: the first source row not prepared yet
  std::vector<T> data;
  Ring(int64_t k_, int64_t len_) : k(k_), len(len_), data(static_cast<size_t>(k_ * len_)) {}
  T* slot(int64_t s) { return data.data() + s * len; }
  /// Prepares source rows up to `last` with prepare(row, slot memory), in order.
  template <class F>
  void advance(int64_t last, F&& prepare) {
    for (; next <= last; ++next) prepare(next, slot(next % k));
  }
  /// The slot memory of source row y - a + o (0 <= o < k) for output row y, base = (y - a) mod k.
  T* at(int64_t base, int64_t o) {
    const int64_t s = base + o;
    return slot(s >= k ? s - k : s);
  }
  static int64_t base_of(int64_t first, int64_t k) { return ((first % k) + k) % k; }
};

/// Calls f(plane, y0, y1) over row ranges covering every row of every plane, on the intra-op
/// threads (each range computes its own ring, so ranges are independent and results do not
/// depend on the thread count).
template <class F>
void for_rows(int64_t planes, int64_t h, int64_t w, const F& f) {
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(w, 1));
  parallel_for(planes * h, grain, [&](int64_t b, int64_t e) {
    while (b < e) {
      const int64_t p = b / h, y0 = b % h, y1 = std::min(h, y0 + (e - b));
      f(p, y0, y1);
      b += y1 - y0;
    }
  });
}

// ---- morphology ----------------------------------------------------------------------------------

/// A run of consecutive cells of the element: row i, columns [j, j + len).
struct Run {
  int64_t i, j, len;
  int64_t l = 0;  ///< sub-row of the ring slot holding windows of len (0: the padded row, len 1)
};

template <class T>
T identity(bool dilate) {
  if constexpr (std::is_same_v<T, float>)
    return dilate ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  else
    return dilate ? 0 : 255;
}

/// min or max over windows of `len` of row p (n + len - 1 elements) into out (n elements).
template <class T>
void window_minmax(const T* p, T* out, int64_t len, int64_t n, bool max, std::vector<T>& tmp) {
  const T* src[8];
  if (len <= 8) {
    for (int64_t j = 0; j < len; ++j) src[j] = p + j;
    minmax_rows(out, src, static_cast<int>(len), n, max);
    return;
  }
  // Doubling: runs of c -> 2c until 2c > len, then two overlapping runs of c cover len.
  const int64_t total = n + len - 1;
  tmp.assign(p, p + total);
  std::vector<T> next(static_cast<size_t>(total));
  int64_t c = 1;
  for (; 2 * c <= len; c *= 2) {
    src[0] = tmp.data(), src[1] = tmp.data() + c;
    minmax_rows(next.data(), src, 2, total - 2 * c + 1, max);
    std::swap(tmp, next);
  }
  src[0] = tmp.data(), src[1] = tmp.data() + (len - c);
  minmax_rows(out, src, 2, n, max);
}

/// One erosion or dilation of a plane. A ring slot holds a source row padded with the identity
/// and, after it, its window min/max for each distinct run length (lens[l - 1] in sub-row l).
template <class T>
void morph_plane(const T* src, T* dst, int64_t h, int64_t w, const std::vector<Run>& runs,
                 const std::vector<int64_t>& lens, int64_t kh, int64_t kw, bool dilate, int64_t y0, int64_t y1) {
  const int64_t ay = kh / 2, ax = kw / 2, pw = w + kw - 1;
  const T fill = identity<T>(dilate);
  Ring<T> ring(kh, pw * static_cast<int64_t>(lens.size() + 1));
  ring.next = std::max<int64_t>(0, y0 - ay);
  std::vector<T> tmp;
  auto prepare = [&](int64_t sy, T* p) {
    std::fill(p, p + ax, fill);
    std::memcpy(p + ax, src + sy * w, static_cast<size_t>(w) * sizeof(T));
    std::fill(p + ax + w, p + pw, fill);
    for (size_t l = 0; l < lens.size(); ++l)
      window_minmax(p, p + static_cast<int64_t>(l + 1) * pw, lens[l], pw - lens[l] + 1, dilate, tmp);
  };
  std::vector<const T*> ptrs(runs.size());
  for (int64_t y = y0; y < y1; ++y) {
    ring.advance(std::min(h - 1, y - ay + kh - 1), prepare);
    const int64_t base = Ring<T>::base_of(y - ay, kh);
    int k = 0;
    for (const Run& r : runs) {
      const int64_t sy = y + r.i - ay;
      if (sy < 0 || sy >= h) continue;
      ptrs[static_cast<size_t>(k++)] = ring.at(base, r.i) + r.l * pw + r.j;
    }
    T* out = dst + y * w;
    if (k == 0)
      std::fill(out, out + w, fill);
    else
      minmax_rows(out, ptrs.data(), k, w, dilate);
  }
}

/// One erosion or dilation of a plane by a full kh x kw rectangle, separably: the min (max) of
/// the window's rows into a row padded with the identity, then along the row into dst.
template <class T>
void morph_rect_plane(const T* src, T* dst, int64_t h, int64_t w, int64_t kh, int64_t kw, bool dilate, int64_t y0,
                      int64_t y1) {
  const int64_t ay = kh / 2, ax = kw / 2;
  std::vector<T> row(static_cast<size_t>(w + kw - 1), identity<T>(dilate));
  std::vector<const T*> vp(static_cast<size_t>(kh)), hp(static_cast<size_t>(kw));
  for (int64_t j = 0; j < kw; ++j) hp[static_cast<size_t>(j)] = row.data() + j;
  for (int64_t y = y0; y < y1; ++y) {
    int k = 0;
    for (int64_t sy = std::max<int64_t>(y - ay, 0); sy < std::min(h, y - ay + kh); ++sy)
      vp[static_cast<size_t>(k++)] = src + sy * w;
    minmax_rows(row.data() + ax, vp.data(), k, w, dilate);
    minmax_rows(dst + y * w, hp.data(), static_cast<int>(kw), w, dilate);
  }
}

template <class T>
void morph_planes(const T* src, T* dst, int64_t planes, int64_t h, int64_t w, const std::vector<Run>& runs, int64_t kh,
                  int64_t kw, bool dilate, int64_t iterations) {
  std::vector<int64_t> lens;
  for (const Run& r : runs)
    if (r.len > 1 && std::find(lens.begin(), lens.end(), r.len) == lens.end()) lens.push_back(r.len);
  std::vector<Run> rs = runs;
  for (Run& r : rs) r.l = r.len == 1 ? 0 : std::find(lens.begin(), lens.end(), r.len) - lens.begin() + 1;
  const bool rect = static_cast<int64_t>(runs.size()) == kh &&
                    std::all_of(runs.begin(), runs.end(), [&](const Run& r) { return r.len == kw; });
  std::vector<T> a, b;  // between iterations
  const T* in = src;
  for (int64_t it = 0; it < iterations; ++it) {
    std::vector<T>& buf = it % 2 ? b : a;
    if (it < iterations - 1) buf.resize(static_cast<size_t>(planes * h * w));
    T* out = it == iterations - 1 ? dst : buf.data();
    for_rows(planes, h, w, [&](int64_t p, int64_t y0, int64_t y1) {
      if (rect)
        morph_rect_plane(in + p * h * w, out + p * h * w, h, w, kh, kw, dilate, y0, y1);
      else
        morph_plane(in + p * h * w, out + p * h * w, h, w, rs, lens, kh, kw, dilate, y0, y1);
    });
    in = out;
  }
}

}  // namespace

Tensor morph_host(const Tensor& x, const std::vector<uint8_t>& cells, int64_t kh, int64_t kw, bool dilate,
                  int64_t iterations) {
  const Tensor c = x.contiguous();
  if (iterations == 0) return c.clone();
  Tensor y = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  if (x.numel() == 0) return y;
  std::vector<Run> runs;
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw;) {
      if (!cells[static_cast<size_t>(i * kw + j)]) {
        ++j;
        continue;
      }
      int64_t e = j;
      while (e < kw && cells[static_cast<size_t>(i * kw + e)]) ++e;
      runs.push_back({i, j, e - j});
      j = e;
    }
  if (runs.empty()) {  // an empty element leaves the image as it is
    y.copy_(c);
    return y;
  }
  const int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
  if (x.dtype() == u8)
    morph_planes(host_ptr<uint8_t>(c), host_out<uint8_t>(y), planes, h, w, runs, kh, kw, dilate, iterations);
  else
    morph_planes(host_ptr<float>(c), host_out<float>(y), planes, h, w, runs, kh, kw, dilate, iterations);
  return y;
}

// ---- separable filters ---------------------------------------------------------------------------

namespace {

/// One separable term of a filter, weights as f32 (ky already times the scale).
struct Term {
  std::vector<float> kx, ky;
};

/// Rows [y0, y1) of one plane filtered by a sum of separable terms: for each output row, each
/// term's column sums (its nonzero taps along H, straight from the source rows) go into a row
/// padded as BORDER_REFLECT_101, then one dot product along W over every term's nonzero taps
/// gives the output row. Zero taps are left out (Sobel's middle column, a Laplacian's corners).
template <class T, class O>
void filter_rows(const T* s, O* d, int64_t h, int64_t w, const std::vector<Term>& terms, float bias, int64_t y0,
                 int64_t y1) {
  int64_t ax = 0;
  for (const Term& t : terms) ax = std::max<int64_t>(ax, static_cast<int64_t>(t.kx.size()) / 2);
  const int64_t pw = w + 2 * ax;
  const size_t nt = terms.size();
  std::vector<float> pads(nt * static_cast<size_t>(pw)), row(static_cast<size_t>(w)), hwt;
  std::vector<std::vector<int64_t>> voff(nt);
  std::vector<std::vector<float>> vw(nt);
  std::vector<const float*> hp;
  std::vector<bool> direct(nt, false);  // a 1 x 1 term of an f32 image reads the source row itself
  std::vector<size_t> direct_at(nt, 0);
  size_t most = 0;
  for (size_t t = 0; t < nt; ++t) {
    const auto kt = static_cast<int64_t>(terms[t].ky.size()), kw = static_cast<int64_t>(terms[t].kx.size());
    if (std::is_same_v<T, float> && kt == 1 && kw == 1) {
      direct[t] = true, direct_at[t] = hp.size();
      hp.push_back(nullptr), hwt.push_back(terms[t].kx[0] * terms[t].ky[0]);
      continue;
    }
    for (int64_t i = 0; i < kt; ++i)
      if (const float v = terms[t].ky[static_cast<size_t>(i)]; v != 0)
        voff[t].push_back(i - kt / 2), vw[t].push_back(v);
    const float* c = pads.data() + static_cast<int64_t>(t) * pw + ax;
    for (int64_t j = 0; j < kw; ++j)
      if (const float v = terms[t].kx[static_cast<size_t>(j)]; v != 0) hp.push_back(c - kw / 2 + j), hwt.push_back(v);
    most = std::max(most, voff[t].size());
  }
  std::vector<const T*> vp(most);
  for (int64_t y = y0; y < y1; ++y) {
    for (size_t t = 0; t < nt; ++t) {
      if (direct[t]) {
        if constexpr (std::is_same_v<T, float>) hp[direct_at[t]] = s + y * w;
        continue;
      }
      float* c = pads.data() + static_cast<int64_t>(t) * pw + ax;
      for (size_t i = 0; i < voff[t].size(); ++i) vp[i] = s + reflect101(y + voff[t][i], h) * w;
      dot_rows(c, vp.data(), vw[t].data(), static_cast<int>(vw[t].size()), 0.0f, w);
      for (int64_t j = 1; j <= ax; ++j) {
        c[-j] = c[reflect101(-j, w)];
        c[w - 1 + j] = c[reflect101(w - 1 + j, w)];
      }
    }
    if constexpr (std::is_same_v<O, float>) {
      dot_rows(d + y * w, hp.data(), hwt.data(), static_cast<int>(hp.size()), bias, w);
    } else {
      dot_rows(row.data(), hp.data(), hwt.data(), static_cast<int>(hp.size()), bias, w);
      f32_to_u8(d + y * w, row.data(), w);
    }
  }
}

template <class T, class O>
void filter_planes(const T* src, O* dst, int64_t planes, int64_t h, int64_t w, const std::vector<Term>& terms,
                   float bias) {
  for_rows(planes, h, w, [&](int64_t p, int64_t y0, int64_t y1) {
    filter_rows(src + p * h * w, dst + p * h * w, h, w, terms, bias, y0, y1);
  });
}

template <class T>
void filter_to(const Tensor& c, Tensor& y, const std::vector<Term>& terms, float bias) {
  const int64_t planes = c.size(0) * c.size(1), h = c.size(2), w = c.size(3);
  if (y.dtype() == u8)
    filter_planes(host_ptr<T>(c), host_out<uint8_t>(y), planes, h, w, terms, bias);
  else
    filter_planes(host_ptr<T>(c), host_out<float>(y), planes, h, w, terms, bias);
}

}  // namespace

Tensor separable_host(const Tensor& x, const std::vector<std::pair<std::vector<double>, std::vector<double>>>& terms,
                      DType out, double scale, double delta) {
  const Tensor c = x.contiguous();
  Tensor y = empty(x.shape(), {.dtype = out, .device = x.device()});
  if (x.numel() == 0) return y;
  std::vector<Term> ft;
  for (const auto& [kx, ky] : terms) {
    Term t{std::vector<float>(kx.begin(), kx.end()), {}};
    for (double v : ky) t.ky.push_back(static_cast<float>(v * scale));
    ft.push_back(std::move(t));
  }
  if (x.dtype() == u8)
    filter_to<uint8_t>(c, y, ft, static_cast<float>(delta));
  else
    filter_to<float>(c, y, ft, static_cast<float>(delta));
  return y;
}

Tensor separable_host(const Tensor& x, const std::vector<double>& kx, const std::vector<double>& ky, DType out,
                      double scale, double delta) {
  return separable_host(x, {{kx, ky}}, out, scale, delta);
}

// ---- median --------------------------------------------------------------------------------------

namespace {

template <class T>
void median_planes(const T* src, T* dst, int64_t planes, int64_t h, int64_t w, int64_t k) {
  const int64_t r = k / 2, pw = w + k - 1;
  for_rows(planes, h, w, [&](int64_t p, int64_t y0, int64_t y1) {
    Ring<T> pad(k, pw);
    std::vector<const T*> ptrs(static_cast<size_t>(k * k));
    const T* s = src + p * h * w;
    auto prepare = [&](int64_t sy, T* row) {
      std::fill(row, row + r, s[sy * w]);
      std::memcpy(row + r, s + sy * w, static_cast<size_t>(w) * sizeof(T));
      std::fill(row + r + w, row + pw, s[sy * w + w - 1]);
    };
    pad.next = std::max<int64_t>(0, y0 - r);
    for (int64_t y = y0; y < y1; ++y) {
      pad.advance(std::min(h - 1, y + r), prepare);
      const int64_t base = Ring<T>::base_of(y - r, k);
      for (int64_t dy = 0; dy < k; ++dy) {
        const T* row = pad.at(base, std::clamp<int64_t>(y + dy - r, 0, h - 1) - (y - r));
        for (int64_t dx = 0; dx < k; ++dx) ptrs[static_cast<size_t>(dy * k + dx)] = row + dx;
      }
      median_rows(dst + p * h * w + y * w, ptrs.data(), static_cast<int>(k * k), w);
    }
  });
}

}  // namespace

Tensor median_host_network(const Tensor& x, int64_t ksize) {
  const Tensor c = x.contiguous();
  Tensor y = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  if (x.numel() == 0) return y;
  const int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
  if (x.dtype() == u8)
    median_planes(host_ptr<uint8_t>(c), host_out<uint8_t>(y), planes, h, w, ksize);
  else
    median_planes(host_ptr<float>(c), host_out<float>(y), planes, h, w, ksize);
  return y;
}

namespace {

/// Huang's median of u8 planes: along each row a 256-bin histogram of the window slides by one
/// column (k values out, k in), and the median moves from the last one, tracking how many
/// values of the window lie below it.
void median_huang(const uint8_t* src, uint8_t* dst, int64_t planes, int64_t h, int64_t w, int64_t k) {
  const int64_t r = k / 2, half = k * k / 2;
  for_rows(planes, h, w, [&](int64_t p, int64_t y0, int64_t y1) {
    std::vector<const uint8_t*> rows(static_cast<size_t>(k));
    for (int64_t y = y0; y < y1; ++y) {
      for (int64_t dy = 0; dy < k; ++dy)
        rows[static_cast<size_t>(dy)] = src + p * h * w + std::clamp<int64_t>(y + dy - r, 0, h - 1) * w;
      uint8_t* d = dst + p * h * w + y * w;
      int64_t hist[256] = {};
      for (int64_t dx = -r; dx <= r; ++dx)
        for (const uint8_t* row : rows) ++hist[row[std::clamp<int64_t>(dx, 0, w - 1)]];
      int64_t m = 0, below = 0;  // the median and how many values are below it
      while (below + hist[m] <= half) below += hist[m++];
      d[0] = static_cast<uint8_t>(m);
      for (int64_t x = 1; x < w; ++x) {
        const int64_t out = std::max<int64_t>(x - r - 1, 0), in = std::min<int64_t>(x + r, w - 1);
        for (const uint8_t* row : rows) {
          --hist[row[out]];
          below -= row[out] < m;
          ++hist[row[in]];
          below += row[in] < m;
        }
        while (below > half) below -= hist[--m];
        while (below + hist[m] <= half) below += hist[m++];
        d[x] = static_cast<uint8_t>(m);
      }
    }
  });
}

}  // namespace

Tensor median_host_histogram(const Tensor& x, int64_t ksize) {
  const Tensor c = x.contiguous();
  Tensor y = empty(x.shape(), {.dtype = u8, .device = x.device()});
  if (x.numel() == 0) return y;
  median_huang(host_ptr<uint8_t>(c), host_out<uint8_t>(y), x.size(0) * x.size(1), x.size(2), x.size(3), ksize);
  return y;
}

// ---- grey ----------------------------------------------------------------------------------------

Tensor gray_host(const Tensor& x) {
  const Tensor c = x.contiguous();
  const int64_t n = x.size(0), area = x.size(2) * x.size(3);
  Tensor y = empty({n, 1, x.size(2), x.size(3)}, {.dtype = x.dtype(), .device = x.device()});
  if (y.numel() == 0) return y;
  const bool is_u8 = x.dtype() == u8;
  const void* in = is_u8 ? static_cast<const void*>(host_ptr<uint8_t>(c)) : host_ptr<float>(c);
  void* out = is_u8 ? static_cast<void*>(host_out<uint8_t>(y)) : host_out<float>(y);
  // Blocks of pixels of every image, on the intra-op threads.
  const int64_t block = 1 << 14, per = (area + block - 1) / block;
  parallel_for(n * per, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      const int64_t img = i / per, at = i % per * block, len = std::min(block, area - at);
      const int64_t src = img * 3 * area + at, dst = img * area + at;
      if (is_u8) {
        const auto* s = static_cast<const uint8_t*>(in) + src;
        gray_u8(static_cast<uint8_t*>(out) + dst, s, s + area, s + 2 * area, len);
      } else {
        const auto* s = static_cast<const float*>(in) + src;
        const float* ptrs[3] = {s, s + area, s + 2 * area};
        static const float wts[3] = {0.299f, 0.587f, 0.114f};
        dot_rows(static_cast<float*>(out) + dst, ptrs, wts, 3, 0.0f, len);
      }
    }
  });
  return y;
}

}  // namespace kiln::vision::detail
