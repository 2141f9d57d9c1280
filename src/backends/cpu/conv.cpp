// SPDX-License-Identifier: MIT OR Apache-2.0
// Convolution kernels: Conv, ConvTranspose (conv backward-data) and ConvWeightGrad (ops.def
// documents the attributes). f32 runs through oneDNN when it is built in and enabled
// (conv_onednn.cpp); everything else, and f32 with oneDNN off, runs the portable path here.
//
// Note [Portable convolution]: im2col + GEMM per image and group. The column matrix of one
// image holds (C/groups * prod(k)) rows and one column per output position; it is built a tile
// of output rows at a time so its size stays bounded (3-d convolutions). 1x1 convolutions with
// stride 1 and no padding use the input directly. Backward-data computes the columns with one
// GEMM and scatters them back (col2im). Images run in parallel (one column buffer per task);
// with one image the GEMM itself runs in parallel. The weight gradient sums over images in
// fixed blocks whose partial sums are added in block order, so results do not depend on the
// thread count. f16/bf16 compute in f32, f64 in f64.
#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/cpu/conv_impl.h"
#include "backends/cpu/dispatch_types.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/onednn.h"
#include "core/parallel.h"
#include "ir/attrs.h"
#include "kiln/error.h"

namespace kiln::cpu {

namespace {

using conv::Geom;

/// Geometry from the op and its decoded attributes a: Conv/ConvWeightGrad read x = inputs[0];
/// ConvTranspose's input is the conv's output and its output the conv's input.
Geom make_geom(const ir::Op& op, const ir::ConvAttrs& a) {
  Geom g;
  g.groups = a.groups;
  g.nsp = static_cast<int>(a.nsp);
  const int nsp = g.nsp, off = 3 - nsp;
  for (int i = 0; i < nsp; ++i) {
    g.stride[off + i] = a.stride[static_cast<size_t>(i)];
    g.pad[off + i] = a.padding[static_cast<size_t>(i)];
    g.dil[off + i] = a.dilation[static_cast<size_t>(i)];
  }
  const ir::TensorDesc& x = op.inputs[0];
  const ir::TensorDesc& y = op.outputs[0];
  g.N = x.shape[0];
  if (op.kind == ir::OpKind::Conv) {
    const ir::TensorDesc& w = op.inputs[1];
    const bool pooled = a.has_pool();  // y is pooled: the convolution's size from the formula
    g.C = x.shape[1];
    g.O = y.shape[1];
    for (int i = 0; i < nsp; ++i) {
      g.in[off + i] = x.shape[static_cast<size_t>(2 + i)];
      g.k[off + i] = w.shape[static_cast<size_t>(2 + i)];
      g.out[off + i] =
          pooled ? ir::conv_out_size(g.in[off + i], g.k[off + i], g.stride[off + i], g.pad[off + i], g.dil[off + i])
                 : y.shape[static_cast<size_t>(2 + i)];
    }
  } else if (op.kind == ir::OpKind::ConvTranspose) {
    const ir::TensorDesc& w = op.inputs[1];
    g.O = x.shape[1];
    g.C = y.shape[1];
    for (int i = 0; i < nsp; ++i) {
      g.out[off + i] = x.shape[static_cast<size_t>(2 + i)];
      g.in[off + i] = y.shape[static_cast<size_t>(2 + i)];
      g.k[off + i] = w.shape[static_cast<size_t>(2 + i)];
    }
  } else {
    const ir::TensorDesc& dy = op.inputs[1];
    g.C = x.shape[1];
    g.O = dy.shape[1];
    for (int i = 0; i < nsp; ++i) {
      g.in[off + i] = x.shape[static_cast<size_t>(2 + i)];
      g.out[off + i] = dy.shape[static_cast<size_t>(2 + i)];
      g.k[off + i] = y.shape[static_cast<size_t>(2 + i)];
    }
  }
  return g;
}

// ---- strided <-> contiguous staging ------------------------------------------------------------

/// Calls f(element offset) for every element of d in row-major order.
template <class F>
void for_each_offset(const ir::TensorDesc& d, const F& f) {
  const int64_t n = d.numel();
  if (n == 0) return;
  const size_t r = d.shape.size();
  if (r == 0) {
    f(int64_t{0});
    return;
  }
  SmallVec<int64_t, 8> idx(r, 0);
  int64_t off = 0;
  const int64_t last = d.shape[r - 1], ls = d.strides[r - 1];
  for (int64_t done = 0; done < n; done += last) {
    for (int64_t j = 0; j < last; ++j) f(off + j * ls);
    for (size_t k = r - 1; k-- > 0;) {
      if (++idx[k] < d.shape[k]) {
        off += d.strides[k];
        break;
      }
      off -= (d.shape[k] - 1) * d.strides[k];
      idx[k] = 0;
    }
  }
}

/// A contiguous A-typed view of input d: the buffer itself when it already is one, else a
/// converted copy in `tmp`.
template <class T, class A>
const A* stage_in(const void* data, const ir::TensorDesc& d, std::vector<A>& tmp) {
  const T* p = reinterpret_cast<const T*>(base_ptr(const_cast<void*>(data), d));
  if constexpr (std::is_same_v<T, A>) {
    if (d.is_contiguous()) return p;
  }
  tmp.resize(static_cast<size_t>(d.numel()));
  A* t = tmp.data();
  for_each_offset(d, [&](int64_t o) { *t++ = static_cast<A>(p[o]); });
  return tmp.data();
}

/// Where to compute output d: the buffer itself when contiguous and of type A, else `tmp`
/// (then finish_out copies back).
template <class T, class A>
A* stage_out(void* data, const ir::TensorDesc& d, std::vector<A>& tmp) {
  if constexpr (std::is_same_v<T, A>) {
    if (d.is_contiguous()) return reinterpret_cast<A*>(base_ptr(data, d));
  }
  tmp.assign(static_cast<size_t>(d.numel()), A(0));
  return tmp.data();
}
template <class T, class A>
void finish_out(void* data, const ir::TensorDesc& d, const A* res) {
  T* p = reinterpret_cast<T*>(base_ptr(data, d));
  if (static_cast<const void*>(res) == static_cast<const void*>(p)) return;
  for_each_offset(d, [&](int64_t o) { p[o] = static_cast<T>(*res++); });
}

// ---- GEMM and im2col / col2im ----------------------------------------------------------------

inline void gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t rsa, int64_t csa, const float* B, int64_t rsb,
                 int64_t csb, float beta, float* C, int64_t rsc) {
  gemm_f32(M, N, K, 1.f, A, rsa, csa, B, rsb, csb, beta, C, rsc, 1);
}
inline void gemm(int64_t M, int64_t N, int64_t K, const double* A, int64_t rsa, int64_t csa, const double* B,
                 int64_t rsb, int64_t csb, double beta, double* C, int64_t rsc) {
  gemm_f64(M, N, K, 1.0, A, rsa, csa, B, rsb, csb, beta, C, rsc, 1);
}

/// True when the columns are the input itself (1x1 kernel, stride 1, no padding).
bool is_pointwise(const Geom& g) {
  for (int i = 0; i < 3; ++i)
    if (g.k[i] != 1 || g.stride[i] != 1 || g.pad[i] != 0) return false;
  return true;
}

/// Output rows (od, oh pairs) per column tile: at most ~4M column elements, at least one row.
int64_t rows_per_tile(const Geom& g) {
  const int64_t rows = g.out[0] * g.out[1], cgk = (g.C / g.groups) * g.k_size();
  const int64_t per_row = std::max<int64_t>(1, cgk * g.out[2]);
  return std::clamp<int64_t>((int64_t{1} << 22) / per_row, 1, std::max<int64_t>(rows, 1));
}

/// col[(c, kd, kh, kw), (r - r0) * ow + j] for output rows r in [r0, r1) of one image and
/// group: x points at that group's first channel [Cg, *in].
template <class A>
void im2col(const Geom& g, const A* x, int64_t Cg, int64_t r0, int64_t r1, A* col) {
  const int64_t ID = g.in[0], IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t KD = g.k[0], KH = g.k[1], KW = g.k[2];
  const int64_t Lt = (r1 - r0) * OW, rows = Cg * KD * KH * KW;
  auto row_fn = [&](int64_t rb, int64_t re) {
    for (int64_t row = rb; row < re; ++row) {
      int64_t kw = row % KW, t = row / KW;
      int64_t kh = t % KH;
      t /= KH;
      int64_t kd = t % KD, c = t / KD;
      A* dst = col + row * Lt;
      const A* xc = x + c * ID * IH * IW;
      const int64_t woff = kw * g.dil[2] - g.pad[2], sw = g.stride[2];
      // ow range whose iw = ow * sw + woff lies in [0, IW)
      int64_t lo = woff >= 0 ? 0 : (-woff + sw - 1) / sw;
      int64_t hi = IW - woff <= 0 ? 0 : (IW - woff + sw - 1) / sw;
      lo = std::min(lo, OW);
      hi = std::clamp(hi, lo, OW);
      for (int64_t r = r0; r < r1; ++r, dst += OW) {
        const int64_t od = r / OH, oh = r % OH;
        const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
        const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
        if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
          std::fill(dst, dst + OW, A(0));
          continue;
        }
        const A* src = xc + (id * IH + ih) * IW + woff;
        std::fill(dst, dst + lo, A(0));
        if (sw == 1) {
          std::memcpy(dst + lo, src + lo, static_cast<size_t>(hi - lo) * sizeof(A));
        } else {
          for (int64_t j = lo; j < hi; ++j) dst[j] = src[j * sw];
        }
        std::fill(dst + hi, dst + OW, A(0));
      }
    }
  };
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(Lt, 1)), row_fn);
}

