// SPDX-License-Identifier: MIT OR Apache-2.0
// oneDNN convolution (f32): forward, backward-data (ConvTranspose) and backward-weights.
//
// Note [oneDNN convolution]: Kiln tensors are plain NCHW (ncw / nchw / ncdhw, weights oihw or
// goihw with groups). oneDNN's fast direct kernels want blocked layouts (nChw16c, OIhw16i16o,
// ...), so most primitives are created with format `any` and the plain operands are reordered
// into the layouts oneDNN picked and back (PyTorch's ideep does the same). Two exceptions: 1x1
// convolutions with stride 1 and no padding are matrix products per image (oneDNN's sgemm on
// the NCHW buffers, no reorders), and backward-data onto very few channels (a first layer) uses
// plain layouts, since blocking pads the channels to 16. Primitive descriptors, primitives,
// reorders and staging buffers are cached by shape key (creation costs far more than a small
// convolution); the key includes the thread count, because oneDNN fixes its work split when a
// primitive is created. KILN_CONV_LAYOUT=plain|blocked|nhwc forces one layout (measurements; nhwc
// was slower than blocked on the ResNet shapes with oneDNN 2.6). A forward conv over a batch on
// several threads splits by images (batch_chunks): one parallel region, each thread running a
// single-threaded primitive of its own (cache slot, user-mode scratchpad) over its images.
#include "backends/cpu/conv_impl.h"
#include "backends/cpu/conv_onednn_entry.h"
#include "backends/cpu/conv_onednn_kept.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/onednn.h"

#if KILN_WITH_ONEDNN
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/backend.h"
#include "core/parallel.h"
#include "kiln/device.h"

