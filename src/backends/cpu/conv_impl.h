// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Internal to the convolution kernels (conv.cpp, conv_onednn.cpp): one geometry record in
// forward-convolution terms, shared by Conv, ConvTranspose (= conv backward-data) and
// ConvWeightGrad.
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace kiln::cpu::conv {

/// A forward convolution x [N, C, *in] * w [O, C/groups, *k] -> y [N, O, *out], padding
/// symmetric. Spatial arrays hold nsp (1..3) entries. ConvTranspose runs the conv backward
/// from y to x, so its input is "y" here and its output "x".
struct Geom {
  int nsp = 2;
  int64_t N = 0, C = 0, O = 0, groups = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
};

/// What a forward convolution applies to its output: y = act((conv + bias) * scale[c] + shift[c]
/// + residual), in that order, each step rounded as the separate op would (no fused
/// multiply-add); the activation none, relu, or clip to [lo, hi]; scale and shift (may be null)
/// hold one value per output channel; residual (may be null) is laid out as y (contiguous
/// [N, O, *out]).
struct PostOp {
  enum Kind : int { None = 0, Relu = 1, Clip = 2 };
  int kind = None;
  float lo = 0, hi = 0;
  const float* residual = nullptr;
  const float *scale = nullptr, *shift = nullptr;
  bool any() const { return kind != None || residual || scale || shift; }
  /// The clamp bounds post_f32 takes for the activation (none: no bounds; relu: [0, inf)).
  float lo_bound() const { return kind == None ? -INFINITY : kind == Relu ? 0.f : lo; }
  float hi_bound() const { return kind == Clip ? hi : INFINITY; }
  bool per_channel() const { return scale || shift; }
};

/// y[i] = min(max(y[i] (* s) (+ t) (+ r[i]), lo), hi) over n elements (s, t, r may be null),
/// each step rounded (no fused multiply-add), the clamp as the scalar `v < lo ? lo : (v > hi ?
/// hi : v)`: NaN passes through (conv_hwy.cpp, SIMD).
void post_f32(float* y, const float* r, int64_t n, const float* s, const float* t, float lo, float hi);

/// post_f32 over planes [p0, p1) of y ([N, C, plane]; plane p is channel p % C): s and t (may be
/// null) hold one value per channel, the residual r (may be null) is laid out as y. One call
/// for many small planes (a per-plane call costs more than a plane of a few elements).
void post_planes_f32(float* y, const float* r, int64_t p0, int64_t p1, int64_t C, int64_t plane, const float* s,
                     const float* t, float lo, float hi);

/// post_f32 over blocks [b0, b1) of y in oneDNN's blocked 16-channel layout ([N, C/16, plane,
/// 16]; block b holds channels (b % cblocks) * 16 ...+ 16): s and t (may be null) hold one value
/// per channel, the residual r (may be null) is laid out as y. plain (may be null): the result is
/// also written there in the plain layout ([N, C, plane]; block b's channels at plain + b * 16 *
/// plane), as unblock16_f32. Only positions [q0, q1) of each block's plane (q1 < 0: plane).
void post_blocked16_f32(float* y, const float* r, int64_t b0, int64_t b1, int64_t plane, int64_t cblocks,
                        const float* s, const float* t, float lo, float hi, float* plain = nullptr, int64_t q0 = 0,
                        int64_t q1 = -1);
/// Copies blocks [b0, b1) of y in the blocked 16-channel layout ([N, C/16, plane, 16], C a
/// multiple of 16) to the plain layout [N, C, plane]: the reorder oneDNN would run, without its
/// call cost (a few tenths of a microsecond, which small convolutions feel). Only positions
/// [q0, q1) of each plane (q1 < 0: plane).
void unblock16_f32(const float* y, int64_t b0, int64_t b1, int64_t plane, float* plain, int64_t q0 = 0,
                   int64_t q1 = -1);

/// Whether direct_forward runs g (Note [Direct convolution] in conv_direct.cpp).
bool direct_applies(const Geom& g);
/// Turns the direct kernel on or off (KILN_CONV_DIRECT=0 starts with it off).
void set_direct(bool on);
/// Whether the running CPU has the direct kernel.
bool direct_available();
/// y = post(conv(x, w) + b) (b may be null) by the direct kernel, plain f32 buffers; w's packed
/// form is kept as onednn_forward keeps its reordered weights (w_stamp: w's content stamp, 0: not
/// known). False, doing nothing, when it does not apply.
bool direct_forward(const Geom& g, const float* x, const float* w, const float* b, float* y, const PostOp& post,
                    uint64_t w_stamp);
/// What the direct kernel reads and writes (conv_direct_hwy.cpp): one image x (C channels CS
/// floats apart, of H rows of pitch W), output (oh, ow)'s receptive field starting at row oh * SH
/// - row0 and column ow * SW - col0 (col0 <= 1, and at most one column past the right edge: the
/// kernel skips one padding column on either side); weights packed as [O/16][C][KH][KW][16] and
/// a bias of O values; the image's plain output y [O, OH, OW], written as post(conv + bias) with
/// post's scale, shift, residual (laid out as y; each may be null) and clamp [lo, hi] (PostOp),
/// or, when yb is set, its output blocked by 16 channels [O/16, OH * OW, 16] (no residual).
struct DirectBand {
  const float* x = nullptr;
  int64_t C = 0, CS = 0, H = 0, W = 0, row0 = 0, col0 = 0, SH = 1, SW = 1, KH = 1, KW = 1, OH = 0, OW = 0;
  const float* wp = nullptr;
  const float* bias = nullptr;
  const float *scale = nullptr, *shift = nullptr, *residual = nullptr;
  float lo = 0, hi = 0;
  float* y = nullptr;
  float* yb = nullptr;
};
/// The direct kernel over output rows [oh0, oh1) of channel block ob; false when
/// the running CPU has no such kernel.
bool direct_rows_f32(const DirectBand& band, int64_t ob, int64_t oh0, int64_t oh1);
/// The registration id of data (register_constant), 0 when it is not a registered constant.
uint64_t registered_constant_id(const void* data);

/// oneDNN paths (f32, contiguous buffers). Each returns false when oneDNN is not built in or
/// cannot run the problem; the caller then uses the portable kernels.
/// The content stamps (TensorDesc::stamp; 0: not known) of a forward convolution's operands: with
/// w's, w's reordered copy is kept for the next call with the same stamp; with y's, y's blocked
/// form is kept for the next convolution or max pool that reads it, and x's and the residual's
/// find such forms (Note [Kept blocked outputs] in conv_onednn.cpp).
struct Stamps {
  uint64_t x = 0, w = 0, residual = 0, y = 0;
};
/// y = post(conv(x, w) + b) (b may be null; see PostOp).
bool onednn_forward(const Geom& g, const float* x, const float* w, const float* b, float* y, const PostOp& post = {},
                    const Stamps& stamps = {});
/// Max pooling run on a forward convolution's output (values only, 2 spatial dims): kernel k,
/// stride s, symmetric padding p <= k / 2, dilation 1, floor mode; out: the pooled size.
struct PoolAfter {
  int64_t k[2] = {1, 1}, s[2] = {1, 1}, p[2] = {0, 0}, out[2] = {1, 1};
};
/// Whether pool fits PoolAfter's contract on an H x W input.
bool pool_fits(const PoolAfter& pool, int64_t H, int64_t W);
/// Max-pools blocks [b0, b1) of the blocked 16-channel planes x (H x W each; block b at
/// x + b H W 16) into the same blocks of `pooled` (pool.out each), pooled rows [o0, o1) (o1 < 0:
/// all), and copies those rows to the plain output y as unblock16_f32 does.
void pool_blocks(const float* x, int64_t H, int64_t W, const PoolAfter& pool, float* pooled, float* y, int64_t b0,
                 int64_t b1, int64_t o0 = 0, int64_t o1 = -1);
/// y = maxpool(post(conv(x, w) + b)) by the direct kernel (post takes no residual): the
/// convolution's blocked output is pooled by 16-channel blocks (bitwise the plain pool of the
/// plain result) and only the pooled result written plain. False, doing nothing, when it does
/// not apply.
bool direct_forward_maxpool(const Geom& g, const float* x, const float* w, const float* b, const PostOp& post,
                            const PoolAfter& pool, float* y, uint64_t w_stamp);
/// y = maxpool(post(conv(x, w) + b)), y [N, O, out0, out1]: the pool reads the convolution's
/// blocked output while each thread's images are in its cache, and only the pooled result is
/// reordered to plain (post takes no residual). Bitwise the two ops one after the other. With
/// stamps.w, w's reordered copy is kept; with stamps.y (y's), y's blocked form (Note [Kept
/// blocked outputs]). False,
/// doing nothing, when that does not apply (no blocked 16-channel output, one image on several
/// threads, other geometries); the caller then runs them one by one.
bool onednn_forward_maxpool(const Geom& g, const float* x, const float* w, const float* b, const PostOp& post,
                            const PoolAfter& pool, float* y, const Stamps& stamps = {});
/// y [N, C, pool.out] = maxpool(x [N, C, H, W]) read from the blocked forms a convolution kept of x
/// (x_stamp, the whole tensor's or one per chunk of images, covering it); y's blocked forms are
/// kept in turn, part by part, under y_stamp (0: not kept). Bitwise the plain max pool. False, doing nothing, when x
/// has no kept form or the pool does not fit PoolAfter.
bool onednn_maxpool_kept(const float* x, uint64_t x_stamp, const int64_t (&dims)[4], const PoolAfter& pool, float* y,
                         uint64_t y_stamp);
/// Turns the kept blocked forms on or off (KILN_CONV_KEEP=0 starts with them off).
void set_keep_blocked(bool on);
/// How many convolution, residual and pool inputs were read from kept forms so far.
int64_t kept_reads();
/// How many convolutions over one image were split over the threads so far (Note [One-image
/// split] in conv_onednn_split.cpp).
int64_t one_image_splits();
/// y = post_b(conv_b(post_a(conv_a(x, wa) + ba), wb) + bb) (biases may be null; pa takes no
/// residual, pb may), the
/// intermediate kept in oneDNN's blocked layout (no reorder to plain and back). False, doing
/// nothing, when that does not apply (1x1 or otherwise unblocked convolutions, layouts that
/// differ); the caller then runs the two convolutions one by one.
bool onednn_forward_pair(const Geom& ga, const float* x, const float* wa, const float* ba, const PostOp& pa,
                         const Geom& gb, const float* wb, const float* bb, const PostOp& pb, float* y);
/// x = conv backward-data(y, w) + b (b [C] may be null): the ConvTranspose op (w_stamp as for
/// onednn_forward).
bool onednn_backward_data(const Geom& g, const float* y, const float* w, const float* b, float* x,
                          uint64_t w_stamp = 0);
/// dw = conv backward-weights(x, dy).
bool onednn_backward_weights(const Geom& g, const float* x, const float* dy, float* dw);

/// Declares [data, data + nbytes) immutable until unregister_constant(data) (the ONNX run-time
/// path's initializers): the oneDNN path then reorders such a weight into its blocked layout
/// once and reuses it, instead of on every call. Registering the same pointer again replaces
/// the old registration (and invalidates what was cached for it).
void register_constant(const void* data, size_t nbytes);
void unregister_constant(const void* data);

}  // namespace kiln::cpu::conv