/// x[c, ...] += col for output rows [r0, r1) (the adjoint of im2col); serial, fixed order.
template <class A>
void col2im(const Geom& g, const A* col, int64_t Cg, int64_t r0, int64_t r1, A* x) {
  const int64_t ID = g.in[0], IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t KD = g.k[0], KH = g.k[1], KW = g.k[2];
  const int64_t Lt = (r1 - r0) * OW;
  // Parallel over channels: each channel's rows touch only that channel of x.
  auto ch_fn = [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      A* xc = x + c * ID * IH * IW;
      for (int64_t kd = 0; kd < KD; ++kd)
        for (int64_t kh = 0; kh < KH; ++kh)
          for (int64_t kw = 0; kw < KW; ++kw) {
            const int64_t row = ((c * KD + kd) * KH + kh) * KW + kw;
            const A* src = col + row * Lt;
            const int64_t woff = kw * g.dil[2] - g.pad[2], sw = g.stride[2];
            int64_t lo = woff >= 0 ? 0 : (-woff + sw - 1) / sw;
            int64_t hi = IW - woff <= 0 ? 0 : (IW - woff + sw - 1) / sw;
            lo = std::min(lo, OW);
            hi = std::clamp(hi, lo, OW);
            for (int64_t r = r0; r < r1; ++r, src += OW) {
              const int64_t od = r / OH, oh = r % OH;
              const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
              const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
              if (id < 0 || id >= ID || ih < 0 || ih >= IH) continue;
              A* dst = xc + (id * IH + ih) * IW + woff;
              if (sw == 1) {
                for (int64_t j = lo; j < hi; ++j) dst[j] += src[j];
              } else {
                for (int64_t j = lo; j < hi; ++j) dst[j * sw] += src[j];
              }
            }
          }
    }
  };
  parallel_for(Cg, 1, ch_fn);
}