namespace kiln::cpu::conv {

using namespace dnn;

namespace {

/// KILN_CONV_LAYOUT=plain / blocked / nhwc forces one layout choice (measurements); 0 = automatic.
int layout_override() {
  static const int v = [] {
    const char* e = std::getenv("KILN_CONV_LAYOUT");
    if (e && std::strcmp(e, "plain") == 0) return 1;
    if (e && std::strcmp(e, "blocked") == 0) return 2;
    if (e && std::strcmp(e, "nhwc") == 0) return 3;
    return 0;
  }();
  return v;
}

/// Plain NCHW operands (oneDNN's GEMM-based kernels, no reorders) or blocked ones. Blocked
/// layouts pad channels to 16, which wastes most of the work when the gradient's channel count
/// is tiny (a first layer's backward-data on 1..3 channels).
bool use_plain(Kind kind, const Geom& g) {
  if (layout_override()) return layout_override() == 1;
  return kind == Kind::BwdData && g.C / g.groups < 8 && g.groups == 1;
}

/// 1x1 convolutions with stride 1, no padding, one group: plain matrix products per image.
bool is_pointwise(const Geom& g) {
  if (g.groups != 1 || layout_override()) return false;
  for (int i = 0; i < 3; ++i)
    if (g.k[i] != 1 || g.stride[i] != 1 || g.pad[i] != 0) return false;
  return true;
}

using Key = std::array<int64_t, 24>;

Key make_key(Kind k, const Geom& g, bool bias, int nt, int slot = 0) {
  Key key{};
  size_t i = 0;
  key[i++] = static_cast<int64_t>(k);
  key[i++] = g.nsp;
  key[i++] = g.N;
  key[i++] = g.C;
  key[i++] = g.O;
  key[i++] = g.groups;
  key[i++] = bias;
  key[i++] = nt + (int64_t{slot} << 20);
  for (int d = 0; d < 3; ++d) {
    key[i++] = g.in[d];
    key[i++] = g.k[d];
    key[i++] = g.stride[d] | (g.pad[d] << 20) | (g.dil[d] << 40);
    key[i++] = g.out[d];  // with the left pad, the right one (a row share's padding is uneven)
  }
  return key;
}

}  // namespace

memory::dims dnn::sp_dims(const Geom& g, const int64_t* v) {
  memory::dims d;
  for (int i = 3 - g.nsp; i < 3; ++i) d.push_back(v[i]);
  return d;
}

namespace {

tag act_tag(int nsp) { return nsp == 1 ? tag::ncw : nsp == 2 ? tag::nchw : tag::ncdhw; }
tag wei_tag(int nsp, bool grouped) {
  if (grouped) return nsp == 1 ? tag::goiw : nsp == 2 ? tag::goihw : tag::goidhw;
  return nsp == 1 ? tag::oiw : nsp == 2 ? tag::oihw : tag::oidhw;
}

struct Descs {
  memory::desc src, wei, dst, bias;  // plain
  memory::dims strides, dil, pad_l, pad_r;
};

Descs make_descs(const Geom& g) {
  Descs d;
  memory::dims src{g.N, g.C}, dst{g.N, g.O}, wei;
  for (auto v : sp_dims(g, g.in)) src.push_back(v);
  for (auto v : sp_dims(g, g.out)) dst.push_back(v);
  const bool grouped = g.groups > 1;
  if (grouped)
    wei = {g.groups, g.O / g.groups, g.C / g.groups};
  else
    wei = {g.O, g.C};
  for (auto v : sp_dims(g, g.k)) wei.push_back(v);
  d.src = memory::desc(src, dt::f32, act_tag(g.nsp));
  d.dst = memory::desc(dst, dt::f32, act_tag(g.nsp));
  d.wei = memory::desc(wei, dt::f32, wei_tag(g.nsp, grouped));
  d.bias = memory::desc({g.O}, dt::f32, tag::x);
  for (int i = 3 - g.nsp; i < 3; ++i) {
    d.strides.push_back(g.stride[i]);
    d.dil.push_back(g.dil[i] - 1);
    d.pad_l.push_back(g.pad[i]);
    // The right padding that makes oneDNN's size formula give `out` exactly.
    d.pad_r.push_back((g.out[i] - 1) * g.stride[i] + (g.k[i] - 1) * g.dil[i] + 1 - g.in[i] - g.pad[i]);
  }
  return d;
}

memory::desc any_like(const memory::desc& md) { return memory::desc(md.dims(), dt::f32, tag::any); }
/// Activations: channels-last when KILN_CONV_LAYOUT=nhwc, else the layout oneDNN picks.
memory::desc act_like(const memory::desc& md) {
  if (layout_override() == 3) {
    const auto n = md.dims().size();
    return memory::desc(md.dims(), dt::f32, n == 3 ? tag::nwc : n == 4 ? tag::nhwc : tag::ndhwc);
  }
  return any_like(md);
}

// ---- constant weights (register_constant) ---------------------------------------------------

struct ConstRegistry {
  std::mutex mu;
  std::unordered_map<const void*, uint64_t> ids;  // data pointer -> registration id
  std::atomic<bool> any{false};
};
ConstRegistry& constants() {
  static ConstRegistry r;
  return r;
}

}  // namespace

uint64_t dnn::constant_id(const void* p) {
  ConstRegistry& r = constants();
  if (!r.any.load(std::memory_order_relaxed)) return 0;
  std::lock_guard<std::mutex> l(r.mu);
  auto it = r.ids.find(p);
  return it == r.ids.end() ? 0 : it->second;
}

namespace {

std::mutex g_cache_mu;
std::map<Key, std::unique_ptr<Entry>>& cache() {
  static std::map<Key, std::unique_ptr<Entry>> c;
  return c;
}

/// `user_scratch`: the primitive's scratchpad is the caller's (Entry::scratch), not oneDNN's
/// global one, which belongs to the creating thread (batch chunks run on other threads).
dnnl::convolution_forward::primitive_desc fwd_pd(const Descs& d, bool bias, bool plain, bool user_scratch = false) {
  using namespace dnnl;
  auto src = plain ? d.src : act_like(d.src), wei = plain ? d.wei : any_like(d.wei),
       dst = plain ? d.dst : act_like(d.dst);
  auto desc = bias ? convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, src, wei,
                                               d.bias, dst, d.strides, d.dil, d.pad_l, d.pad_r)
                   : convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, src, wei,
                                               dst, d.strides, d.dil, d.pad_l, d.pad_r);
  primitive_attr attr;
  if (user_scratch) attr.set_scratchpad_mode(scratchpad_mode::user);
  return convolution_forward::primitive_desc(desc, attr, onednn::engine());
}

