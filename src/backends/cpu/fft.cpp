// SPDX-License-Identifier: MIT OR Apache-2.0
// FFT kernels: Fft (complex to complex), Rfft (real to half spectrum), Irfft (half spectrum to
// real), along one dim of a strided view (ops.def documents the attributes).
//
// Note [FFT plans]
// A transform of length n runs a plan cached per (n, compute type). Lengths whose prime factors
// are all <= kMaxRadix use an iterative mixed-radix Stockham FFT (autosort, out of place,
// ping-pong between the line buffer and a scratch buffer; radix 4, 2, 3, 5 butterflies written
// out, other small primes by a direct DFT of that radix). Other lengths use Bluestein's chirp-z
// transform: a circular convolution of length m = 2^a 3^b 5^c >= 2n - 1 through the
// mixed-radix plan, always computed in f64. Twiddles are computed in f64 and rounded once to
// the compute type: f32 (and f16/bf16, through f32) computes in f32 for smooth lengths, f64 in
// f64. Lines (all elements along `dim` for one index of the other dims) are gathered in blocks
// of one SIMD width (one line per vector lane), transformed together and scattered; lines never
// mix and blocks depend only on the shape, so the parallel split never changes a result.
// Inverse transforms conjugate on the way in and out. Real transforms of even length run a
// complex transform of half the length (Note [Real transforms]).
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <numbers>
#include <unordered_map>
#include <vector>

#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/reduce_util.h"
#include "ir/attrs.h"
#include "kiln/error.h"

namespace kiln::cpu {

namespace {

/// Largest prime factor handled by the mixed-radix plan; longer primes go through Bluestein.
constexpr int64_t kMaxRadix = 31;

/// exp(-2 pi i k / n) in f64, with k reduced to [0, n) first.
inline void root(int64_t k, int64_t n, double& re, double& im) {
  k %= n;
  if (k < 0) k += n;
  const double a = 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
  re = std::cos(a);
  im = -std::sin(a);
  // Exact values on the axes (cos(pi/2) is 6e-17 otherwise).
  if (4 * k == n) re = 0, im = -1;
  if (2 * k == n) re = -1, im = 0;
  if (4 * k == 3 * n) re = 0, im = 1;
}

/// Factors of n for the Stockham passes: 4s first, then 2, 3 and the other primes ascending.
/// Returns an empty list when a prime factor exceeds kMaxRadix.
std::vector<int> factorize(int64_t n) {
  std::vector<int> f;
  while (n % 4 == 0) f.push_back(4), n /= 4;
  if (n % 2 == 0) f.push_back(2), n /= 2;
  for (int64_t p = 3; p * p <= n; p += 2)
    while (n % p == 0) {
      if (p > kMaxRadix) return {};
      f.push_back(static_cast<int>(p));
      n /= p;
    }
  if (n > 1) {
    if (n > kMaxRadix) return {};
    f.push_back(static_cast<int>(n));
  }
  return f;
}

bool is_smooth(int64_t n) { return n <= 1 || !factorize(n).empty(); }

/// One Stockham pass: radix R over blocks of ns already-transformed elements.
struct Pass {
  int radix;
  int64_t ns;
  size_t tw;     // offset (complex elements) of this pass's twiddles: ns * (R - 1) of them
  size_t roots;  // offset of the R roots of unity (generic radix only)
};

/// The forward transform of one length (interleaved re/im buffers of 2n values of C).
template <class C>
struct Plan {
  int64_t n = 0;
  std::vector<Pass> passes;
  std::vector<C> tw;  // interleaved complex
  // Bluestein (C = double only): m, the chirp exp(-pi i k^2 / n) and FFT_m(b) / m.
  bool bluestein = false;
  int64_t m = 0;
  std::shared_ptr<const Plan<double>> inner;
  std::vector<double> chirp, bhat;

  /// C values of scratch that forward() needs.
  size_t scratch_size() const { return bluestein ? static_cast<size_t>(4 * m + inner->scratch_size()) : 2 * n; }

  void forward(C* x, C* scratch) const { forward_any(x, scratch); }