/// A column matrix's storage, grown as needed and left uninitialised: im2col, or the GEMM with
/// beta 0, writes every element (zero-filling it first cost about a tenth of a small
/// convolution's time).
template <class A>
class Columns {
 public:
  A* get(int64_t n) {
    if (static_cast<size_t>(n) > size_) {
      data_.reset(new A[static_cast<size_t>(n)]);
      size_ = static_cast<size_t>(n);
    }
    return data_.get();
  }

 private:
  std::unique_ptr<A[]> data_;
  size_t size_ = 0;
};

/// Runs f(n) for every image: in parallel over images when there are several, else inline
/// (the GEMM and im2col inside then run in parallel). Each image's result is the same either
/// way.
template <class F>
void for_images(int64_t N, const F& f) {
  if (N <= 1 || num_threads() <= 1) {
    for (int64_t n = 0; n < N; ++n) f(n);
  } else {
    parallel_blocks(N, f);
  }
}

// ---- the three portable kernels ----------------------------------------------------------------

/// y [N, O, L] = conv(x [N, C, *in], w [O, Cg, *k]) + b.
template <class A>
void forward(const Geom& g, const A* x, const A* w, const A* b, A* y) {
  const int64_t G = g.groups, Cg = g.C / G, Og = g.O / G, K = Cg * g.k_size(), L = g.out_size(), IN = g.in_size();
  const bool pw = is_pointwise(g);
  const int64_t rows = g.out[0] * g.out[1], rt = rows_per_tile(g);
  for_images(g.N, [&](int64_t n) {
    Columns<A> col;
    for (int64_t gi = 0; gi < G; ++gi) {
      const A* xg = x + (n * g.C + gi * Cg) * IN;
      const A* wg = w + gi * Og * K;
      A* yg = y + (n * g.O + gi * Og) * L;
      if (pw) {
        gemm(Og, L, K, wg, K, 1, xg, L, 1, A(0), yg, L);
        continue;
      }
      for (int64_t r0 = 0; r0 < rows; r0 += rt) {
        const int64_t r1 = std::min(rows, r0 + rt), Lt = (r1 - r0) * g.out[2];
        A* c = col.get(K * Lt);
        im2col(g, xg, Cg, r0, r1, c);
        gemm(Og, Lt, K, wg, K, 1, c, Lt, 1, A(0), yg + r0 * g.out[2], L);
      }
    }
    if (b)
      for (int64_t o = 0; o < g.O; ++o) {
        A* yo = y + (n * g.O + o) * L;
        const A bv = b[o];
        for (int64_t l = 0; l < L; ++l) yo[l] += bv;
      }
  });
}

