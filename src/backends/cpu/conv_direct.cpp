// SPDX-License-Identifier: MIT OR Apache-2.0
// The direct forward convolution (f32, plain layouts in and out).
//
// Note [Direct convolution]
// oneDNN's forward kernels (and any kernel that broadcasts one input value per multiply-add)
// issue one load per multiply-add when a convolution has a single 16-channel output block, and
// on AVX-512 cores with two FMA units the loads, not the multiply-adds, then bound the speed:
// ResNet's 16-channel 3x3 convolutions ran at about half the FMA peak (12.6 µs for 16 -> 16 on
// 16x16, where the multiply-adds alone take 6.6). The direct kernel (conv_direct_hwy.cpp) turns
// the loop around: it holds a tile of outputs of one 16-channel block in registers (up to 16
// positions of a row, or 2-16 whole rows of width 8 or less) and, per input row and channel,
// broadcasts each input value once and multiplies it into every output of the tile it reaches
// (3 for a 3-wide kernel at stride 1). It reads the plain input [N, C, H, W] as it is (no
// reorder; the padding columns are skipped by the tile's edge variants, so at most one per
// side), the weights packed as [O/16][C][KH][KW][16] (kept across calls as oneDNN's reordered
// weights are: registered constants, or from the second call with the same content stamp), and
// finishes each tile in registers: a 16 x 16 transpose to channel rows, the epilogue (scale,
// shift, residual, activation) and plain stores. Threads split (image, block, row) units. It
// covers 2-d convolutions of one group, dilation 1, kernel width 1 or 3 and width stride 1 or 2
// (any kernel height and height stride), output channels a multiple of 16, f32, on x86 targets
// with 16-lane vectors, and small images (direct_applies): larger ones keep oneDNN, whose cache
// blocking the direct kernel lacks; a 1-wide kernel gains only oneDNN's per-call cost, so only
// the smallest take it. KILN_CONV_DIRECT=0 (or set_direct) turns it off. The bias starts the
// sums: their rounding differs from oneDNN's in the last bits.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "backends/cpu/conv_impl.h"
#include "backends/cpu/onednn.h"
#include "backends/cpu/pool_vec.h"
#include "core/parallel.h"
#include "kiln/device.h"