std::unique_ptr<Entry> create(Kind kind, const Geom& g, bool bias, bool user_scratch) {
  using namespace dnnl;
  auto e = std::make_unique<Entry>();
  const Descs d = make_descs(g);
  const bool plain = use_plain(kind, g);
  if (kind == Kind::Fwd) {
    auto pd = fwd_pd(d, bias, plain, user_scratch);
    primitive_attr rattr;
    if (user_scratch) rattr.set_scratchpad_mode(scratchpad_mode::user);
    e->a.init(d.src, pd.src_desc(), true, rattr);
    e->b.init(d.wei, pd.weights_desc(), true, rattr);
    e->c.init(d.dst, pd.dst_desc(), false, rattr);
    e->out_blocked16 = e->c.reorder && g.O % 16 == 0 && e->c.used == blocked16(d.dst.dims());
    e->prim = std::make_unique<convolution_forward>(pd);
    if (user_scratch && pd.scratchpad_desc().get_size() > 0) {
      e->scratch_buf.resize(pd.scratchpad_desc().get_size() + 64);
      e->scratch = memory(pd.scratchpad_desc(), onednn::engine(), e->scratch_buf.data());
    }
    e->has_bias = bias;
  } else if (kind == Kind::BwdData) {
    auto hint = fwd_pd(d, false, plain);
    auto src = plain ? d.src : act_like(d.src), wei = plain ? d.wei : any_like(d.wei),
         dst = plain ? d.dst : act_like(d.dst);
    convolution_backward_data::desc desc(algorithm::convolution_direct, src, wei, dst, d.strides, d.dil, d.pad_l,
                                         d.pad_r);
    convolution_backward_data::primitive_desc pd(desc, onednn::engine(), hint);
    e->a.init(d.dst, pd.diff_dst_desc(), true);
    e->b.init(d.wei, pd.weights_desc(), true);
    e->c.init(d.src, pd.diff_src_desc(), false);
    e->prim = std::make_unique<convolution_backward_data>(pd);
  } else {
    auto hint = fwd_pd(d, false, plain);
    auto src = plain ? d.src : act_like(d.src), wei = plain ? d.wei : any_like(d.wei),
         dst = plain ? d.dst : act_like(d.dst);
    convolution_backward_weights::desc desc(algorithm::convolution_direct, src, wei, dst, d.strides, d.dil, d.pad_l,
                                            d.pad_r);
    convolution_backward_weights::primitive_desc pd(desc, onednn::engine(), hint);
    e->a.init(d.src, pd.src_desc(), true);
    e->b.init(d.dst, pd.diff_dst_desc(), true);
    e->c.init(d.wei, pd.diff_weights_desc(), false);
    e->prim = std::make_unique<convolution_backward_weights>(pd);
  }
  return e;
}

}  // namespace

/// The cached entry for this problem (created on first use); null when oneDNN cannot run it.
/// `slot` tells apart entries of the same problem used at the same time (batch chunks).
Entry* dnn::lookup(Kind kind, const Geom& g, bool bias, int nt, int slot) {
  const Key key = make_key(kind, g, bias, nt, slot);
  std::lock_guard<std::mutex> lock(g_cache_mu);
  auto it = cache().find(key);
  if (it != cache().end()) return it->second.get();
  std::unique_ptr<Entry> e;
  try {
    e = create(kind, g, bias, slot > 0);
  } catch (const dnnl::error&) {
    e = nullptr;  // unsupported: remembered, the portable path runs
  }
  if (cache().size() > 512) cache().clear();  // bound the memory held by many shapes
  Entry* p = e.get();
  cache()[key] = std::move(e);
  return p;
}

namespace {

bool usable(const Geom& g) {
  // Degenerate problems (empty dims) go to the portable path.
  if (g.N <= 0 || g.C <= 0 || g.O <= 0) return false;
  for (int i = 0; i < 3; ++i)
    if (g.in[i] <= 0 || g.out[i] <= 0) return false;
  return true;
}

/// Keeps op's staging buffer (its blocked form of the plain tensor at ptr, content stamp
/// `stamp`) and gives op a spare buffer of the same layout to stage into next time.
void keep_staged(Operand& op, uint64_t stamp, const float* ptr) {
  std::shared_ptr<Kept> k = spare_kept(op.used);
  std::swap(k->buf, op.buf);
  std::swap(k->mem, op.used_mem);
  if (!k->mem) k->mem = memory(k->md, onednn::engine(), k->buf.data());
  k->stamp = stamp;
  k->ptr = ptr;
  keep(std::move(k));
}

/// Small convolutions (a few microseconds) run on one thread: a parallel region costs about as
/// much as the work (measured: ResNet/MobileNet fixtures at batch 1, 2 threads, 1.1-1.7x at
/// 2^19; 2^20 keeps ResNet's 590k-MAC convs at batch 1 on one thread). Batches split by images
/// instead (batch_chunks), whatever their size.
constexpr double kMinParallelMacs = 1 << 20;
/// Batches of at least this much work split over the threads by images (batch_chunks).
constexpr double kMinSplitMacs = 1 << 16;

/// x[n, c, :] = post(x[n, c, :] + b[c]) over planes of `plane` elements (b may be null).
void bias_post(float* x, const float* b, int64_t N, int64_t C, int64_t plane, const PostOp& post) {
  const float lo = post.lo_bound(), hi = post.hi_bound();
  parallel_for(N * C, std::max<int64_t>(1, 32768 / std::max<int64_t>(plane, 1)), [&](int64_t l, int64_t h) {
    if (b) return post_planes_f32(x, nullptr, l, h, C, plane, nullptr, b, lo, hi);
    const float zero = 0.f;  // added even when 0, as the bias pass does (-0 + 0 = +0)
    post_f32(x + l * plane, nullptr, (h - l) * plane, nullptr, &zero, lo, hi);
  });
}

// Note [Convolution activations]
// The epilogue -- a per-channel scale and shift (a batch norm in eval mode), the residual, the
// activation (relu, clip) -- runs in Kiln's code, not as oneDNN post-ops: the post-ops compute
// relu and clip with max/min instructions that turn NaN into 0 (or the lower bound), where the
// Relu and Clip kernels (x < lo ? lo : ...) let NaN through, and they would round a scale and
// shift as one fused multiply-add. Each step rounds as the separate op (post_f32, Highway) and
// runs on a thread's share of the output right after the convolution, in that thread's cache.

}  // namespace