/// x [N, C, *in] = conv backward-data(y [N, O, *out], w [O, Cg, *k]) + b [C].
template <class A>
void backward_data(const Geom& g, const A* y, const A* w, const A* b, A* x) {
  const int64_t G = g.groups, Cg = g.C / G, Og = g.O / G, K = Cg * g.k_size(), L = g.out_size(), IN = g.in_size();
  const bool pw = is_pointwise(g);
  const int64_t rows = g.out[0] * g.out[1], rt = rows_per_tile(g);
  for_images(g.N, [&](int64_t n) {
    Columns<A> col;
    for (int64_t gi = 0; gi < G; ++gi) {
      A* xg = x + (n * g.C + gi * Cg) * IN;
      const A* wg = w + gi * Og * K;
      const A* yg = y + (n * g.O + gi * Og) * L;
      if (pw) {
        // x_g [Cg, L] = w_g^T [Cg, Og] . y_g [Og, L]
        gemm(Cg, L, Og, wg, 1, K, yg, L, 1, A(0), xg, L);
        continue;
      }
      std::fill(xg, xg + Cg * IN, A(0));
      for (int64_t r0 = 0; r0 < rows; r0 += rt) {
        const int64_t r1 = std::min(rows, r0 + rt), Lt = (r1 - r0) * g.out[2];
        A* c = col.get(K * Lt);
        gemm(K, Lt, Og, wg, 1, K, yg + r0 * g.out[2], L, 1, A(0), c, Lt);
        col2im(g, c, Cg, r0, r1, xg);
      }
    }
    if (b)
      for (int64_t c = 0; c < g.C; ++c) {
        A* xc = x + (n * g.C + c) * IN;
        const A bv = b[c];
        for (int64_t l = 0; l < IN; ++l) xc[l] += bv;
      }
  });
}

