// SPDX-License-Identifier: MIT OR Apache-2.0
// Host fast paths of kiln::vision's morphology, separable filters, median and grey conversion
// (image_host.h). Note [Row rings]: each plane is walked one output row at a time; the source
// rows it needs are padded (and, for filters, filtered along W) once into a ring of k rows keyed
// by source row (slot = row % k), and the output row is a k-way combination of ring rows. The
// rows a window needs form a contiguous range of at most k source rows (borders reflect or clamp
// into it), so their slots differ and computing one never evicts another.
#include "vision/image_host.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <type_traits>

#include "core/backend.h"
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

/// The ring of Note [Row rings]: k rows of `len` elements, slot = row % k.
template <class T>
struct Ring {
  int64_t k, len;
  std::vector<T> data;
  std::vector<int64_t> row;
  Ring(int64_t k_, int64_t len_) : k(k_), len(len_), data(static_cast<size_t>(k_ * len_)), row(k_, -1) {}
  T* slot(int64_t r) { return data.data() + (r % k) * len; }
  /// The slot of source row r and whether it must be (re)computed.
  T* get(int64_t r, bool& fresh) {
    fresh = row[static_cast<size_t>(r % k)] != r;
    row[static_cast<size_t>(r % k)] = r;
    return slot(r);
  }
};

// ---- morphology ----------------------------------------------------------------------------------