/// post applied to planes [p0, p1) of a convolution's output y [N, O, plane] (plane p is channel
/// p % O; the residual laid out as y); serial.
void dnn::post_planes(float* y, int64_t p0, int64_t p1, int64_t O, int64_t plane, const PostOp& post) {
  if (!post.any()) return;
  const float lo = post.lo_bound(), hi = post.hi_bound();
  const float* r = post.residual;
  if (!post.per_channel()) {
    post_f32(y + p0 * plane, r ? r + p0 * plane : nullptr, (p1 - p0) * plane, nullptr, nullptr, lo, hi);
    return;
  }
  post_planes_f32(y, r, p0, p1, O, plane, post.scale, post.shift, lo, hi);
}

namespace {

/// post_planes over all N * O planes, split over the threads.
void post_all(float* y, int64_t N, int64_t O, int64_t plane, const PostOp& post) {
  if (!post.any()) return;
  parallel_for(N * O, std::max<int64_t>(1, 32768 / std::max<int64_t>(plane, 1)),
               [&](int64_t p0, int64_t p1) { post_planes(y, p0, p1, O, plane, post); });
}

/// post's activation (no residual, no per-channel step) over n elements in any layout (oneDNN's
/// blocked buffers), split over the threads when `parallel`.
void post_flat(float* y, int64_t n, const PostOp& post, bool parallel) {
  if (post.kind == PostOp::None) return;
  const float lo = post.lo_bound(), hi = post.hi_bound();
  if (!parallel) return post_f32(y, nullptr, n, nullptr, nullptr, lo, hi);
  parallel_for(n, 32768, [&](int64_t a, int64_t b) { post_f32(y + a, nullptr, b - a, nullptr, nullptr, lo, hi); });
}

/// x[n, c, :] += b[c] over planes of `plane` elements.
void add_bias(float* x, const float* b, int64_t N, int64_t C, int64_t plane) {
  parallel_for(N * C, std::max<int64_t>(1, 32768 / std::max<int64_t>(plane, 1)), [&](int64_t lo, int64_t hi) {
    post_planes_f32(x, nullptr, lo, hi, C, plane, nullptr, b, -INFINITY, INFINITY);  // the sum alone
  });
}

}  // namespace

/// C[m, n] = A . B (+ beta C) row-major: a small product in gemm_small_f32 (oneDNN's per-call
/// cost is larger than such a product), else through oneDNN's sgemm; false on failure.
static bool sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float beta, float* C, int64_t ldc) {
  const bool at = ta == 'T', bt = tb == 'T';
  if (gemm_small_f32(M, N, K, 1.f, A, at ? 1 : lda, at ? lda : 1, B, bt ? 1 : ldb, bt ? ldb : 1, beta, C, ldc, 1))
    return true;
  return dnnl_sgemm(ta, tb, M, N, K, 1.f, A, lda, B, ldb, beta, C, ldc) == dnnl_success;
}

namespace {

/// The entry's bias memory over b (a forward conv's [O] bias).
const memory& bias_memory(Entry* e, const Geom& g, const float* b) {
  if (!e->bias_mem) e->bias_mem = memory(memory::desc({g.O}, dt::f32, tag::x), onednn::engine(), const_cast<float*>(b));
  e->bias_mem.set_data_handle(const_cast<float*>(b));
  return e->bias_mem;
}

}  // namespace

/// Executes e's forward primitive from src into dst (under e's lock; the caller waits).
void dnn::exec_fwd(Entry* e, const Geom& g, const memory& src, const float* w, const float* b, const memory& dst,
                   uint64_t w_stamp) {
  const memory& wm = e->weights(w, w_stamp);
  onednn::execute(*e->prim, {{DNNL_ARG_SRC, &src},
                             {DNNL_ARG_WEIGHTS, &wm},
                             {DNNL_ARG_DST, &dst},
                             {DNNL_ARG_BIAS, b ? &bias_memory(e, g, b) : nullptr},
                             {DNNL_ARG_SCRATCHPAD, &e->scratch}});
}