/// dw [O, Cg, *k] = sum over images of dy [Og, L] . col^T, per group.
template <class A>
void backward_weights(const Geom& g, const A* x, const A* dy, A* dw) {
  const int64_t G = g.groups, Cg = g.C / G, Og = g.O / G, K = Cg * g.k_size(), L = g.out_size(), IN = g.in_size();
  const bool pw = is_pointwise(g);
  const int64_t rows = g.out[0] * g.out[1], rt = rows_per_tile(g);
  const int64_t W = g.O * K;
  // Fixed blocks of images; block b accumulates images [N*b/nb, N*(b+1)/nb) in order.
  const int64_t nb = std::min<int64_t>(g.N, 8);
  std::vector<A> partial(static_cast<size_t>(std::max<int64_t>(nb - 1, 0) * W));
  auto block = [&](int64_t bi) {
    A* acc = bi == 0 ? dw : partial.data() + (bi - 1) * W;
    std::fill(acc, acc + W, A(0));
    Columns<A> col;
    for (int64_t n = g.N * bi / nb; n < g.N * (bi + 1) / nb; ++n)
      for (int64_t gi = 0; gi < G; ++gi) {
        const A* xg = x + (n * g.C + gi * Cg) * IN;
        const A* dyg = dy + (n * g.O + gi * Og) * L;
        A* dwg = acc + gi * Og * K;
        if (pw) {
          gemm(Og, K, L, dyg, L, 1, xg, 1, L, A(1), dwg, K);
          continue;
        }
        for (int64_t r0 = 0; r0 < rows; r0 += rt) {
          const int64_t r1 = std::min(rows, r0 + rt), Lt = (r1 - r0) * g.out[2];
          A* c = col.get(K * Lt);
          im2col(g, xg, Cg, r0, r1, c);
          gemm(Og, K, Lt, dyg + r0 * g.out[2], L, 1, c, 1, Lt, A(1), dwg, K);
        }
      }
  };
  if (nb <= 1 || num_threads() <= 1) {
    for (int64_t bi = 0; bi < nb; ++bi) block(bi);
  } else {
    parallel_blocks(nb, block);
  }
  if (nb == 0) std::fill(dw, dw + W, A(0));
  for (int64_t bi = 1; bi < nb; ++bi) {
    const A* p = partial.data() + (bi - 1) * W;
    for (int64_t i = 0; i < W; ++i) dw[i] += p[i];
  }
}

template <class A>
using Stage = std::vector<A>;

/// x, opaque to the optimiser: a product passed through it is not contracted with the sum after
/// it into a fused multiply-add (the separate Mul and Add kernels round each).
template <class A>
inline A no_contract(A x) {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
  asm("" : "+x"(x));
#endif
  return x;
}

/// The fused max pool of a Conv (ops.def bit 5) over its computed result `full` [N, O, *g.out]
/// (type A), written to the op's output (staged through `to`): the MaxPool kernel, so bitwise
/// the separate op.
template <class T, class A>
void max_pool_after(const ir::Op& op, const Geom& g, const A* full, void* out, std::vector<A>& to) {
  const ir::ConvAttrs ca = ir::ConvAttrs::decode(op);
  const DType at = std::is_same_v<A, double> ? DType::F64 : DType::F32;
  ir::Op p;
  p.kind = ir::OpKind::MaxPool;
  // dilation 1, floor mode, values only
  ir::PoolAttrs{.nsp = 2,
                .kernel = ca.pool_kernel,
                .stride = ca.pool_stride,
                .padding = ca.pool_padding,
                .dilation = {1, 1},
                .ceil_mode = false,
                .with_indices = false}
      .encode(p);
  p.inputs = {ir::contiguous_desc(Shape{g.N, g.O, g.out[1], g.out[2]}, at)};
  p.outputs = {ir::contiguous_desc(op.outputs[0].shape, at), ir::contiguous_desc(Shape{0}, DType::I64)};
  A* y = stage_out<T, A>(out, op.outputs[0], to);
  void* pin[1] = {const_cast<A*>(full)};
  void* pout[2] = {y, nullptr};
  k_MaxPool(p, pin, pout);
  finish_out<T, A>(out, op.outputs[0], y);
}

