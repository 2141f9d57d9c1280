// kernel count_bits []
#define KK_FN static inline
namespace kk_m {
#define KK_M1(n) \
  static inline float n(float x) { return __builtin_##n##f(x); } \
  static inline double n(double x) { return __builtin_##n(x); }
#define KK_M2(n) \
  static inline float n(float x, float y) { return __builtin_##n##f(x, y); } \
  static inline double n(double x, double y) { return __builtin_##n(x, y); }
KK_M1(exp) KK_M1(log) KK_M1(sqrt) KK_M1(tanh) KK_M1(erf) KK_M1(fabs) KK_M1(floor) KK_M1(ceil) KK_M1(sin) KK_M1(cos)
KK_M2(fmin) KK_M2(fmax) KK_M2(pow)
static inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static inline double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
}  // namespace kk_m
static inline float kk_as_float(unsigned u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline unsigned kk_as_uint(float f) { unsigned u; __builtin_memcpy(&u, &f, 4); return u; }
static inline float kk_exp(float x) { return kk_m::exp(x); }
struct kk_error { int set; int buf; long long index; };
struct kk_args {
  void* const* bufs;
  const long long* sizes;
  const long long* iargs;
  const double* fargs;
  unsigned groups[3];
  kk_error* err;
  unsigned long long stream;  // bit i: buffer i is an output too large for the cache
};
struct kk_oob {};
static inline void kk_next_group(int& x, int& y, int& z, int nx, int ny) {
  if (++x == nx) { x = 0; if (++y == ny) { y = 0; ++z; } }
}
[[noreturn]] static void kk_fail(int buf, long long i, const kk_args* a) {
  int z = 0;
  if (__atomic_compare_exchange_n(&a->err->set, &z, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    a->err->buf = buf;
    a->err->index = i;
  }
  throw kk_oob{};
}
static inline long long kk_chk(long long i, long long n, int buf, const kk_args* a) {
  if ((unsigned long long)i >= (unsigned long long)n) kk_fail(buf, i, a);
  return i;
}
template <class T> static inline T kk_div(T x, T y, bool mod, const kk_args* a) {
  if (y == 0 || (T(-1) < T(0) && y == T(-1) && x == T((unsigned long long)1 << (sizeof(T) * 8 - 1)))) kk_fail(-1, (long long)x, a);
  return mod ? x % y : x / y;
}
template <class T> static inline T kk_atomic_min(T* p, T v) {
  T o = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < o && !__atomic_compare_exchange_n(p, &o, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return o;
}
template <class T> static inline T kk_atomic_max(T* p, T v) {
  T o = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (o < v && !__atomic_compare_exchange_n(p, &o, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return o;
}
KK_FN float kk_h2f(unsigned short h) {
  unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return kk_as_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) { float v = (float)m * 5.9604644775390625e-8f; return sign ? -v : v; }
  return kk_as_float(sign | ((e + 112u) << 23) | (m << 13));
}
KK_FN unsigned short kk_f2h(float f) {
  unsigned x = kk_as_uint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (unsigned short)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (ax < 0x38800000u) return (unsigned short)(sign | (kk_as_uint(kk_as_float(ax) + 0.5f) - 0x3f000000u));
  ax += 0xc8000fffu + ((ax >> 13) & 1u);
  return (unsigned short)(sign | (ax >> 13));
}
KK_FN float kk_b2f(unsigned short b) { return kk_as_float((unsigned)b << 16); }
KK_FN unsigned short kk_f2b(float f) {
  unsigned u = kk_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
KK_FN float kk_sigmoid(float x) { return 1.0f / (1.0f + kk_exp(-x)); }
template <class T> KK_FN T kk_min(T a, T b) { return b < a ? b : a; }
template <class T> KK_FN T kk_max(T a, T b) { return a < b ? b : a; }
template <class T, int N> struct alignas(sizeof(T) * N) kk_v { T v[N]; };
#define KK_W16 1
#if KK_W16 && defined(__AVX512F__)
#define KK_W 16
#else
#define KK_W 8
#endif
typedef float kk_wf __attribute__((vector_size(KK_W * 4)));
typedef int kk_wi __attribute__((vector_size(KK_W * 4)));
typedef unsigned kk_wu __attribute__((vector_size(KK_W * 4)));
typedef int kk_i4 __attribute__((vector_size(16)));
typedef double kk_wd __attribute__((vector_size(KK_W * 8)));
typedef long long kk_wl __attribute__((vector_size(KK_W * 8)));
static inline kk_wl kk_wide(kk_wi m) { return __builtin_convertvector(m, kk_wl); }
static inline kk_wi kk_narrow(kk_wl m) { return __builtin_convertvector(m, kk_wi); }
#if KK_W == 16
static constexpr kk_wi kk_iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#else
static constexpr kk_wi kk_iota = {0, 1, 2, 3, 4, 5, 6, 7};
#endif
// A whole vector loaded from p, and the memory 4 KiB on asked for (a stream of loads otherwise
// leaves memory waiting behind the arithmetic; prefetching past the end does no harm).
template <class V, class E> static inline V kk_wld(const E* p) {
  __builtin_prefetch((const char*)p + 4096);
  V v; __builtin_memcpy(&v, p, sizeof v); return v;
}
template <class V, class E> static inline void kk_wst(E* p, V v) { __builtin_memcpy(p, &v, sizeof v); }
template <bool Or> static inline bool kk_fold(kk_wi m) {
  kk_i4 r, p;
  __builtin_memcpy(&r, &m, 16);
  for (int i = 1; i < KK_W / 4; ++i) { __builtin_memcpy(&p, (const char*)&m + 16 * i, 16); r = Or ? (r | p) : (r & p); }
  return Or ? (r[0] | r[1] | r[2] | r[3]) != 0 : (r[0] & r[1] & r[2] & r[3]) != 0;
}
#if KK_W == 16
// One test instruction (a mask lane is 0 or -1).
static inline bool kk_any(kk_wi m) { return __builtin_ia32_ptestmd512(m, m, (unsigned short)-1) != 0; }
static inline bool kk_all(kk_wi m) { return __builtin_ia32_ptestmd512(m, m, (unsigned short)-1) == 0xffff; }
#elif defined(__AVX__)
typedef float kk_f8 __attribute__((vector_size(32)));
static inline bool kk_any(kk_wi m) { return __builtin_ia32_movmskps256((kk_f8)m) != 0; }
static inline bool kk_all(kk_wi m) { return __builtin_ia32_movmskps256((kk_f8)m) == 0xff; }
#else
static inline bool kk_any(kk_wi m) { return kk_fold<true>(m); }
static inline bool kk_all(kk_wi m) { return kk_fold<false>(m); }
#endif
// A whole vector stored at p, past the caches when s is set and p starts a vector (an output
// too large for the cache: a plain store would read each line first; kk_run ends with a fence).
template <class V, class E> static inline void kk_wsts(E* p, V v, bool s) {
#if defined(__x86_64__) && (KK_W == 16 || defined(__AVX__))
  if (s && ((unsigned long long)p & (sizeof(kk_wf) - 1)) == 0) {
    for (unsigned i = 0; i < sizeof v / sizeof(kk_wf); ++i) {
      kk_wf c;
      __builtin_memcpy(&c, (const char*)&v + sizeof c * i, sizeof c);
#if defined(__clang__)
      __builtin_nontemporal_store(c, (kk_wf*)p + i);
#elif KK_W == 16
      __builtin_ia32_movntps512((float*)p + 16 * i, c);
#else
      __builtin_ia32_movntps256((float*)p + 8 * i, c);
#endif
    }
    return;
  }
#endif
  (void)s;
  kk_wst(p, v);
}
static inline void kk_stream_fence(const kk_args* a) {
#if defined(__x86_64__)
  if (a->stream) __builtin_ia32_sfence();
#endif
  (void)a;
}
// Elements i + l of p for the lanes l of mask m: the whole vector when every lane is active,
// else lane by lane (an inactive lane is not read, and loads as 0; it is not written).
template <class V, class E> static inline V kk_wldm(const E* p, long long i, kk_wi m) {
  if (kk_all(m)) return kk_wld<V>(p + i);
  V v = {};
  for (int l = 0; l < KK_W; ++l) if (m[l]) v[l] = p[i + l];
  return v;
}
template <class V, class E> static inline void kk_wstm(E* p, long long i, V v, kk_wi m, bool s = false) {
  if (kk_all(m)) { kk_wsts(p + i, v, s); return; }
  for (int l = 0; l < KK_W; ++l) if (m[l]) p[i + l] = v[l];
}
static inline kk_wf kk_wfabs(kk_wf x) { return (kk_wf)((kk_wi)x & 0x7fffffff); }
static inline kk_wd kk_wfabs(kk_wd x) { return (kk_wd)((kk_wl)x & 0x7fffffffffffffffLL); }
template <class V> static inline V kk_wfmin(V a, V b) { return ((b < a) | (a != a)) ? b : a; }
template <class V> static inline V kk_wfmax(V a, V b) { return ((a < b) | (a != a)) ? b : a; }
template <class V, class F> static inline V kk_wmap(V x, F f) { V r; for (int l = 0; l < KK_W; ++l) r[l] = f(x[l]); return r; }
template <class V, class F> static inline V kk_wmap2(V x, V y, F f) { V r; for (int l = 0; l < KK_W; ++l) r[l] = f(x[l], y[l]); return r; }
static inline kk_wd kk_wfma_lanes(kk_wd a, kk_wd b, kk_wd c) { kk_wd r; for (int l = 0; l < KK_W; ++l) r[l] = kk_m::fma(a[l], b[l], c[l]); return r; }
extern "C" void kk_run(const kk_args* a, long long g0, long long g1) {
  const unsigned* const b0 = (const unsigned*)a->bufs[0];
  unsigned* const b1 = (unsigned*)a->bufs[1];
  const int kk_nx = (int)a->groups[0], kk_ny = (int)a->groups[1], kk_nz = (int)a->groups[2];
  (void)kk_nz;
  int kk_cx = (int)(g0 % kk_nx), kk_cy = (int)(g0 / kk_nx % kk_ny), kk_cz = (int)(g0 / ((long long)kk_nx * kk_ny));
  for (long long kk_g = g0; kk_g < g1; ++kk_g, kk_next_group(kk_cx, kk_cy, kk_cz, kk_nx, kk_ny)) {
    const int kk_gx = kk_cx, kk_gy = kk_cy, kk_gz = kk_cz;
    (void)kk_gx; (void)kk_gy; (void)kk_gz;
    kk_wu l0;
    kk_wu l1;
    for (int kk_t0 = 0; kk_t0 < 32; kk_t0 += KK_W) {
      const int kk_c = kk_t0 / KK_W;
      const kk_wi kk_wt = kk_t0 + kk_iota;
      const kk_wi kk_wtx = kk_wt, kk_wty = kk_wi{}, kk_wtz = kk_wi{};
      const int kk_tx0 = kk_t0, kk_ty0 = 0, kk_tz0 = 0;
      (void)kk_c; (void)kk_wtx; (void)kk_wty; (void)kk_wtz; (void)kk_tx0; (void)kk_ty0; (void)kk_tz0;
      const kk_wu v0 = kk_wld<kk_wu>(&b0[((kk_gx * 32) + (kk_tx0 + 0))]);
      l0 = v0;
      l1 = ((0u) - kk_wu{});
      kk_wi kk_m0 = ~kk_wi{};
      for (;;) {
        const kk_wu v1 = l0;
        const kk_wi v2 = (v1 != ((0u) - kk_wu{}));
        kk_m0 &= v2;
        if (!kk_any(kk_m0)) break;
        const kk_wu v3 = l0;
        const kk_wu v4 = (v3 & ((1u) - kk_wu{}));
        const kk_wu v5 = l1;
        const kk_wu v6 = (v5 + v4);
        l1 = kk_m0 ? v6 : l1;
        const kk_wu v7 = l0;
        const kk_wu v8 = (v7 >> ((1u) - kk_wu{}));
        l0 = kk_m0 ? v8 : l0;
      }
      const kk_wu v9 = l1;
      kk_wu kk_r1 = {};
      for (int kk_l = 0; kk_l < KK_W; ++kk_l) {
        kk_r1[kk_l] = __atomic_fetch_add(&b1[0], v9[kk_l], __ATOMIC_RELAXED);
      }
      const kk_wu v10 = kk_r1;
    }
  }
}