namespace {

/// Runs one cached forward conv on user buffers (the caller set oneDNN's threads).
/// `blocked`: when set, called with the blocked output (under the entry's lock) instead of its
/// reorder into y.
void run_fwd(Entry* e, const Geom& g, const float* x, const float* w, const float* b, float* y,
             const std::function<void(float*)>& blocked = {}, uint64_t w_stamp = 0) {
  std::lock_guard<std::mutex> lock(e->mu);
  memory dst = e->c.out(y);
  exec_fwd(e, g, e->a.in(x), w, b, dst, w_stamp);
  if (blocked) {
    onednn::stream().wait();
    blocked(e->c.buf.data());
    return;
  }
  e->c.finish(dst, y);
  onednn::stream().wait();
}

}  // namespace

/// post_blocked over blocks [b0, b1) of y (block b is channels 16 (b % (O / 16)) + [0, 16)), serial.
void dnn::post_blocks(float* y, const float* r, int64_t b0, int64_t b1, int64_t O, int64_t plane, const PostOp& post,
                      float* plain, int64_t q0, int64_t q1) {
  if (!post.any()) {
    if (plain) unblock16_f32(y, b0, b1, plane, plain, q0, q1);
    return;
  }
  const float lo = post.lo_bound(), hi = post.hi_bound();
  post_blocked16_f32(y, r, b0, b1, plane, O / 16, post.scale, post.shift, lo, hi, plain, q0, q1);
}

namespace {

/// post over a blocked 16-channel output y [N, O/16, plane, 16] (Note [Kept blocked outputs]), the
/// residual r (may be null) in the same layout; split over the threads when `parallel`. plain (may
/// be null): the result is also written there, plain [N, O, plane] (the reorder to the user's
/// tensor, in the same pass).
void post_blocked(float* y, const float* r, int64_t N, int64_t O, int64_t plane, const PostOp& post, bool parallel,
                  float* plain = nullptr) {
  const int64_t blocks = N * (O / 16);
  auto run = [&](int64_t b0, int64_t b1) { post_blocks(y, r, b0, b1, O, plane, post, plain); };
  if (!post.any() && !plain) return;
  if (parallel)
    parallel_for(blocks, std::max<int64_t>(1, 2048 / std::max<int64_t>(plane, 1)), run);
  else
    run(0, blocks);
}

/// run_fwd and the epilogue through kept blocked forms (Note [Kept blocked outputs]): reads x's
/// kept form when there is one, and keeps y's when y's stamp is known, its layout is blocked by
/// 16 channels and a residual has a kept form too. False, doing nothing, when neither applies.
bool run_fwd_kept(Entry* e, const Geom& g, const float* x, const float* w, const float* b, float* y, const PostOp& post,
                  const Stamps& st, bool parallel) {
  if (!keep_on()) return false;
  std::shared_ptr<const Kept> kx = e->a.reorder ? find_kept(st.x, x, e->a.used) : nullptr, kr;
  bool keep_y = st.y && e->out_blocked16 && e->c.buf.size() * sizeof(float) <= kKeptBytes / 4;
  if (keep_y && post.residual) {
    kr = find_kept(st.residual, post.residual, e->c.used);
    keep_y = kr != nullptr;
  }
  if (!kx && !keep_y) return false;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    memory dst = e->c.out(y);
    exec_fwd(e, g, kx ? kx->mem : e->a.in(x), w, b, dst, st.w);
    if (keep_y) {
      onednn::stream().wait();
      post_blocked(e->c.buf.data(), kr ? kr->buf.data() : nullptr, g.N, g.O, g.out_size(), post, parallel, y);
      keep_staged(e->c, st.y, y);
      return true;
    }
    e->c.finish(dst, y);
    onednn::stream().wait();
  }
  post_all(y, g.N, g.O, g.out_size(), post);
  return true;
}

/// Runs a cached pair (ea's blocked output, activated by pa, is eb's input; see
/// onednn_forward_pair), each conv with oneDNN on its own thread count (nta, ntb; no effect
/// inside a parallel region).
void run_pair(Entry* ea, const Geom& ga, const float* x, const float* wa, const float* ba, const PostOp& pa, Entry* eb,
              const Geom& gb, const float* wb, const float* bb, float* y, int nta, int ntb) {
  std::scoped_lock lock(ea->mu, eb->mu);
  {
    onednn::ThreadScope scope(nta);
    exec_fwd(ea, ga, ea->a.in(x), wa, ba, ea->c.staged(), 0);
    onednn::stream().wait();
    // The activation is elementwise, so it applies to the blocked layout as it is.
    post_flat(ea->c.buf.data(), static_cast<int64_t>(ea->c.used.get_size() / sizeof(float)), pa, nta > 1);
  }
  {
    onednn::ThreadScope scope(ntb);
    memory dst = eb->c.out(y);
    exec_fwd(eb, gb, ea->c.staged(), wb, bb, dst, 0);
    eb->c.finish(dst, y);
    onednn::stream().wait();
  }
}

