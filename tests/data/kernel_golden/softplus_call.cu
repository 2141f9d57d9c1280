// kernel softplus_call []
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
__device__ __forceinline__ float kk_f_exp_f32_f32(float p0) {
  const float v0 = fmaxf(p0, -104.0f);
  const float v1 = fminf(v0, 89.0f);
  const float v2 = (v1 * 1.442695f);
  const float v3 = (v2 + 0.5f);
  const float v4 = floorf(v3);
  const float v5 = (v4 * 0.6933594f);
  const float v6 = (v1 - v5);
  const float v7 = (v4 * -0.00021219444f);
  const float v8 = (v6 - v7);
  const float v9 = (0.00019875691f * v8);
  const float v10 = (v9 + 0.0013981999f);
  const float v11 = (v10 * v8);
  const float v12 = (v11 + 0.008333452f);
  const float v13 = (v12 * v8);
  const float v14 = (v13 + 0.041665796f);
  const float v15 = (v14 * v8);
  const float v16 = (v15 + 0.16666666f);
  const float v17 = (v16 * v8);
  const float v18 = (v17 + 0.5f);
  const float v19 = (v8 + 1.0f);
  const float v20 = (v8 * v8);
  const float v21 = (v18 * v20);
  const float v22 = (v21 + v19);
  const int v23 = ((int)v4);
  const int v24 = (v23 >> 1);
  const int v25 = (v23 - v24);
  const int v26 = (v24 + 127);
  const int v27 = (v26 << 23);
  const float v28 = kk_as_float((unsigned)v27);
  const int v29 = (v25 + 127);
  const int v30 = (v29 << 23);
  const float v31 = kk_as_float((unsigned)v30);
  const float v32 = (v22 * v28);
  const float v33 = (v32 * v31);
  const bool v34 = (p0 != p0);
  const float v35 = (v34 ? p0 : v33);
  return v35;
}
__device__ __forceinline__ float kk_f_log_f32_f32(float p0) {
  const int v0 = ((int)kk_as_uint(p0));
  const int v1 = (v0 & 8388607);
  const int v2 = (v0 & 2139095040);
  const bool v3 = (v2 == 0);
  const bool v4 = (v1 != 0);
  const bool v5 = (v3 && v4);
  const float v6 = ((float)v1);
  const float v7 = (v6 * 4.7019774e-38f);
  const float v8 = (v5 ? v7 : p0);
  const int v9 = ((int)kk_as_uint(v8));
  const int v10 = (v9 + 4913933);
  const int v11 = (v5 ? -25 : 0);
  const int v12 = (v10 >> 23);
  const int v13 = (v12 - 127);
  const int v14 = (v13 + v11);
  const float v15 = ((float)v14);
  const int v16 = (v10 & 8388607);
  const int v17 = (v16 + 1060439283);
  const float v18 = kk_as_float((unsigned)v17);
  const float v19 = (v18 - 1.0f);
  const float v20 = (v18 + 1.0f);
  const float v21 = (v19 / v20);
  const float v22 = (v21 * v21);
  const float v23 = (v22 * v22);
  const float v24 = (v23 * 0.24279079f);
  const float v25 = (v24 + 0.40000972f);
  const float v26 = (v25 * v23);
  const float v27 = (v23 * 0.28498787f);
  const float v28 = (v27 + 0.6666666f);
  const float v29 = (v28 * v22);
  const float v30 = (v29 + v26);
  const float v31 = (v15 * 9.058001e-06f);
  const float v32 = (v19 - v30);
  const float v33 = (v21 * v32);
  const float v34 = (v33 - v31);
  const float v35 = (v34 - v19);
  const float v36 = (v15 * 0.6931381f);
  const float v37 = (v36 - v35);
  const int v38 = (v0 & 2147483647);
  const bool v39 = (v38 == 0);
  const bool v40 = (p0 == kk_as_float(0x7f800000u));
  const float v41 = (v40 ? p0 : v37);
  const bool v42 = (v0 < 0);
  const float v43 = (v42 ? kk_as_float(0x7fc00000u) : v41);
  const float v44 = (v39 ? kk_as_float(0xff800000u) : v43);
  const bool v45 = (p0 != p0);
  const float v46 = (v45 ? p0 : v44);
  return v46;
}
__device__ __forceinline__ float kk_f_golden_softplus(float p0, float p1) {
  float l0;
  const float v0 = (p0 * p1);
  l0 = v0;
  const float v1 = l0;
  const float v2 = kk_f_exp_f32_f32(v1);
  const float v3 = (1.0f + v2);
  const float v4 = kk_f_log_f32_f32(v3);
  const float v5 = (v4 / p1);
  l0 = v5;
  const float v6 = l0;
  return v6;
}
extern "C" __global__ void __launch_bounds__(64) kk_softplus_call(const float* __restrict__ b0, float* __restrict__ b1) {
  const int v0 = (((int)blockIdx.x) * 64);
  const int v1 = (v0 + ((int)threadIdx.x));
  const float v2 = b0[v1];
  const float v3 = kk_f_golden_softplus(v2, 2.0f);
  b1[v1] = v3;
}