  /// The transform of 2n values of V (C, or a vector of C with one line per lane); scratch
  /// holds scratch_size() values of V.
  template <class V>
  void forward_any(V* x, V* scratch) const {
    if (n <= 1) return;
    if (bluestein) {
      if constexpr (std::is_same_v<C, double>) bluestein_forward(x, scratch);
      return;
    }
    forward_direct(x, scratch);
  }

  /// The mixed-radix transform (not Bluestein) of a buffer of 2n values of V: C itself, or a
  /// vector of C holding one line per lane.
  template <class V>
  void forward_direct(V* x, V* scratch) const {
    if (n <= 1) return;
    V* a = x;
    V* b = scratch;
    for (const Pass& p : passes) {
      run_pass<V>(p, a, b);
      std::swap(a, b);
    }
    if (a != x) std::memcpy(static_cast<void*>(x), a, sizeof(V) * 2 * static_cast<size_t>(n));
  }

 private:
  template <class V>
  void run_pass(const Pass& p, const V* src, V* dst) const {
    const int R = p.radix;
    const int64_t ns = p.ns, mm = n / R, nk = mm / ns;
    const C* w = tw.data() + 2 * p.tw;
    switch (R) {
      case 4:
        for (int64_t k = 0; k < nk; ++k)
          for (int64_t s = 0; s < ns; ++s) {
            const int64_t j = k * ns + s;
            V v[8];
            load<4>(src, j, mm, s, w, ns > 1, v);
            const V t0r = v[0] + v[4], t0i = v[1] + v[5], t1r = v[0] - v[4], t1i = v[1] - v[5];
            const V t2r = v[2] + v[6], t2i = v[3] + v[7];
            const V t3r = v[3] - v[7], t3i = v[6] - v[2];  // (v1 - v3) * -i
            V* o = dst + 2 * (k * ns * 4 + s);
            const int64_t st = 2 * ns;
            o[0] = t0r + t2r, o[1] = t0i + t2i;
            o[st] = t1r + t3r, o[st + 1] = t1i + t3i;
            o[2 * st] = t0r - t2r, o[2 * st + 1] = t0i - t2i;
            o[3 * st] = t1r - t3r, o[3 * st + 1] = t1i - t3i;
          }
        break;
      case 2:
        for (int64_t k = 0; k < nk; ++k)
          for (int64_t s = 0; s < ns; ++s) {
            const int64_t j = k * ns + s;
            V v[4];
            load<2>(src, j, mm, s, w, ns > 1, v);
            V* o = dst + 2 * (k * ns * 2 + s);
            const int64_t st = 2 * ns;
            o[0] = v[0] + v[2], o[1] = v[1] + v[3];
            o[st] = v[0] - v[2], o[st + 1] = v[1] - v[3];
          }
        break;
      case 3: {
        const C h = static_cast<C>(std::sqrt(3.0) / 2);
        for (int64_t k = 0; k < nk; ++k)
          for (int64_t s = 0; s < ns; ++s) {
            const int64_t j = k * ns + s;
            V v[6];
            load<3>(src, j, mm, s, w, ns > 1, v);
            const V t1r = v[2] + v[4], t1i = v[3] + v[5];
            const V t2r = v[0] - C(0.5) * t1r, t2i = v[1] - C(0.5) * t1i;
            const V dr = h * (v[3] - v[5]), di = -h * (v[2] - v[4]);  // -i h (v1 - v2)
            V* o = dst + 2 * (k * ns * 3 + s);
            const int64_t st = 2 * ns;
            o[0] = v[0] + t1r, o[1] = v[1] + t1i;
            o[st] = t2r + dr, o[st + 1] = t2i + di;
            o[2 * st] = t2r - dr, o[2 * st + 1] = t2i - di;
          }
        break;
      }
      case 5: {
        const C c1 = static_cast<C>(std::cos(2 * std::numbers::pi / 5)),
                c2 = static_cast<C>(std::cos(4 * std::numbers::pi / 5));
        const C s1 = static_cast<C>(std::sin(2 * std::numbers::pi / 5)),
                s2 = static_cast<C>(std::sin(4 * std::numbers::pi / 5));
        for (int64_t k = 0; k < nk; ++k)
          for (int64_t s = 0; s < ns; ++s) {
            const int64_t j = k * ns + s;
            V v[10];
            load<5>(src, j, mm, s, w, ns > 1, v);
            const V t1r = v[2] + v[8], t1i = v[3] + v[9], t2r = v[4] + v[6], t2i = v[5] + v[7];
            const V t3r = v[2] - v[8], t3i = v[3] - v[9], t4r = v[4] - v[6], t4i = v[5] - v[7];
            const V a1r = v[0] + c1 * t1r + c2 * t2r, a1i = v[1] + c1 * t1i + c2 * t2i;
            const V a2r = v[0] + c2 * t1r + c1 * t2r, a2i = v[1] + c2 * t1i + c1 * t2i;
            const V b1r = s1 * t3r + s2 * t4r, b1i = s1 * t3i + s2 * t4i;
            const V b2r = s2 * t3r - s1 * t4r, b2i = s2 * t3i - s1 * t4i;
            V* o = dst + 2 * (k * ns * 5 + s);
            const int64_t st = 2 * ns;
            o[0] = v[0] + t1r + t2r, o[1] = v[1] + t1i + t2i;
            o[st] = a1r + b1i, o[st + 1] = a1i - b1r;  // a1 - i b1
            o[4 * st] = a1r - b1i, o[4 * st + 1] = a1i + b1r;
            o[2 * st] = a2r + b2i, o[2 * st + 1] = a2i - b2r;
            o[3 * st] = a2r - b2i, o[3 * st + 1] = a2i + b2r;
          }
        break;
      }
      default: {
        const C* rt = tw.data() + 2 * p.roots;
        V v[2 * kMaxRadix];
        for (int64_t k = 0; k < nk; ++k)
          for (int64_t s = 0; s < ns; ++s) {
            const int64_t j = k * ns + s;
            for (int r = 0; r < R; ++r) {
              V xr = src[2 * (j + r * mm)], xi = src[2 * (j + r * mm) + 1];
              if (ns > 1 && r > 0) {
                const C* t = w + 2 * (s * (R - 1) + r - 1);
                const V yr = xr * t[0] - xi * t[1];
                xi = xr * t[1] + xi * t[0];
                xr = yr;
              }
              v[2 * r] = xr, v[2 * r + 1] = xi;
            }
            V* o = dst + 2 * (k * ns * R + s);
            for (int q = 0; q < R; ++q) {
              V sr = v[0], si = v[1];
              int idx = 0;
              for (int r = 1; r < R; ++r) {
                idx += q;
                if (idx >= R) idx -= R;
                const C cr = rt[2 * idx], ci = rt[2 * idx + 1];
                sr += v[2 * r] * cr - v[2 * r + 1] * ci;
                si += v[2 * r] * ci + v[2 * r + 1] * cr;
              }
              o[2 * q * ns] = sr, o[2 * q * ns + 1] = si;
            }
          }
      }
    }
  }