/// Batch split: a forward conv over N > 1 images on several threads runs as one parallel
/// region in which each thread runs a single-threaded primitive over its share of the images
/// (reorders included), instead of oneDNN's own split of each reorder and of the conv (three
/// regions, the reorders of small problems barely faster on two threads). The number of
/// chunks, 0 when the split does not apply (one thread or image, inside a parallel region).
int batch_chunks(int64_t N) {
  const int nt = num_threads();
  if (N <= 1 || nt <= 1) return 0;
#ifdef _OPENMP
  if (omp_in_parallel()) return 0;
#endif
  return static_cast<int>(std::min<int64_t>(nt, N));
}

/// Images [n0, n1) of chunk c of `chunks` over N images.
void chunk_range(int64_t N, int chunks, int c, int64_t& n0, int64_t& n1) {
  n0 = N * c / chunks;
  n1 = N * (c + 1) / chunks;
}

/// g for each of `chunks` chunks of its images (N the chunk's image count).
std::vector<Geom> chunk_geoms(const Geom& g, int chunks) {
  std::vector<Geom> gs(static_cast<size_t>(chunks), g);
  for (int c = 0; c < chunks; ++c) {
    int64_t n0, n1;
    chunk_range(g.N, chunks, c, n0, n1);
    gs[static_cast<size_t>(c)].N = n1 - n0;
  }
  return gs;
}

/// The single-threaded entries of the chunks gs (cache slots 1, 2, ...); false when one is not
/// available. Call inside a ThreadScope(1).
bool chunk_entries(std::vector<Entry*>& es, const std::vector<Geom>& gs, bool bias) {
  return stable_lookups(es, gs.size(),
                        [&](size_t c) { return lookup(Kind::Fwd, gs[c], bias, 1, static_cast<int>(c) + 1); });
}

}  // namespace

bool onednn_forward(const Geom& g, const float* x, const float* w, const float* b, float* y, const PostOp& post,
                    const Stamps& stamps) {
  const uint64_t w_stamp = stamps.w;
  if (!usable(g)) return false;
  const int64_t image = g.O * g.out_size();  // output elements per image
  const double macs = static_cast<double>(g.N) * g.O * g.out_size() * (g.C / g.groups) * g.k_size();
  const bool serial = macs < kMinParallelMacs;
  const int chunks = macs < kMinSplitMacs ? 0 : batch_chunks(g.N);
  if (!is_pointwise(g)) {
    if (chunks) {
      std::vector<Entry*> es;
      const std::vector<Geom> gs = chunk_geoms(g, chunks);
      onednn::ThreadScope scope(1);  // single-threaded primitives, created outside the region
      if (chunk_entries(es, gs, b != nullptr)) {
        parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
          for (int64_t c = c0; c < c1; ++c) {
            int64_t n0, n1;
            chunk_range(g.N, chunks, static_cast<int>(c), n0, n1);
            Entry* e = es[static_cast<size_t>(c)];
            const Geom& gc = gs[static_cast<size_t>(c)];
            const float* xc = x + n0 * g.C * g.in_size();
            float* yc = y + n0 * image;
            // Each chunk keeps (and finds) the blocked form of its own images.
            PostOp pc = post;
            if (post.residual) pc.residual = post.residual + n0 * image;
            if (run_fwd_kept(e, gc, xc, w, b, yc, pc, stamps, false)) continue;
            run_fwd(e, gc, xc, w, b, yc, {}, w_stamp);
            // The epilogue while this chunk's output is still in the cache (Note [Convolution activations]).
            post_planes(y, n0 * g.O, n1 * g.O, g.O, g.out_size(), post);
          }
        });
        return true;
      }
    }
  }
  onednn::ThreadScope scope(serial ? 1 : 0);  // else oneDNN uses kiln::num_threads()
  const int nt = serial ? 1 : num_threads();
  if (is_pointwise(g)) {
    const int64_t L = g.in_size();
    std::atomic<bool> ok{true};
    auto images = [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        if (!sgemm('N', 'N', g.O, L, g.C, w, g.C, x + n * g.C * L, L, 0.f, y + n * g.O * L, L)) {
          ok = false;
          return;
        }
        float* yi = y + n * g.O * L;
        if (post.residual || post.per_channel()) {
          if (b) add_bias(yi, b, 1, g.O, L);
          post_planes(y, n * g.O, (n + 1) * g.O, g.O, L, post);
        } else if (post.kind != PostOp::None) {
          bias_post(yi, b, 1, g.O, L, post);
        } else if (b) {
          add_bias(yi, b, 1, g.O, L);
        }
      }
    };
    // A batch of small products: one image per thread (each product alone is too small for
    // sgemm to split), else sgemm's own threads.
    if (chunks && g.O * L * g.C < (int64_t{1} << 22))
      parallel_for(g.N, 1, images);
    else
      images(0, g.N);
    return ok;
  }
  if (run_fwd_split(g, x, w, b, y, post, stamps)) return true;
  Entry* e = lookup(Kind::Fwd, g, b != nullptr, nt);
  if (!e) return false;
  if (run_fwd_kept(e, g, x, w, b, y, post, stamps, nt > 1)) return true;
  run_fwd(e, g, x, w, b, y, {}, w_stamp);
  post_all(y, g.N, g.O, g.out_size(), post);
  return true;
}