namespace kiln::cpu::conv {

namespace {

/// Images of at most this many multiply-adds use the direct kernel: measured against oneDNN 2.6
/// on 3x3 convolutions of 0.2M to 29M multiply-adds (docs/convolution.md), it was ahead up to
/// 9.4M on one and two threads and behind at 29M on two.
constexpr double kMaxDirectMacs = double(1 << 24);
constexpr double kMaxPointwiseMacs = double(1 << 18);
/// A thread's share of rows does at least this many multiply-adds.
constexpr double kMinShareMacs = double(1 << 16);

std::atomic<bool>& direct_on() {
  static std::atomic<bool> on = [] {
    const char* e = std::getenv("KILN_CONV_DIRECT");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

bool kernel_available() {
  static const bool ok = direct_rows_f32(DirectBand{}, 0, 0, 0);
  return ok;
}

/// Weights packed as [O/16][C][KH][KW][16], from a 64-byte boundary (a vector load per line).
using PackedW = onednn::Floats;
/// A packed weight kept per weight pointer and shape under an id (the registration id, or the
/// content stamp).
struct Packed {
  uint64_t id = 0;
  std::shared_ptr<const PackedW> w;
};
using PackKey = std::tuple<const float*, int64_t, int64_t, int64_t, int64_t>;
std::mutex g_pack_mu;
std::map<PackKey, Packed> g_packs;
size_t g_pack_bytes = 0;
constexpr size_t kPackBudget = size_t{128} << 20;
constexpr size_t kMaxPacks = 1024;

std::shared_ptr<PackedW> pack(const Geom& g, const float* w) {
  const int64_t OB = g.O / 16, taps = g.C * g.k[1] * g.k[2];
  auto out = std::make_shared<PackedW>(static_cast<size_t>(OB * taps * 16));
  for (int64_t ob = 0; ob < OB; ++ob)
    for (int64_t l = 0; l < 16; ++l) {
      const float* src = w + (ob * 16 + l) * taps;
      float* dst = out->data() + ob * taps * 16 + l;
      for (int64_t t = 0; t < taps; ++t) dst[t * 16] = src[t];
    }
  return out;
}

/// The packed form of w: kept when w is a registered constant, or from the second call with the
/// same content stamp (training, whose steps write the weights, packs on every call); past the
/// budget, packed on every call.
std::shared_ptr<const PackedW> packed_weights(const Geom& g, const float* w, uint64_t stamp) {
  const uint64_t reg = registered_constant_id(w), id = reg ? reg : stamp;
  if (!id) return pack(g, w);
  std::lock_guard<std::mutex> lock(g_pack_mu);
  const PackKey key{w, g.O, g.C, g.k[1], g.k[2]};
  auto it = g_packs.find(key);
  if (it != g_packs.end() && it->second.id == id && it->second.w) return it->second.w;
  if (it == g_packs.end()) {
    if (g_packs.size() >= kMaxPacks) {
      g_packs.clear();
      g_pack_bytes = 0;
    }
    it = g_packs.emplace(key, Packed{}).first;
  }
  Packed& p = it->second;
  const bool keep = reg || p.id == id;  // registered, or the second call with these contents
  if (p.w) g_pack_bytes -= p.w->size() * sizeof(float);
  p.w = nullptr;
  p.id = id;
  auto fresh = pack(g, w);
  if (keep && g_pack_bytes + fresh->size() * sizeof(float) <= kPackBudget) {
    g_pack_bytes += fresh->size() * sizeof(float);
    p.w = fresh;
  }
  return fresh;
}

}  // namespace

bool direct_applies(const Geom& g) {
  if (g.nsp != 2 || g.groups != 1 || g.O % 16 != 0 || g.C < 1 || g.dil[1] != 1 || g.dil[2] != 1) return false;
  if (!(g.k[2] == 1 || g.k[2] == 3) || !(g.stride[2] == 1 || g.stride[2] == 2) || g.k[1] > 7) return false;
  if (g.k[1] == 1 && g.k[2] == 1 && g.stride[1] == 1 && g.stride[2] == 1) return false;  // a matrix product
  // Fewer than 16 output positions leave too few accumulators to keep the FMA units busy.
  if (g.pad[1] >= g.k[1] || g.out_size() < 16) return false;
  // The kernel skips at most one padding column on either side (DirectBand).
  const int64_t right = (g.out[2] - 1) * g.stride[2] + g.k[2] - g.pad[2] - g.in[2];
  if (g.pad[2] > 1 || right > 1 || (g.k[2] == 1 && (g.pad[2] > 0 || right > 0))) return false;
  const double macs = double(g.O) * double(g.out_size()) * double(g.C) * double(g.k_size());
  // A 1-wide kernel feeds one multiply-add per load, as oneDNN's does: only the smallest gain
  // (oneDNN's per-call cost).
  const double most = g.k[2] == 1 ? kMaxPointwiseMacs : kMaxDirectMacs;
  return macs <= most && direct_on().load(std::memory_order_relaxed) && kernel_available();
}

void set_direct(bool on) { direct_on().store(on); }
bool direct_available() { return kernel_available(); }

namespace {

/// Runs the direct kernel over g into the plain y or, when yb is set, the blocked yb.
void run_direct(const Geom& g, const float* x, const float* w, const float* b, const PostOp& post, uint64_t w_stamp,
                float* y, float* yb) {
  const int64_t OB = g.O / 16, plane = g.out_size(), OH = g.out[1];
  thread_local std::vector<float> bias;
  const std::shared_ptr<const PackedW> packed = packed_weights(g, w, w_stamp);
  bias.assign(static_cast<size_t>(g.O), 0.0f);
  if (b) std::copy(b, b + g.O, bias.begin());
  DirectBand band;
  band.C = g.C;
  band.CS = g.in_size();
  band.H = g.in[1];
  band.W = g.in[2];
  band.row0 = g.pad[1];
  band.col0 = g.pad[2];
  band.SH = g.stride[1];
  band.SW = g.stride[2];
  band.KH = g.k[1];
  band.KW = g.k[2];
  band.OH = OH;
  band.OW = g.out[2];
  band.wp = packed->data();
  band.bias = bias.data();
  band.scale = post.scale;
  band.shift = post.shift;
  band.lo = post.lo_bound();
  band.hi = post.hi_bound();
  // Work units: (image, channel block, output row), rows innermost.
  const int64_t units = g.N * OB * OH;
  const double unit_macs = 16.0 * double(band.OW) * double(g.C) * double(g.k_size());
  const auto grain = static_cast<int64_t>(std::max(1.0, std::ceil(kMinShareMacs / unit_macs)));
  parallel_for(units, grain, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1;) {
      const int64_t n = u / (OB * OH), ob = u / OH % OB, oh0 = u % OH;
      const int64_t oh1 = std::min(OH, oh0 + (u1 - u));
      DirectBand part = band;
      part.x = x + n * g.C * band.CS;
      part.residual = post.residual ? post.residual + n * g.O * plane : nullptr;
      part.y = y ? y + n * g.O * plane : nullptr;
      part.yb = yb ? yb + n * g.O * plane : nullptr;
      direct_rows_f32(part, ob, oh0, oh1);
      u += oh1 - oh0;
    }
  });
}

}  // namespace

bool direct_forward(const Geom& g, const float* x, const float* w, const float* b, float* y, const PostOp& post,
                    uint64_t w_stamp) {
  if (!direct_applies(g)) return false;
  run_direct(g, x, w, b, post, w_stamp, y, nullptr);
  return true;
}

void pool_blocks(const float* x, int64_t H, int64_t W, const PoolAfter& pool, float* pooled, float* y, int64_t b0,
                 int64_t b1, int64_t o0, int64_t o1) {
  const int64_t OH = pool.out[0], OW = pool.out[1];
  if (o1 < 0) o1 = OH;
  vec::max_pool_blocked16_f32(x + b0 * H * W * 16, b1 - b0, H, W, pool.k, pool.s, pool.p, OH, OW,
                              pooled + b0 * OH * OW * 16, o0, o1);
  unblock16_f32(pooled, b0, b1, OH * OW, y, o0 * OW, o1 * OW);
}

bool pool_fits(const PoolAfter& pool, int64_t H, int64_t W) {
  const int64_t in_sz[2] = {H, W};
  for (int i = 0; i < 2; ++i) {
    const int64_t k = pool.k[i], s = pool.s[i], p = pool.p[i];
    if (k < 1 || s < 1 || p < 0 || p > k / 2 || pool.out[i] < 1 || pool.out[i] != (in_sz[i] + 2 * p - k) / s + 1)
      return false;
  }
  return true;
}

bool direct_forward_maxpool(const Geom& g, const float* x, const float* w, const float* b, const PostOp& post,
                            const PoolAfter& pool, float* y, uint64_t w_stamp) {
  if (post.residual || !direct_applies(g) || !pool_fits(pool, g.out[1], g.out[2])) return false;
  const int64_t H = g.out[1], W = g.out[2], OH = pool.out[0], OW = pool.out[1], planes = g.N * (g.O / 16);
  thread_local std::vector<float> conv_buf, pooled_buf;
  conv_buf.resize(static_cast<size_t>(g.N * g.O * H * W));
  pooled_buf.resize(static_cast<size_t>(g.N * g.O * OH * OW));
  run_direct(g, x, w, b, post, w_stamp, nullptr, conv_buf.data());
  // The pool reads rows other shares wrote: a second region, over (plane, pooled rows).
  const int64_t chunks =
      std::max<int64_t>(1, std::min<int64_t>(OH, int64_t(num_threads()) / std::max<int64_t>(planes, 1)));
  float *const cb = conv_buf.data(), *const pb = pooled_buf.data();
  parallel_for(planes * chunks, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t p = u / chunks, c = u % chunks;
      pool_blocks(cb, H, W, pool, pb, y, p, p + 1, OH * c / chunks, OH * (c + 1) / chunks);
    }
  });
  return true;
}

}  // namespace kiln::cpu::conv