/// The max pool fused after a convolution (ops.def), as PoolAfter.
conv::PoolAfter pool_after(const ir::Op& op, const ir::ConvAttrs& ca) {
  conv::PoolAfter pa;
  for (int i = 0; i < 2; ++i) {
    pa.k[i] = ca.pool_kernel[static_cast<size_t>(i)];
    pa.s[i] = ca.pool_stride[static_cast<size_t>(i)];
    pa.p[i] = ca.pool_padding[static_cast<size_t>(i)];
    pa.out[i] = op.outputs[0].shape[static_cast<size_t>(2 + i)];
  }
  return pa;
}

/// Runs one of the three ops on type T (A: the compute type).
template <class T>
void run_conv(const ir::Op& op, void* const* in, void* const* out) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const ir::ConvAttrs ca = ir::ConvAttrs::decode(op);
  const Geom g = make_geom(op, ca);
  const bool has_bias = ir::conv_has_bias(op), has_res = ca.has_residual();
  const bool has_scale = ca.has_scale(), has_shift = ca.has_shift();
  Stage<A> t0, t1, t2, t3, t4, t5, to;
  const A* a0 = stage_in<T, A>(in[0], op.inputs[0], t0);
  const A* a1 = stage_in<T, A>(in[1], op.inputs[1], t1);
  const A* bias = has_bias ? stage_in<T, A>(in[2], op.inputs[2], t2) : nullptr;
  const size_t ri = op.inputs.size() - 1, si = ir::conv_scale_input(op), ti = si + (has_scale ? 1 : 0);
  const A* res_in = has_res ? stage_in<T, A>(in[ri], op.inputs[ri], t3) : nullptr;
  const A* scale = has_scale ? stage_in<T, A>(in[si], op.inputs[si], t4) : nullptr;
  const A* shift = has_shift ? stage_in<T, A>(in[ti], op.inputs[ti], t5) : nullptr;
  // A fused max pool (ops.def): the convolution and its epilogue run into `full`, then the pool
  // (or oneDNN pools each thread's blocked output, onednn_forward_maxpool).
  const bool pooled = op.kind == ir::OpKind::Conv && ca.has_pool();
  // The pooled path's full result is made only when oneDNN's pooled form does not run.
  Stage<A> full;
  A* res = pooled ? nullptr : stage_out<T, A>(out[0], op.outputs[0], to);
  auto full_result = [&] {
    if (!res) {
      full.resize(static_cast<size_t>(g.N * g.O * g.out_size()));
      res = full.data();
    }
  };
  // The oneDNN path applies the epilogue itself, per share of images (Note [Convolution
  // activations] in conv_onednn.cpp).
  const int64_t act = ca.activation();  // 1 relu, 2 clamp
  const bool relu = act == 1, clamp = act == 2;
  const A clo = clamp ? static_cast<A>(ca.clamp_lo) : A(0), chi = clamp ? static_cast<A>(ca.clamp_hi) : A(0);
  bool done = false;
  if constexpr (std::is_same_v<T, float>) {
    // The content stamps of the operands the kernel reads or writes in place (not staged copies).
    conv::Stamps st;
    st.x = a0 != t0.data() ? op.inputs[0].stamp : 0;
    st.w = a1 != t1.data() ? op.inputs[1].stamp : 0;
    st.residual = has_res && res_in != t3.data() ? op.inputs[ri].stamp : 0;
    st.y = res != to.data() && !pooled ? op.outputs[0].stamp : 0;
    const uint64_t w_stamp = st.w;
    conv::PostOp post;
    if (relu) post.kind = conv::PostOp::Relu;
    if (clamp) {
      post.kind = conv::PostOp::Clip;
      post.lo = clo;
      post.hi = chi;
    }
    post.residual = res_in;
    post.scale = scale;
    post.shift = shift;
    if (op.kind == ir::OpKind::Conv && conv::direct_applies(g)) {  // Note [Direct convolution]
      if (pooled) {
        float* y = stage_out<T, A>(out[0], op.outputs[0], to);
        if (conv::direct_forward_maxpool(g, a0, a1, bias, post, pool_after(op, ca), y, w_stamp))
          return finish_out<T, A>(out[0], op.outputs[0], y);
      }
      full_result();
      done = conv::direct_forward(g, a0, a1, bias, res, post, w_stamp);
    }
    if (onednn::enabled() && !done) {
      if (op.kind == ir::OpKind::Conv) {
        if (pooled) {
          const conv::PoolAfter pa = pool_after(op, ca);
          float* y = stage_out<T, A>(out[0], op.outputs[0], to);
          conv::Stamps sp = st;
          sp.y = y != to.data() ? op.outputs[0].stamp : 0;
          if (conv::onednn_forward_maxpool(g, a0, a1, bias, post, pa, y, sp))
            return finish_out<T, A>(out[0], op.outputs[0], y);
        }
        full_result();
        done = conv::onednn_forward(g, a0, a1, bias, res, post, st);
      } else if (op.kind == ir::OpKind::ConvTranspose)
        done = conv::onednn_backward_data(g, a0, a1, bias, res, w_stamp);
      else
        done = conv::onednn_backward_weights(g, a0, a1, res);
    }
  }
  full_result();
  if (!done) {
    if (op.kind == ir::OpKind::Conv)
      forward(g, a0, a1, bias, res);
    else if (op.kind == ir::OpKind::ConvTranspose)
      backward_data(g, a0, a1, bias, res);
    else
      backward_weights(g, a0, a1, res);
  }
  if ((act || has_res || has_scale || has_shift) && !done) {
    // As the Mul, Add, Relu and Clamp kernels, each rounding: relu is x < 0 ? 0 : x, clamp
    // min(max(x, lo), hi) (NaN passes through both).
    const int64_t plane = g.out_size();
    parallel_for(g.N * g.O, std::max<int64_t>(1, 32768 / std::max<int64_t>(plane, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t p = lo; p < hi; ++p) {
        const int64_t c = p % g.O;
        A* y = res + p * plane;
        const A* r = res_in ? res_in + p * plane : nullptr;
        for (int64_t i = 0; i < plane; ++i) {
          A v = y[i];
          if (scale) v = no_contract(v * scale[c]);
          if (shift) v = v + shift[c];
          if (r) v = v + r[i];
          if (relu) v = v < A(0) ? A(0) : v;
          if (clamp) v = std::min(std::max(v, clo), chi);
          y[i] = v;
        }
      }
    });
  }
  if (pooled) return max_pool_after<T, A>(op, g, res, out[0], to);
  finish_out<T, A>(out[0], op.outputs[0], res);
}

void dispatch(const ir::Op& op, void* const* in, void* const* out) {
  KILN_SWITCH_FLOAT(op.inputs[0].dtype, ir::op_name(op.kind).data(), T, run_conv<T>(op, in, out));
}

}  // namespace

void k_Conv(const ir::Op& op, void* const* in, void* const* out) { dispatch(op, in, out); }
void k_ConvTranspose(const ir::Op& op, void* const* in, void* const* out) { dispatch(op, in, out); }
void k_ConvWeightGrad(const ir::Op& op, void* const* in, void* const* out) { dispatch(op, in, out); }

}  // namespace kiln::cpu