bool onednn_forward_maxpool(const Geom& g, const float* x, const float* w, const float* b, const PostOp& post,
                            const PoolAfter& pool, float* y, const Stamps& stamps) {
  const uint64_t y_stamp = stamps.y;
  if (!usable(g) || g.nsp != 2 || post.residual || g.O % 16 != 0 || is_pointwise(g)) return false;
  const int64_t H = g.out[1], W = g.out[2];
  if (!pool_fits(pool, H, W)) return false;
  const double macs = static_cast<double>(g.N) * g.O * g.out_size() * (g.C / g.groups) * g.k_size();
  int chunks = macs < kMinSplitMacs ? 0 : batch_chunks(g.N);
  if (chunks == 0) {
    if (run_maxpool_split(g, x, w, b, post, pool, y, stamps)) return true;
    if (num_threads() > 1 && macs >= kMinParallelMacs) return false;  // the conv alone splits better
    chunks = 1;
  }
  const std::vector<Geom> gs = chunk_geoms(g, chunks);
  onednn::ThreadScope scope(1);  // single-threaded primitives, created outside the region
  std::vector<Entry*> es;
  if (!chunk_entries(es, gs, b != nullptr)) return false;
  for (size_t c = 0; c < gs.size(); ++c) {
    Entry* e = es[c];
    const int64_t n = gs[c].N;
    // The pool reads the conv's output in oneDNN's nChw16c layout, in the entry's staging buffer.
    if (!e->c.reorder || !(e->c.used == memory::desc({n, g.O, H, W}, dt::f32, tag::nChw16c))) return false;
  }
  const int64_t image_out = g.O * pool.out[0] * pool.out[1];
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      int64_t n0, n1;
      chunk_range(g.N, chunks, static_cast<int>(c), n0, n1);
      Entry* e = es[static_cast<size_t>(c)];
      run_fwd(
          e, gs[static_cast<size_t>(c)], x + n0 * g.C * g.in_size(), w, b, nullptr,
          [&](float* blocked) {
            post_blocked(blocked, nullptr, n1 - n0, g.O, H * W, post, false);
            std::shared_ptr<Kept> pooled = spare_kept(blocked16({n1 - n0, g.O, pool.out[0], pool.out[1]}));
            pool_blocks(blocked, H, W, pool, pooled->buf.data(), y + n0 * image_out, 0, (n1 - n0) * (g.O / 16));
            keep_form(std::move(pooled), y_stamp, y + n0 * image_out);  // this chunk's pooled images
          },
          stamps.w);
    }
  });
  return true;
}

bool onednn_forward_pair(const Geom& ga, const float* x, const float* wa, const float* ba, const PostOp& pa,
                         const Geom& gb, const float* wb, const float* bb, const PostOp& pb, float* y) {
  if (!usable(ga) || !usable(gb) || is_pointwise(ga) || is_pointwise(gb) || ga.N != gb.N || pa.residual ||
      pa.per_channel())
    return false;
  const int64_t image = gb.O * gb.out_size();  // output elements per image
  // The intermediate lives in ea's dst staging buffer: it must be blocked, and exactly what eb reads.
  auto fits = [](Entry* ea, Entry* eb) {
    return ea && eb && ea != eb && ea->c.reorder && eb->a.reorder && ea->c.used == eb->a.used;
  };
  const double macs_a = static_cast<double>(ga.N) * ga.O * ga.out_size() * (ga.C / ga.groups) * ga.k_size();
  if (const int chunks = macs_a < kMinSplitMacs ? 0 : batch_chunks(ga.N)) {
    const std::vector<Geom> gas = chunk_geoms(ga, chunks), gbs = chunk_geoms(gb, chunks);
    onednn::ThreadScope scope(1);
    std::vector<Entry*> es;  // a0, b0, a1, b1, ...
    if (stable_lookups(es, 2 * gas.size(), [&](size_t i) {
          const size_t c = i / 2;
          const int slot = static_cast<int>(c) + 1;
          return i % 2 == 0 ? lookup(Kind::Fwd, gas[c], ba != nullptr, 1, slot)
                            : lookup(Kind::Fwd, gbs[c], bb != nullptr, 1, slot);
        })) {
      bool all = true;
      for (size_t c = 0; c < gas.size(); ++c) all = all && fits(es[2 * c], es[2 * c + 1]);
      if (all) {
        parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
          for (int64_t c = c0; c < c1; ++c) {
            int64_t n0, n1;
            chunk_range(ga.N, chunks, static_cast<int>(c), n0, n1);
            const size_t k = static_cast<size_t>(c);
            run_pair(es[2 * k], gas[k], x + n0 * ga.C * ga.in_size(), wa, ba, pa, es[2 * k + 1], gbs[k], wb, bb,
                     y + n0 * image, 1, 1);
            post_planes(y, n0 * gb.O, n1 * gb.O, gb.O, gb.out_size(), pb);
          }
        });
        return true;
      }
    }
  }
  auto threads = [](const Geom& g) {
    const double macs = static_cast<double>(g.N) * g.O * g.out_size() * (g.C / g.groups) * g.k_size();
    return macs < kMinParallelMacs ? 1 : num_threads();
  };
  const int nta = threads(ga), ntb = threads(gb);
  Entry *ea = nullptr, *eb = nullptr;
  {
    onednn::ThreadScope scope(nta);
    ea = lookup(Kind::Fwd, ga, ba != nullptr, nta);
  }
  {
    onednn::ThreadScope scope(ntb);
    eb = lookup(Kind::Fwd, gb, bb != nullptr, ntb);
  }
  {
    onednn::ThreadScope scope(nta);
    ea = lookup(Kind::Fwd, ga, ba != nullptr, nta);  // again: eb's lookup may have cleared the cache
  }
  if (!fits(ea, eb)) return false;
  run_pair(ea, ga, x, wa, ba, pa, eb, gb, wb, bb, y, nta, ntb);
  post_all(y, gb.N, gb.O, gb.out_size(), pb);
  return true;
}

