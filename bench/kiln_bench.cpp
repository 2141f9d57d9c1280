// SPDX-License-Identifier: MIT OR Apache-2.0
// Kiln side of the benchmark suite (bench/run.sh runs it next to bench/torch_bench.py).
//
//   kiln_bench [--threads N] [--smoke] [--reps R]
//
// Prints one tab-separated line per measurement:
//   <id> \t <seconds per call, best of R> \t <bytes moved per call> \t <status>
// status is "ok", or "skip: <reason>" when the op threw (e.g. not implemented yet). The ids
// match torch_bench.py's so bench/report.py can pair them. The calibration rows (copy_bw,
// read_bw) are measured by this process with the same thread count.
#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif
#include "backends/cpu/onednn.h"  // matmul block: switches between oneDNN and the portable GEMM
#if KILN_BENCH_ONEDNN
#include <dnnl.h>  // matmul block: the dnnl_sgemm calibration rows
#endif

#include "backends/cpu/vec.h"  // wait_for_compiles: timed runs use the compiled kernels
#include "bench_util.h"

namespace bench {

using Clock = std::chrono::steady_clock;

double best_of(const std::function<void()>& f, int reps, int warmup) {
  for (int i = 0; i < warmup; ++i) f();
  if (warmup > 0) kiln::cpu::vec::wait_for_compiles();  // time the compiled kernels, not their compile
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    f();
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, s);
  }
  return best;
}

void emit(const std::string& id, double seconds, double bytes, const std::string& status) {
  std::printf("%s\t%.9g\t%.0f\t%s\n", id.c_str(), seconds, bytes, status.c_str());
  std::fflush(stdout);
}

void emit_skip(const std::string& id, const std::exception& e, double bytes) {
  std::string msg = e.what();
  for (char& c : msg)
    if (c == '\t' || c == '\n') c = ' ';
  emit(id, 0, bytes, "skip: " + msg.substr(0, 100));
}

bool selected(const std::string& id) {
  // BENCH_ONLY=<id prefix> runs only the matching cases (the calibrations always run).
  static const char* only = std::getenv("BENCH_ONLY");
  return !only || id.rfind(only, 0) == 0;
}

void kiln_case(const std::string& id, double bytes, const Options& o, const std::function<void()>& f, int inner) {
  if (!selected(id)) return;
  try {
    // Queued work (if any) must finish before the clock stops: sync once per sample.
    double s = best_of(
        [&] {
          for (int i = 0; i < inner; ++i) f();
          kiln::sync(kiln::Device::cpu());
        },
        o.reps, o.smoke ? 0 : 2);
    emit(id, s / inner, bytes);
  } catch (const std::exception& e) {
    emit_skip(id, e, bytes);
  }
}

}  // namespace bench

namespace {

using namespace bench;

// ---- calibration: memcpy-like copy and streaming read, same threads as the kernels ----------

struct Buffer {
  std::unique_ptr<float[]> p;
  int64_t n;
  explicit Buffer(int64_t n) : p(new float[static_cast<size_t>(n)]), n(n) {}
};

/// Splits [0, n) into `threads` contiguous parts and runs f(begin, end) on each in parallel.
template <class F>
void split(int64_t n, int threads, const F& f) {
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static, 1)
#endif
  for (int t = 0; t < threads; ++t) f(n * t / threads, n * (t + 1) / threads);
}

struct Calibration {
  double copy_s = 1e300, read_s = 1e300;  // best seconds per pass over n floats
};

