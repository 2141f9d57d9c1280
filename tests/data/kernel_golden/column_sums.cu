// kernel column_sums []
#define KK_FN __device__ __forceinline__
KK_FN float kk_as_float(unsigned u) { return __uint_as_float(u); }
KK_FN unsigned kk_as_uint(float f) { return __float_as_uint(f); }
KK_FN float kk_exp(float x) { return expf(x); }
template <class T> KK_FN T kk_sg_add(T v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }
template <class T> KK_FN T kk_sg_min(T v) { for (int o = 16; o > 0; o >>= 1) { T w = __shfl_xor_sync(0xffffffffu, v, o); v = w < v ? w : v; } return v; }
template <class T> KK_FN T kk_sg_max(T v) { for (int o = 16; o > 0; o >>= 1) { T w = __shfl_xor_sync(0xffffffffu, v, o); v = v < w ? w : v; } return v; }
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
extern "C" __global__ void __launch_bounds__(8) kk_column_sums(const float* __restrict__ b0, float* __restrict__ b1, int p0) {
  float l0;
  l0 = 0.0f;
  for (int v0 = 0; v0 < p0; v0 += 1) {
    const int v1 = (v0 * 8);
    const int v2 = (v1 + ((int)threadIdx.x));
    const float v3 = b0[v2];
    const float v4 = l0;
    const float v5 = (v4 + v3);
    l0 = v5;
  }
  const float v6 = l0;
  b1[((int)threadIdx.x)] = v6;
}