bool onednn_backward_data(const Geom& g, const float* y, const float* w, const float* b, float* x, uint64_t w_stamp) {
  if (!usable(g)) return false;
  onednn::ThreadScope scope;  // oneDNN uses kiln::num_threads()
  const int nt = num_threads();
  if (is_pointwise(g)) {
    const int64_t L = g.in_size();
    for (int64_t n = 0; n < g.N; ++n) {
      if (!sgemm('T', 'N', g.C, L, g.O, w, g.C, y + n * g.O * L, L, 0.f, x + n * g.C * L, L)) return false;
      if (b) add_bias(x + n * g.C * L, b, 1, g.C, L);
    }
    return true;
  }
  Entry* e = lookup(Kind::BwdData, g, false, nt);
  if (!e) return false;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    memory dd = e->a.in(y), wei = e->weights(w, w_stamp), ds = e->c.out(x);
    onednn::execute(*e->prim, {{DNNL_ARG_DIFF_DST, &dd}, {DNNL_ARG_WEIGHTS, &wei}, {DNNL_ARG_DIFF_SRC, &ds}});
    e->c.finish(ds, x);
    onednn::stream().wait();
  }
  if (b) add_bias(x, b, g.N, g.C, g.in_size());
  return true;
}

bool onednn_backward_weights(const Geom& g, const float* x, const float* dy, float* dw) {
  if (!usable(g)) return false;
  onednn::ThreadScope scope;  // oneDNN uses kiln::num_threads()
  const int nt = num_threads();
  if (is_pointwise(g)) {
    const int64_t L = g.in_size();
    for (int64_t n = 0; n < g.N; ++n)
      if (!sgemm('N', 'T', g.O, g.C, L, dy + n * g.O * L, L, x + n * g.C * L, L, n ? 1.f : 0.f, dw, g.C)) return false;
    return true;
  }
  Entry* e = lookup(Kind::BwdWeights, g, false, nt);
  if (!e) return false;
  std::lock_guard<std::mutex> lock(e->mu);
  memory src = e->a.in(x), dd = e->b.in(dy), dwm = e->c.out(dw);
  onednn::execute(*e->prim, {{DNNL_ARG_SRC, &src}, {DNNL_ARG_DIFF_DST, &dd}, {DNNL_ARG_DIFF_WEIGHTS, &dwm}});
  e->c.finish(dwm, dw);
  onednn::stream().wait();
  return true;
}

void register_constant(const void* data, size_t nbytes) {
  (void)nbytes;
  if (!data) return;
  ConstRegistry& r = constants();
  std::lock_guard<std::mutex> l(r.mu);
  r.ids[data] = next_stamp();  // disjoint from the content stamps Entry::weights also keys on
  r.any.store(true, std::memory_order_relaxed);
}

void unregister_constant(const void* data) {
  ConstRegistry& r = constants();
  std::lock_guard<std::mutex> l(r.mu);
  r.ids.erase(data);
}

uint64_t registered_constant_id(const void* data) { return dnn::constant_id(data); }

}  // namespace kiln::cpu::conv

#endif  // KILN_WITH_ONEDNN (conv_onednn_none.cpp: the build without it)