/// Times a memcpy-like copy and a streaming sum of n floats; keeps the best times in c.
void calibrate(const Options& o, int64_t n, Calibration& c) {
  Buffer src(n), dst(n);
  // First touch from the threads that will use the pages.
  split(n, o.threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) src.p[i] = static_cast<float>(i & 1023) * 0.5f;
    std::memset(dst.p.get() + b, 0, static_cast<size_t>(e - b) * sizeof(float));
  });
  double copy = best_of(
      [&] {
        split(n, o.threads, [&](int64_t b, int64_t e) {
          std::memcpy(dst.p.get() + b, src.p.get() + b, static_cast<size_t>(e - b) * sizeof(float));
        });
      },
      o.reps);
  c.copy_s = std::min(c.copy_s, copy);
  volatile float sink = 0;
  double read = best_of(
      [&] {
        std::vector<float> part(static_cast<size_t>(o.threads));
        split(n, o.threads, [&](int64_t b, int64_t e) {
          // Eight independent vector chains so the loop is load-bound, not add-latency-bound.
          typedef float V __attribute__((vector_size(16)));
          V acc[8] = {};
          int64_t i = b;
          for (; i + 32 <= e; i += 32)
            for (int j = 0; j < 8; ++j) {
              V v;
              std::memcpy(&v, src.p.get() + i + 4 * j, sizeof v);
              acc[j] += v;
            }
          float s = 0;
          for (; i < e; ++i) s += src.p[i];
          for (const V& a : acc) s += a[0] + a[1] + a[2] + a[3];
#ifdef _OPENMP
          part[static_cast<size_t>(omp_get_thread_num())] = s;
#else
          part[0] = s;
#endif
        });
        float s = 0;
        for (float v : part) s += v;
        sink = s;
      },
      o.reps);
  (void)sink;
  c.read_s = std::min(c.read_s, read);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string memory_model, callgrind_op;
  int mode_steps = 1000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--memory" && i + 1 < argc) {
      memory_model = argv[++i];  // --memory <mlp|cnn> [steps]
      if (i + 1 < argc && argv[i + 1][0] != '-') mode_steps = std::atoi(argv[++i]);
    } else if (a == "--callgrind-overhead" && i + 1 < argc) {
      callgrind_op = argv[++i];  // --callgrind-overhead <op> [iters]
      mode_steps = 10000;
      if (i + 1 < argc && argv[i + 1][0] != '-') mode_steps = std::atoi(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      o.reps = std::atoi(argv[++i]);
    } else if (a == "--smoke") {
      o.smoke = true;
    } else {
      std::fprintf(stderr,
                   "usage: kiln_bench [--threads N] [--reps R] [--smoke] [--memory mlp|cnn [steps]]\n"
                   "       kiln_bench --callgrind-overhead <add|exp|sum|add_ad|exp_ad|sum_ad> [iters]\n");
      return 2;
    }
  }
  if (o.smoke) o.reps = 1;
  o.threads = std::max(o.threads, 1);
  using namespace kiln;
  set_num_threads(o.threads);
  if (!callgrind_op.empty()) return run_callgrind_overhead(callgrind_op, mode_steps);
  if (!memory_model.empty()) return run_memory_mode(memory_model, mode_steps, o);

  fma_peak(o);  // calib/fma_peak: the denominator of "% of peak" (matmul, conv, attention)

  // 16M elements as [4096, 4096] (smoke: [64, 64]).
  const int64_t side = o.smoke ? 64 : 4096;
  const int64_t n = side * side;
  const double fb = static_cast<double>(n) * sizeof(float);  // bytes of one f32 operand

  // Same buffer size as the operands below, so the calibration sees the same cache regime.
  Calibration calib;
  calibrate(o, n, calib);

  Device cpu = Device::cpu();
  std::mt19937 gen(0);
  std::uniform_real_distribution<float> dist(-4.f, 4.f);
  std::vector<float> hx(static_cast<size_t>(n)), hy(static_cast<size_t>(n)), hr(static_cast<size_t>(side));
  for (auto& v : hx) v = dist(gen);
  for (auto& v : hy) v = dist(gen);
  for (auto& v : hr) v = dist(gen);
  Tensor x = tensor(hx, {side, side}, cpu);
  Tensor y = tensor(hy, {side, side}, cpu);
  Tensor row = tensor(hr, {side}, cpu);
  Tensor out;

  // ---- elementwise: bytes = inputs read + output written ----------------------------------
  kiln_case("unary/relu", 2 * fb, o, [&] { out = relu(x); });
  kiln_case("unary/exp", 2 * fb, o, [&] { out = exp(x); });
  kiln_case("unary/sigmoid", 2 * fb, o, [&] { out = sigmoid(x); });
  kiln_case("unary/gelu", 2 * fb, o, [&] { out = gelu(x); });
  kiln_case("unary/tanh", 2 * fb, o, [&] { out = tanh(x); });
  kiln_case("binary/add", 3 * fb, o, [&] { out = x + y; });
  kiln_case("binary/mul", 3 * fb, o, [&] { out = x * y; });
  kiln_case("binary/mul_bcast_row", 2 * fb + side * 4.0, o, [&] { out = x * row; });

  calibrate(o, n, calib);

  // ---- reductions: bytes = input read (softmax: read + written) ---------------------------
  kiln_case("reduce/sum_all", fb, o, [&] { out = x.sum(); });
  kiln_case("reduce/sum_last", fb, o, [&] { out = x.sum({-1}); });
  kiln_case("reduce/sum_first", fb, o, [&] { out = x.sum({0}); });
  kiln_case("reduce/amax_all", fb, o, [&] { out = x.amax(); });
  kiln_case("reduce/softmax_last", 2 * fb, o, [&] { out = x.softmax(-1); });
  out = Tensor();

  // The best of three calibrations (start, middle, end): on a shared machine the load varies,
  // and the highest bandwidth seen is the fairest denominator.
  calibrate(o, n, calib);
  emit("calib/copy_bw", calib.copy_s, 2 * fb);  // bytes read + written
  emit("calib/read_bw", calib.read_s, fb);

  // ---- per-op overhead on 4 elements -------------------------------------------------------
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f}, cpu);
  Tensor b = tensor({0.5f, 0.25f, 2.f, 1.f}, cpu);
  const int inner = o.smoke ? 10 : 100000;
  Tensor r;
  kiln_case(
      "overhead/add", 0, o, [&] { r = a + b; }, inner);
  kiln_case(
      "overhead/exp", 0, o, [&] { r = a.exp(); }, inner);
  kiln_case(
      "overhead/sum", 0, o, [&] { r = a.sum(); }, inner);

  // ---- matmul (gemm owner's block): f32 products through the default path (oneDNN when built
  // with it) and through Kiln's portable GEMM (ids ending in "/portable"), and dnnl_sgemm
  // called directly as the calibration (calib/onednn_sgemm_<n>). The bytes field holds the flop
  // count 2*B*M*N*K; report.py prints GFLOP/s. Paired with torch_bench.py ----
  {
    struct MmCase {
      std::string id;
      int64_t b, m, k, n;
    };
    std::vector<MmCase> mm;
    for (int64_t n : {16, 64, 256, 512, 1024, 2048})
      if (!o.smoke || n <= 64) mm.push_back({"matmul/f32_" + std::to_string(n), 1, n, n, n});
    mm.push_back({"matmul/bmm_32x128x128x128", o.smoke ? 2 : 32, 128, 128, 128});
    mm.push_back({"matmul/odd_1000x1001x999", 1, o.smoke ? 10 : 1000, o.smoke ? 11 : 1001, o.smoke ? 9 : 999});
    mm.push_back({"matmul/mv_4096", 1, side, side, 1});
    for (const MmCase& c : mm) {
      const double flops = 2.0 * double(c.b) * double(c.m) * double(c.n) * double(c.k);
      const int in = flops < 1e6 ? 1000 : flops < 1e8 ? 20 : 1;
      const bool mv = c.n == 1;
      Tensor ma = mv ? x : c.b > 1 ? randn({c.b, c.m, c.k}) : randn({c.m, c.k});
      Tensor mb = mv ? row : c.b > 1 ? randn({c.b, c.k, c.n}) : randn({c.k, c.n});
      // Every result of a sample is kept until its sync: the fusion decorator queues a large
      // product for an epilogue and never computes one whose result is dropped unread.
      std::vector<Tensor> kept(static_cast<size_t>(in));
      for (bool portable : {false, true}) {
        kiln::cpu::onednn::set_enabled(!portable);
        size_t next = 0;
        kiln_case(
            c.id + (portable ? "/portable" : ""), flops, o, [&] { kept[next++ % kept.size()] = matmul(ma, mb); }, in);
      }
      kiln::cpu::onednn::set_enabled(true);
    }
#if KILN_BENCH_ONEDNN
#ifdef _OPENMP
    omp_set_num_threads(o.threads);
#endif
    for (int64_t n : {16, 64, 256, 512, 1024, 2048}) {
      if (o.smoke && n > 64) continue;
      std::vector<float> A(size_t(n * n), 0.5f), B(size_t(n * n), 0.25f), C(size_t(n * n));
      const double flops = 2.0 * double(n) * double(n) * double(n);
      const double s = best_of(
          [&] {
            for (int i = 0, in = flops < 1e6 ? 1000 : flops < 1e8 ? 20 : 1; i < in; ++i)
              dnnl_sgemm('N', 'N', n, n, n, 1.f, A.data(), n, B.data(), n, 0.f, C.data(), n);
          },
          o.reps, o.smoke ? 0 : 2);
      emit("calib/onednn_sgemm_" + std::to_string(n), s / (flops < 1e6 ? 1000 : flops < 1e8 ? 20 : 1), flops);
    }
#endif
  }
  // ---- end of the matmul block ----

  // ---- convolution (conv owner's block): conv2d forward, backward (data + weight), and
  // conv_transpose2d; ids conv/<shape>/N<batch>/{fwd,bwd,tr}, paired with torch_bench.py ----
  {
    namespace F = kiln::nn::functional;
    struct ConvCase {
      const char* name;
      int64_t C, H, O, k, pad;
      std::vector<int64_t> batches;
    };
    const std::vector<ConvCase> conv_cases = {
        {"mnist_1to32_k3", 1, 28, 32, 3, 0, {1, 32}},   {"mnist_32to64_k3", 32, 26, 64, 3, 0, {1, 32}},
        {"small_16to16_k3", 16, 16, 16, 3, 1, {1, 32}}, {"small_64to64_k3", 64, 8, 64, 3, 1, {1, 32}},
        {"resnet_64to64_k3", 64, 56, 64, 3, 1, {1, 8}}, {"resnet_64to256_k1", 64, 56, 256, 1, 0, {1, 8}}};
    for (const auto& c : conv_cases)
      for (int64_t N : c.batches) {
        const int64_t H = o.smoke ? std::min<int64_t>(c.H, 8) : c.H, Nb = o.smoke ? 1 : N;
        const std::string id = std::string("conv/") + c.name + "/N" + std::to_string(N);
        Tensor cx = randn({Nb, c.C, H, H}), cw = randn({c.O, c.C, c.k, c.k}), cb = randn({c.O});
        Tensor cy = F::conv2d(cx, cw, cb, {.padding = c.pad});
        Tensor cg = randn(cy.shape());
        Tensor r1, r2;
        // bytes field: flops (2 per multiply-add; backward = input + weight gradients = 2x).
        const double fl = 2.0 * double(cy.numel()) * double(c.C * c.k * c.k);
        kiln_case(id + "/fwd", fl, o, [&] { r1 = F::conv2d(cx, cw, cb, {.padding = c.pad}); });
        kiln_case(id + "/bwd", 2 * fl, o, [&] {
          r1 = nn::grad::conv2d_input(cx.shape(), cw, cg, {.padding = c.pad});
          r2 = nn::grad::conv2d_weight(cx, cw.shape(), cg, {.padding = c.pad});
        });
        // The same through autodiff, as a training step runs it: forward recorded on
        // Device::cpu().autodiff(), then backward from cg to the input and weight gradients.
        const Device ad = Device::cpu().autodiff();
        Tensor ax = cx.to(ad).require_grad(), aw = cw.to(ad).require_grad(), ab = cb.to(ad).require_grad();
        Tensor ag = cg.to(ad);
        kiln_case(id + "/fwdbwd_ad", 3 * fl, o, [&] {
          Gradients g = F::conv2d(ax, aw, ab, {.padding = c.pad}).backward(ag);
          r1 = ax.grad(g);
          r2 = aw.grad(g);
        });
      }
    // conv_transpose2d 64 -> 32 channels, 3x3, stride 2 (a decoder upsampling layer).
    for (int64_t N : {1, 8}) {
      const int64_t H = o.smoke ? 4 : 28, Nb = o.smoke ? 1 : N;
      Tensor tx = randn({Nb, 64, H, H}), tw = randn({64, 32, 3, 3}), tb = randn({32});
      Tensor ty;
      const double fl = 2.0 * double(Nb * 64 * H * H) * 32 * 9;  // one MAC per input x kernel tap
      kiln_case("conv/tr_64to32_k3_s2/N" + std::to_string(N) + "/tr", fl, o,
                [&] { ty = F::conv_transpose2d(tx, tw, tb, {.stride = 2, .padding = 1, .output_padding = 1}); });
    }
  }
  // ---- end of the convolution block ----

  // ---- normalisation (norm owner's block): layer_norm over the last dim of [8192, 1024] f32
  // with weight and bias; bytes = input read + output written. Paired with torch_bench.py ----
  {
    namespace F = kiln::nn::functional;
    const int64_t rows = o.smoke ? 64 : 8192, cols = o.smoke ? 128 : 1024;
    Tensor lx = randn({rows, cols}), lw = randn({cols}), lb = randn({cols}), ly;
    kiln_case("norm/layer_norm_8192x1024", 2.0 * static_cast<double>(rows * cols) * sizeof(float), o,
              [&] { ly = F::layer_norm(lx, {cols}, lw, lb); });
  }
  // ---- end of the normalisation block ----
  // ---- pooling (pool owner's block): [32, 64, 56, 56] f32 (smoke: [2, 4, 8, 8]); bytes =
  // input read + output written. Paired with torch_bench.py ----
  {
    namespace F = kiln::nn::functional;
    const Shape ps = o.smoke ? Shape{2, 4, 8, 8} : Shape{32, 64, 56, 56};
    Tensor px = randn(ps), py, pi;
    const double in_b = static_cast<double>(shape_numel(ps)) * sizeof(float);
    kiln_case("pool/max_pool2d_3x3s2", in_b * 1.25, o, [&] { py = F::max_pool2d(px, 3, {.stride = 2, .padding = 1}); });
    kiln_case("pool/max_pool2d_3x3s2_indices", in_b * 1.75, o,
              [&] { pi = F::max_pool2d_with_indices(px, 3, {.stride = 2, .padding = 1}).second; });
    kiln_case("pool/avg_pool2d_3x3s2", in_b * 1.25, o, [&] { py = F::avg_pool2d(px, 3, {.stride = 2, .padding = 1}); });
    kiln_case("pool/avg_pool2d_2x2", in_b * 1.25, o, [&] { py = F::avg_pool2d(px, 2); });
    kiln_case("pool/adaptive_avg_pool2d_1x1", in_b, o, [&] { py = F::adaptive_avg_pool2d(px, 1); });
  }
  // ---- end of the pooling block ----

  // ---- autodiff (autodiff owner's block): ids autodiff/<case>, paired with torch_bench.py.
  //   add_chain/{plain,record,fwd_bwd}: 1000 adds on [16] f32 tensors, seconds per add (plain:
  //     no tensor requires grad; record: the chain records a graph; fwd_bwd: record + backward).
  //   lstm/fwd_bwd[/balanced]: an LSTM-like cell over 16 time steps (4 gates of sigmoid/tanh over
  //     [32, 64] x [64, 64] matmuls), forward + backward; the bytes field holds the peak memory
  //     of one training step above the level before it (Kiln's allocator; PyTorch: 0). ----
  {
    const Device ad = Device::cpu().autodiff();
    const Device balanced = Device::cpu().autodiff({.checkpointing = Checkpointing::Balanced});
    const int chain = o.smoke ? 10 : 1000;
    Tensor c16 = full({16}, 0.001, {.device = ad});
    Tensor x16 = randn({16}, {.device = ad});
    Tensor x16g = randn({16}, {.device = ad}).require_grad();
    Tensor y16;
    auto add_chain = [&](const Tensor& start) {
      Tensor y = start;
      for (int i = 0; i < chain; ++i) y = y + c16;
      return y;
    };
    auto skip = [&](const std::string& id, const std::exception& e) {
      std::string msg = e.what();
      for (char& ch : msg)
        if (ch == '\t' || ch == '\n') ch = ' ';
      emit(id, 0, 0, "skip: " + msg.substr(0, 100));
    };
    // kiln_case divides by `inner` calls; these rows report seconds per add instead.
    auto per_op = [&](const std::string& id, const std::function<void()>& f) {
      static const char* only = std::getenv("BENCH_ONLY");
      if (only && id.rfind(only, 0) != 0) return;
      try {
        emit(id, best_of(f, o.reps, o.smoke ? 0 : 2) / chain, 0);
      } catch (const std::exception& e) {
        skip(id, e);
      }
    };
    per_op("autodiff/add_chain/plain", [&] { y16 = add_chain(x16); });
    per_op("autodiff/add_chain/record", [&] { y16 = add_chain(x16g); });
    per_op("autodiff/add_chain/fwd_bwd", [&] {
      Gradients g = add_chain(x16g).sum().backward();
      y16 = x16g.grad(g);
    });
    y16 = Tensor();

    const int64_t B = 32, Hd = 64, T = o.smoke ? 2 : 16;
    auto lstm_case = [&](const std::string& id, const Device& dev) {
      static const char* only = std::getenv("BENCH_ONLY");
      if (only && id.rfind(only, 0) != 0) return;
      try {
        manual_seed(0);
        std::vector<Tensor> w, u, b, xs;
        for (int k = 0; k < 4; ++k) {
          w.push_back((randn({Hd, Hd}) * 0.125).to(dev).require_grad());
          u.push_back((randn({Hd, Hd}) * 0.125).to(dev).require_grad());
          b.push_back(zeros({Hd}, {.device = dev}).require_grad());
        }
        for (int64_t t = 0; t < T; ++t) xs.push_back(randn({B, Hd}, {.device = dev}));
        auto step = [&] {
          Tensor h = zeros({B, Hd}, {.device = dev}), c = zeros({B, Hd}, {.device = dev});
          for (int64_t t = 0; t < T; ++t) {
            Tensor gi = sigmoid(matmul(xs[t], w[0]) + matmul(h, u[0]) + b[0]);
            Tensor gf = sigmoid(matmul(xs[t], w[1]) + matmul(h, u[1]) + b[1]);
            Tensor gg = tanh(matmul(xs[t], w[2]) + matmul(h, u[2]) + b[2]);
            Tensor go = sigmoid(matmul(xs[t], w[3]) + matmul(h, u[3]) + b[3]);
            c = gf * c + gi * gg;
            h = go * tanh(c);
          }
          Gradients g = h.square().mean().backward();
          return w[0].grad(g);
        };
        Tensor keep;
        const double s = best_of([&] { keep = step(); }, o.reps, o.smoke ? 0 : 2);
        keep = Tensor();
        const int64_t before = memory_stats(Device::cpu()).in_use;
        reset_peak_memory(Device::cpu());
        keep = step();
        const int64_t peak = memory_stats(Device::cpu()).peak - before;
        emit(id, s, static_cast<double>(peak));
      } catch (const std::exception& e) {
        skip(id, e);
      }
    };
    lstm_case("autodiff/lstm/fwd_bwd", ad);
    lstm_case("autodiff/lstm/fwd_bwd/balanced", balanced);
  }
  // ---- end of the autodiff block ----

  run_ops_block(o);    // kiln_bench_ops.cpp
  run_train_block(o);  // kiln_bench_train.cpp
  fma_peak(o);         // again at the end: the best of the two counts (shared machine)
  return 0;
}