  /// v[r] = src[j + r * mm] * twiddle(r, s) for r < R.
  template <int R, class V>
  static inline void load(const V* src, int64_t j, int64_t mm, int64_t s, const C* w, bool twiddle, V* v) {
    v[0] = src[2 * j], v[1] = src[2 * j + 1];
    for (int r = 1; r < R; ++r) {
      const V xr = src[2 * (j + r * mm)], xi = src[2 * (j + r * mm) + 1];
      if (twiddle) {
        const C* t = w + 2 * (s * (R - 1) + r - 1);
        v[2 * r] = xr * t[0] - xi * t[1];
        v[2 * r + 1] = xr * t[1] + xi * t[0];
      } else {
        v[2 * r] = xr, v[2 * r + 1] = xi;
      }
    }
  }

  template <class V>
  void bluestein_forward(V* x, V* scratch) const {
    V* a = scratch;             // 2m
    V* work = scratch + 2 * m;  // inner scratch
    for (int64_t k = 0; k < n; ++k) {
      const double cr = chirp[2 * k], ci = chirp[2 * k + 1];
      const V xr = x[2 * k], xi = x[2 * k + 1];
      a[2 * k] = xr * cr - xi * ci;
      a[2 * k + 1] = xr * ci + xi * cr;
    }
    for (int64_t k = 2 * n; k < 2 * m; ++k) a[k] = V{};
    inner->forward_direct(a, work);
    // Multiply by FFT(b) / m and conjugate: the forward transform of the result is then the
    // conjugate of the inverse transform.
    for (int64_t k = 0; k < m; ++k) {
      const V ar = a[2 * k], ai = a[2 * k + 1];
      const double br = bhat[2 * k], bi = bhat[2 * k + 1];
      a[2 * k] = ar * br - ai * bi;
      a[2 * k + 1] = -(ar * bi + ai * br);
    }
    inner->forward_direct(a, work);
    for (int64_t k = 0; k < n; ++k) {
      const double cr = chirp[2 * k], ci = chirp[2 * k + 1];
      const V yr = a[2 * k], yi = -a[2 * k + 1];
      x[2 * k] = yr * cr - yi * ci;
      x[2 * k + 1] = yr * ci + yi * cr;
    }
  }
};

template <class C>
std::shared_ptr<const Plan<C>> get_plan(int64_t n);

template <class C>
std::shared_ptr<const Plan<C>> make_plan(int64_t n) {
  auto p = std::make_shared<Plan<C>>();
  p->n = n;
  if (n <= 1) return p;
  std::vector<int> f = factorize(n);
  if (f.empty()) {
    // Bluestein: only planned in f64 (the kernels pick f64 for such lengths).
    p->bluestein = true;
    // The smallest 2^a 3^b 5^c >= 2n - 1 (all passes then have a written-out butterfly).
    int64_t m = std::numeric_limits<int64_t>::max();
    for (int64_t p5 = 1; p5 < m && p5 < 4 * n; p5 *= 5)
      for (int64_t p3 = p5; p3 < m && p3 < 4 * n; p3 *= 3) {
        int64_t v = p3;
        while (v < 2 * n - 1) v *= 2;
        m = std::min(m, v);
      }
    p->m = m;
    p->inner = get_plan<double>(m);
    p->chirp.resize(2 * static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      // exp(-pi i k^2 / n) = exp(-2 pi i (k^2 mod 2n) / 2n)
      const int64_t k2 = static_cast<int64_t>((static_cast<unsigned __int128>(k) * k) % (2 * n));
      root(k2, 2 * n, p->chirp[2 * k], p->chirp[2 * k + 1]);
    }
    std::vector<double> b(2 * static_cast<size_t>(m), 0.0), work(p->inner->scratch_size());
    for (int64_t k = 0; k < n; ++k) {
      b[2 * k] = p->chirp[2 * k];
      b[2 * k + 1] = -p->chirp[2 * k + 1];
      if (k > 0) b[2 * (m - k)] = b[2 * k], b[2 * (m - k) + 1] = b[2 * k + 1];
    }
    p->inner->forward(b.data(), work.data());
    const double inv = 1.0 / static_cast<double>(m);
    for (auto& v : b) v *= inv;
    p->bhat = std::move(b);
    return p;
  }
  int64_t ns = 1;
  for (int r : f) {
    Pass ps{r, ns, p->tw.size() / 2, 0};
    for (int64_t s = 0; s < ns; ++s)
      for (int q = 1; q < r; ++q) {
        double re, im;
        root(q * s, ns * r, re, im);
        p->tw.push_back(static_cast<C>(re));
        p->tw.push_back(static_cast<C>(im));
      }
    if (r > 5) {
      ps.roots = p->tw.size() / 2;
      for (int q = 0; q < r; ++q) {
        double re, im;
        root(q, r, re, im);
        p->tw.push_back(static_cast<C>(re));
        p->tw.push_back(static_cast<C>(im));
      }
    }
    p->passes.push_back(ps);
    ns *= r;
  }
  return p;
}

template <class C>
std::shared_ptr<const Plan<C>> get_plan(int64_t n) {
  static std::mutex mu;
  static std::unordered_map<int64_t, std::shared_ptr<const Plan<C>>> cache;
  {
    std::lock_guard<std::mutex> lk(mu);
    auto it = cache.find(n);
    if (it != cache.end()) return it->second;
  }
  auto p = make_plan<C>(n);  // may recurse into get_plan<double> (Bluestein): lock released
  std::lock_guard<std::mutex> lk(mu);
  if (cache.size() >= 64) cache.clear();
  return cache.emplace(n, p).first->second;
}

/// Twiddles exp(-2 pi i k / n), k = 0 .. n/2, of the real transforms (n even), per (n, C).
template <class C>
std::shared_ptr<const std::vector<C>> get_real_twiddles(int64_t n) {
  static std::mutex mu;
  static std::unordered_map<int64_t, std::shared_ptr<const std::vector<C>>> cache;
  std::lock_guard<std::mutex> lk(mu);
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  auto w = std::make_shared<std::vector<C>>(2 * static_cast<size_t>(n / 2 + 1));
  for (int64_t k = 0; k <= n / 2; ++k) {
    double re, im;
    root(k, n, re, im);
    (*w)[2 * k] = static_cast<C>(re);
    (*w)[2 * k + 1] = static_cast<C>(im);
  }
  if (cache.size() >= 64) cache.clear();
  return cache.emplace(n, w).first->second;
}

/// The complex-shape view of a [..., 2] descriptor (trailing dim dropped) and the element
/// stride of its imaginary part.
ir::TensorDesc complex_view(const ir::TensorDesc& d, int64_t& im_stride) {
  ir::TensorDesc v = d;
  im_stride = d.strides.back();
  v.shape.pop_back();
  v.strides.pop_back();
  return v;
}

/// 16-byte vectors of C (GCC vector extension, SSE width): the lines of a block go one per lane, so the
/// passes run on kLanes lines at once.
template <class C>
struct VecOf {
  typedef C type __attribute__((vector_size(16)));
};
template <class C>
using Vec = typename VecOf<C>::type;
template <class C>
inline constexpr int64_t kLanes = 16 / static_cast<int64_t>(sizeof(C));

/// A block of up to 8 consecutive lines: the outer and inner index of each and its element
/// offset in the input.
struct LineBlock {
  int64_t cnt = 0;
  int64_t o[8], c[8], off[8];
};

/// Transforms the lines of a block buffer holding value j of lane i at buf[j * L + i].
template <class C>
void transform(const Plan<C>& p, C* buf, int64_t L, C* scr) {
  if (L == 1)
    p.forward(buf, scr);
  else
    p.forward_any(reinterpret_cast<Vec<C>*>(buf), reinterpret_cast<Vec<C>*>(scr));
}

/// Runs body(block, buf, L, scratch) over all lines in parallel: full blocks of kLanes lines
/// with L = kLanes, the lines of a partial last block one by one with L = 1. buf holds buf_len
/// values per lane. Blocks depend only on the shape, and lanes never mix, so the results do
/// not depend on the thread count.
template <class C, class F>
void for_line_blocks(const red::LinePlan& lp, const Plan<C>& plan, size_t buf_len, const F& body) {
  const int64_t nin = lp.inner.numel, nlines = lp.outer.numel * nin;
  if (nlines == 0 || buf_len == 0) return;
  const bool vec = plan.n > 1;
  const int64_t B = vec ? kLanes<C> : 1, nblocks = (nlines + B - 1) / B;
  const size_t scratch = plan.scratch_size() * static_cast<size_t>(B);
  const size_t total = static_cast<size_t>(B) * buf_len + scratch;
  const int64_t grain = std::max<int64_t>(1, kGrain / (4 * static_cast<int64_t>(buf_len) * B));
  parallel_for(nblocks, grain, [&](int64_t b, int64_t e) {
    std::vector<Vec<C>> mem(total / static_cast<size_t>(kLanes<C>) + 1);
    C* buf = reinterpret_cast<C*>(mem.data());
    C* scr = buf + static_cast<size_t>(B) * buf_len;
    for (int64_t blk = b; blk < e; ++blk) {
      const int64_t li0 = blk * B, cnt = std::min(B, nlines - li0);
      LineBlock lb;
      lb.cnt = cnt;
      for (int64_t i = 0; i < cnt; ++i) {
        lb.o[i] = (li0 + i) / nin;
        lb.c[i] = (li0 + i) % nin;
        lb.off[i] = lp.outer.offset(lb.o[i]) + lp.inner.offset(lb.c[i]);
      }
      if (cnt == B) {
        body(lb, buf, B, scr);
        continue;
      }
      for (int64_t i = 0; i < cnt; ++i) {  // a partial last block: one line at a time
        LineBlock one;
        one.cnt = 1;
        one.o[0] = lb.o[i], one.c[0] = lb.c[i], one.off[0] = lb.off[i];
        body(one, buf, 1, scr);
      }
    }
  });
}

/// Calls f(i, l) for lines i < cnt and positions l < len: position-major when the lines are
/// neighbours in memory (nin > 1, a transform along an outer dim), line-major otherwise.
template <class F>
inline void scatter_order(int64_t cnt, int64_t len, int64_t nin, const F& f) {
  if (nin > 1) {
    for (int64_t l = 0; l < len; ++l)
      for (int64_t i = 0; i < cnt; ++i) f(i, l);
  } else {
    for (int64_t i = 0; i < cnt; ++i)
      for (int64_t l = 0; l < len; ++l) f(i, l);
  }
}

template <class S, class C>
void fft_typed(const ir::Op& op, void* const* in, void* const* out) {
  int64_t ims;
  const ir::TensorDesc cv = complex_view(op.inputs[0], ims);
  const ir::FftAttrs a = ir::FftAttrs::decode(op);
  const int64_t dim = a.dim;
  const bool inverse = a.inverse;
  const C scale = static_cast<C>(a.scale);
  const C sgn = inverse ? C(-1) : C(1), sc_im = sgn * scale;
  red::LinePlan lp(cv, dim);
  const int64_t n = lp.len, nin = lp.inner.numel, st = lp.stride;
  auto plan = get_plan<C>(n);
  const S* x = reinterpret_cast<const S*>(base_ptr(in[0], op.inputs[0]));
  S* y = reinterpret_cast<S*>(base_ptr(out[0], op.outputs[0]));
  for_line_blocks<C>(lp, *plan, 2 * static_cast<size_t>(n), [&](const LineBlock& lb, C* buf, int64_t L, C* scr) {
    for (int64_t l = 0; l < n; ++l)
      for (int64_t i = 0; i < lb.cnt; ++i) {
        const S* p = x + lb.off[i] + l * st;
        buf[2 * l * L + i] = static_cast<C>(p[0]);
        buf[(2 * l + 1) * L + i] = sgn * static_cast<C>(p[ims]);
      }
    transform(*plan, buf, L, scr);
    scatter_order(lb.cnt, n, nin, [&](int64_t i, int64_t l) {
      S* q = y + 2 * (lb.o[i] * n * nin + lb.c[i] + l * nin);
      q[0] = static_cast<S>(buf[2 * l * L + i] * scale);
      q[1] = static_cast<S>(buf[(2 * l + 1) * L + i] * sc_im);
    });
  });
}

// Note [Real transforms]
// For even n = 2h, rfft packs z[k] = x[2k] + i x[2k+1] and runs one complex FFT of length h:
// with Z = FFT_h(z), E = (Z[k] + conj Z[h-k]) / 2, O = -i (Z[k] - conj Z[h-k]) / 2, the
// spectrum is X[k] = E + exp(-2 pi i k / n) O for k = 0 .. h. irfft runs the same steps
// backwards: z[k] = (X[k] + conj X[h-k]) + i exp(2 pi i k / n) (X[k] - conj X[h-k]), and the
// inverse FFT_h of z holds x[2t] + i x[2t+1] (times n). Odd n transform the full complex line.

template <class S, class C>
void rfft_typed(const ir::Op& op, void* const* in, void* const* out) {
  const ir::TensorDesc& xd = op.inputs[0];
  const ir::FftAttrs a = ir::FftAttrs::decode(op);
  const int64_t dim = a.dim;
  const C scale = static_cast<C>(a.scale);
  red::LinePlan lp(xd, dim);
  const int64_t n = lp.len, nin = lp.inner.numel, mo = n / 2 + 1, st = lp.stride, h = n / 2;
  const bool packed = n % 2 == 0 && n >= 2;
  auto plan = get_plan<C>(packed ? h : n);
  std::shared_ptr<const std::vector<C>> rtw;
  if (packed) rtw = get_real_twiddles<C>(n);
  const S* x = reinterpret_cast<const S*>(base_ptr(in[0], xd));
  S* y = reinterpret_cast<S*>(base_ptr(out[0], op.outputs[0]));
  for_line_blocks<C>(lp, *plan, 2 * static_cast<size_t>(n), [&](const LineBlock& lb, C* buf, int64_t L, C* scr) {
    if (!packed) {
      for (int64_t l = 0; l < n; ++l)
        for (int64_t i = 0; i < lb.cnt; ++i) {
          buf[2 * l * L + i] = static_cast<C>(x[lb.off[i] + l * st]);
          buf[(2 * l + 1) * L + i] = 0;
        }
      transform(*plan, buf, L, scr);
      scatter_order(lb.cnt, mo, nin, [&](int64_t i, int64_t l) {
        S* q = y + 2 * (lb.o[i] * mo * nin + lb.c[i] + l * nin);
        q[0] = static_cast<S>(buf[2 * l * L + i] * scale);
        q[1] = static_cast<S>(buf[(2 * l + 1) * L + i] * scale);
      });
      return;
    }
    for (int64_t l = 0; l < n; ++l)
      for (int64_t i = 0; i < lb.cnt; ++i) buf[l * L + i] = static_cast<C>(x[lb.off[i] + l * st]);
    transform(*plan, buf, L, scr);
    const C* w = rtw->data();
    const C hs = C(0.5) * scale;
    scatter_order(lb.cnt, h + 1, nin, [&](int64_t i, int64_t k) {
      S* q = y + 2 * (lb.o[i] * mo * nin + lb.c[i] + k * nin);
      {
        const int64_t a = k == h ? 0 : k, b = k == 0 ? 0 : h - k;
        const C wr = w[2 * k], wi = w[2 * k + 1];
        const C zr = buf[2 * a * L + i], zi = buf[(2 * a + 1) * L + i];
        const C cr = buf[2 * b * L + i], ci = -buf[(2 * b + 1) * L + i];
        const C er = zr + cr, ei = zi + ci;   // 2E
        const C orr = zi - ci, oi = cr - zr;  // 2O = -i (Z - conj Z[h-k])
        q[0] = static_cast<S>((er + wr * orr - wi * oi) * hs);
        q[1] = static_cast<S>((ei + wr * oi + wi * orr) * hs);
      }
    });
  });
}

template <class S, class C>
void irfft_typed(const ir::Op& op, void* const* in, void* const* out) {
  int64_t ims;
  const ir::TensorDesc cv = complex_view(op.inputs[0], ims);
  const ir::FftAttrs a = ir::FftAttrs::decode(op);
  const int64_t dim = a.dim, n = a.n;
  const C scale = static_cast<C>(a.scale);
  red::LinePlan lp(cv, dim);
  const int64_t nin = lp.inner.numel, h = n / 2, nb = std::min(lp.len, h + 1), st = lp.stride;
  const bool packed = n % 2 == 0 && n >= 2;
  auto plan = get_plan<C>(packed ? h : n);
  std::shared_ptr<const std::vector<C>> rtw;
  if (packed) rtw = get_real_twiddles<C>(n);
  const S* x = reinterpret_cast<const S*>(base_ptr(in[0], op.inputs[0]));
  S* y = reinterpret_cast<S*>(base_ptr(out[0], op.outputs[0]));
  // Per lane: the line (2n values) followed by the half spectrum X (2 (h + 1) values).
  const size_t blen = 2 * static_cast<size_t>(n) + 2 * static_cast<size_t>(h + 1);
  for_line_blocks<C>(lp, *plan, blen, [&](const LineBlock& lb, C* buf, int64_t L, C* scr) {
    C* X = buf + 2 * n * L;
    for (int64_t l = 0; l <= h; ++l)
      for (int64_t i = 0; i < lb.cnt; ++i) {
        // The first nb bins (the rest are zero). The imaginary parts of bins 0 and (even n)
        // n/2 do not contribute.
        const bool im0 = l == 0 || (n % 2 == 0 && l == h);
        X[2 * l * L + i] = l < nb ? static_cast<C>(x[lb.off[i] + l * st]) : C(0);
        X[(2 * l + 1) * L + i] = l < nb && !im0 ? static_cast<C>(x[lb.off[i] + l * st + ims]) : C(0);
      }
    if (!packed) {
      // conj of the full Hermitian spectrum; Re(FFT(conj(X))) = n * irfft(X).
      for (int64_t l = 0; l < n; ++l) {
        const int64_t m = l <= h ? l : n - l;
        const C sg = l <= h ? C(-1) : C(1);
        for (int64_t i = 0; i < L; ++i) {
          buf[2 * l * L + i] = X[2 * m * L + i];
          buf[(2 * l + 1) * L + i] = sg * X[(2 * m + 1) * L + i];
        }
      }
    } else {
      const C* w = rtw->data();
      for (int64_t k = 0; k < h; ++k) {
        const C wr = w[2 * k], wi = -w[2 * k + 1];  // exp(+2 pi i k / n)
        for (int64_t i = 0; i < L; ++i) {
          const C ar = X[2 * k * L + i], ai = X[(2 * k + 1) * L + i];
          const C br = X[2 * (h - k) * L + i], bi = -X[(2 * (h - k) + 1) * L + i];
          const C er = ar + br, ei = ai + bi, dr = ar - br, di = ai - bi;
          const C orr = dr * wr - di * wi, oi = dr * wi + di * wr;
          buf[2 * k * L + i] = er - oi;  // conj(E + i O) for the forward transform
          buf[(2 * k + 1) * L + i] = -(ei + orr);
        }
      }
    }
    transform(*plan, buf, L, scr);
    // packed: position l holds x[l] in its real (even l) or negated imaginary (odd l) part
    scatter_order(lb.cnt, n, nin, [&](int64_t i, int64_t l) {
      const C v = packed && (l & 1) ? -buf[l * L + i] : buf[(packed ? l : 2 * l) * L + i];
      y[lb.o[i] * n * nin + lb.c[i] + l * nin] = static_cast<S>(v * scale);
    });
  });
}

/// The compute type: f64 for f64 data and for lengths that need Bluestein (real transforms of
/// even n run a complex transform of n / 2), f32 otherwise.
bool needs_f64(int64_t n, bool real) { return !is_smooth(real && n % 2 == 0 ? n / 2 : n); }

#define KILN_FFT_DISPATCH(kern, dt, n, real)              \
  KILN_SWITCH_FLOAT(dt, ir::op_name(op.kind).data(), S, { \
    if (std::is_same_v<S, double> || needs_f64(n, real))  \
      kern<S, double>(op, in, out);                       \
    else                                                  \
      kern<S, float>(op, in, out);                        \
  })

}  // namespace

void k_Fft(const ir::Op& op, void* const* in, void* const* out) {
  const int64_t n = op.inputs[0].shape[static_cast<size_t>(ir::FftAttrs::decode(op).dim)];
  KILN_FFT_DISPATCH(fft_typed, op.inputs[0].dtype, n, false);
}
void k_Rfft(const ir::Op& op, void* const* in, void* const* out) {
  const int64_t n = op.inputs[0].shape[static_cast<size_t>(ir::FftAttrs::decode(op).dim)];
  KILN_FFT_DISPATCH(rfft_typed, op.inputs[0].dtype, n, true);
}
void k_Irfft(const ir::Op& op, void* const* in, void* const* out) {
  KILN_FFT_DISPATCH(irfft_typed, op.inputs[0].dtype, ir::FftAttrs::decode(op).n, true);
}

}  // namespace kiln::cpu