/// A run of consecutive cells of the element: row i, columns [j, j + len).
struct Run {
  int64_t i, j, len;
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

template <class T>
void morph_plane(const T* src, T* dst, int64_t h, int64_t w, const std::vector<Run>& runs, int64_t kh, int64_t kw,
                 bool dilate) {
  const int64_t ay = kh / 2, ax = kw / 2, pw = w + kw - 1;
  const T fill = identity<T>(dilate);
  std::vector<int64_t> lens;
  for (const Run& r : runs)
    if (std::find(lens.begin(), lens.end(), r.len) == lens.end()) lens.push_back(r.len);
  Ring<T> pad(kh, pw);
  std::vector<Ring<T>> hmin(lens.size(), Ring<T>(kh, pw));
  std::vector<const T*> ptrs(runs.size());
  std::vector<T> tmp;
  for (int64_t y = 0; y < h; ++y) {
    int k = 0;
    for (const Run& r : runs) {
      const int64_t sy = y + r.i - ay;
      if (sy < 0 || sy >= h) continue;
      bool fresh = false;
      T* p = pad.get(sy, fresh);
      if (fresh) {
        std::fill(p, p + ax, fill);
        std::memcpy(p + ax, src + sy * w, static_cast<size_t>(w) * sizeof(T));
        std::fill(p + ax + w, p + pw, fill);
      }
      const size_t li = static_cast<size_t>(std::find(lens.begin(), lens.end(), r.len) - lens.begin());
      T* hr = p;
      if (r.len > 1) {
        hr = hmin[li].get(sy, fresh);
        if (fresh) window_minmax(p, hr, r.len, pw - r.len + 1, dilate, tmp);
      }
      ptrs[static_cast<size_t>(k++)] = hr + r.j;
    }
    T* out = dst + y * w;
    if (k == 0)
      std::fill(out, out + w, fill);
    else
      minmax_rows(out, ptrs.data(), k, w, dilate);
  }
}

template <class T>
void morph_planes(const T* src, T* dst, int64_t planes, int64_t h, int64_t w, const std::vector<Run>& runs, int64_t kh,
                  int64_t kw, bool dilate, int64_t iterations) {
  std::vector<T> a, b;
  for (int64_t p = 0; p < planes; ++p) {
    const T* in = src + p * h * w;
    T* out = dst + p * h * w;
    for (int64_t it = 0; it < iterations; ++it) {
      T* o = it == iterations - 1 ? out
                                  : (it % 2 ? (b.resize(static_cast<size_t>(h * w)), b.data())
                                            : (a.resize(static_cast<size_t>(h * w)), a.data()));
      morph_plane(in, o, h, w, runs, kh, kw, dilate);
      in = o;
    }
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

/// The filter of Note [Row rings] with a ring slot holding one W-filtered row per term; the
/// output row is one dot product over every term's rows.
template <class T, class O>
void filter_planes(const T* src, O* dst, int64_t planes, int64_t h, int64_t w, const std::vector<Term>& terms,
                   float bias) {
  int64_t ax = 0, kh = 1, nv = 0;
  for (const Term& t : terms) {
    ax = std::max<int64_t>(ax, static_cast<int64_t>(t.kx.size()) / 2);
    kh = std::max<int64_t>(kh, static_cast<int64_t>(t.ky.size()));
    nv += static_cast<int64_t>(t.ky.size());
  }
  const int64_t nt = static_cast<int64_t>(terms.size()), pw = w + 2 * ax;
  std::vector<float> pad(static_cast<size_t>(pw)), row(static_cast<size_t>(w)), wv;
  Ring<float> hr(kh, nt * w);
  std::vector<std::vector<const float*>> hptrs(terms.size());
  for (size_t t = 0; t < terms.size(); ++t) {
    const auto kw = static_cast<int64_t>(terms[t].kx.size());
    for (int64_t j = 0; j < kw; ++j) hptrs[t].push_back(pad.data() + ax - kw / 2 + j);
    wv.insert(wv.end(), terms[t].ky.begin(), terms[t].ky.end());
  }
  std::vector<const float*> ptrs(static_cast<size_t>(nv));
  for (int64_t p = 0; p < planes; ++p) {
    std::fill(hr.row.begin(), hr.row.end(), -1);
    const T* s = src + p * h * w;
    O* d = dst + p * h * w;
    for (int64_t y = 0; y < h; ++y) {
      size_t v = 0;
      for (int64_t t = 0; t < nt; ++t) {
        const auto kt = static_cast<int64_t>(terms[static_cast<size_t>(t)].ky.size());
        for (int64_t i = 0; i < kt; ++i) {
          const int64_t sy = reflect101(y + i - kt / 2, h);
          bool fresh = false;
          float* r = hr.get(sy, fresh);
          if (fresh) {
            float* c = pad.data() + ax;
            if constexpr (std::is_same_v<T, uint8_t>)
              u8_to_f32(c, s + sy * w, w);
            else
              std::memcpy(c, s + sy * w, static_cast<size_t>(w) * sizeof(float));
            for (int64_t j = 1; j <= ax; ++j) {
              c[-j] = c[reflect101(-j, w)];
              c[w - 1 + j] = c[reflect101(w - 1 + j, w)];
            }
            for (size_t u = 0; u < terms.size(); ++u)
              dot_rows(r + static_cast<int64_t>(u) * w, hptrs[u].data(), terms[u].kx.data(),
                       static_cast<int>(terms[u].kx.size()), 0.0f, w);
          }
          ptrs[v++] = r + t * w;
        }
      }
      if constexpr (std::is_same_v<O, float>) {
        dot_rows(d + y * w, ptrs.data(), wv.data(), static_cast<int>(nv), bias, w);
      } else {
        dot_rows(row.data(), ptrs.data(), wv.data(), static_cast<int>(nv), bias, w);
        f32_to_u8(d + y * w, row.data(), w);
      }
    }
  }
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

/// A compare-exchange network leaving the median of n (odd, <= 64) values in element n / 2:
/// Batcher's odd-even merge sort for any n, less the exchanges the median does not depend on.
const std::vector<uint8_t>& median_network(int n) {
  static std::mutex mu;
  static std::map<int, std::vector<uint8_t>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  std::vector<std::pair<int, int>> net;
  for (int p = 1; p < n; p <<= 1)
    for (int k = p; k >= 1; k >>= 1)
      for (int j = k % p; j + k < n; j += 2 * k)
        for (int i = 0; i < std::min(k, n - j - k); ++i)
          if ((i + j) / (2 * p) == (i + j + k) / (2 * p)) net.emplace_back(i + j, i + j + k);
  std::vector<bool> need(static_cast<size_t>(n), false);
  need[static_cast<size_t>(n / 2)] = true;
  std::vector<uint8_t> kept;
  for (auto e = net.rbegin(); e != net.rend(); ++e) {
    if (!need[static_cast<size_t>(e->first)] && !need[static_cast<size_t>(e->second)]) continue;
    need[static_cast<size_t>(e->first)] = need[static_cast<size_t>(e->second)] = true;
    kept.push_back(static_cast<uint8_t>(e->second));
    kept.push_back(static_cast<uint8_t>(e->first));
  }
  std::reverse(kept.begin(), kept.end());  // pairs back in order, each (first, second)
  return cache.emplace(n, std::move(kept)).first->second;
}

template <class T>
void median_planes(const T* src, T* dst, int64_t planes, int64_t h, int64_t w, int64_t k) {
  const int64_t r = k / 2, pw = w + k - 1;
  const std::vector<uint8_t>& net = median_network(static_cast<int>(k * k));
  Ring<T> pad(k, pw);
  std::vector<const T*> ptrs(static_cast<size_t>(k * k));
  for (int64_t p = 0; p < planes; ++p) {
    std::fill(pad.row.begin(), pad.row.end(), -1);
    const T* s = src + p * h * w;
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t dy = 0; dy < k; ++dy) {
        const int64_t sy = std::clamp<int64_t>(y + dy - r, 0, h - 1);
        bool fresh = false;
        T* row = pad.get(sy, fresh);
        if (fresh) {
          std::fill(row, row + r, s[sy * w]);
          std::memcpy(row + r, s + sy * w, static_cast<size_t>(w) * sizeof(T));
          std::fill(row + r + w, row + pw, s[sy * w + w - 1]);
        }
        for (int64_t dx = 0; dx < k; ++dx) ptrs[static_cast<size_t>(dy * k + dx)] = row + dx;
      }
      median_rows(dst + p * h * w + y * w, ptrs.data(), static_cast<int>(k * k), net.data(),
                  static_cast<int>(net.size() / 2), w);
    }
  }
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

// ---- grey ----------------------------------------------------------------------------------------

Tensor gray_host(const Tensor& x) {
  const Tensor c = x.contiguous();
  const int64_t n = x.size(0), area = x.size(2) * x.size(3);
  Tensor y = empty({n, 1, x.size(2), x.size(3)}, {.dtype = x.dtype(), .device = x.device()});
  if (y.numel() == 0) return y;
  for (int64_t b = 0; b < n; ++b) {
    if (x.dtype() == u8) {
      const uint8_t* s = host_ptr<uint8_t>(c) + b * 3 * area;
      uint8_t* d = host_out<uint8_t>(y) + b * area;
      for (int64_t i = 0; i < area; ++i)
        d[i] = static_cast<uint8_t>((s[i] * 4899 + s[area + i] * 9617 + s[2 * area + i] * 1868 + 8192) >> 14);
    } else {
      const float* s = host_ptr<float>(c) + b * 3 * area;
      const float* ptrs[3] = {s, s + area, s + 2 * area};
      static const float wts[3] = {0.299f, 0.587f, 0.114f};
      dot_rows(host_out<float>(y) + b * area, ptrs, wts, 3, 0.0f, area);
    }
  }
  return y;
}

}  // namespace kiln::vision::detail
