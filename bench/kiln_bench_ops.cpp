// SPDX-License-Identifier: MIT OR Apache-2.0
// Op block of kiln_bench (paired with the same ids in torch_bench.py):
//   unary/gelu_composite      x * 0.5 * (erf(x / sqrt 2) + 1) as five separate ops, [4096, 4096]
//                             (bytes: one read + one write, the fused minimum)
//   reduce/sum_mid            [256, 256, 256].sum(1) (bytes: input read)
//   attn/sdpa_b4h8l256d64[/causal]  scaled_dot_product_attention, q k v [4, 8, 256, 64]
//                             (bytes field: flops, 4 B H L S D; causal: half)
//   overhead/<op>_ad          the overhead ops on 4 elements that require grad on
//                             Device::cpu().autodiff(): the graph is recorded on every call
#include <kiln/kiln.h>
#include <kiln/nn/functional/attention.h>

#include <cmath>
#include <vector>

#include "bench_util.h"

namespace bench {

void run_ops_block(const Options& o) {
  using namespace kiln;
  namespace F = kiln::nn::functional;
  manual_seed(1);
  {
    const int64_t side = o.smoke ? 64 : 4096;
    const double fb = double(side * side) * sizeof(float);
    Tensor x = randn({side, side}) * 2.0, out;
    const double inv_sqrt2 = 1.0 / std::sqrt(2.0);
    kiln_case("unary/gelu_composite", 2 * fb, o, [&] { out = x * 0.5 * (erf(x * inv_sqrt2) + 1.0); });
    const int64_t c = o.smoke ? 16 : 256;
    Tensor x3 = x.reshape({c, c, c});
    kiln_case("reduce/sum_mid", fb, o, [&] { out = x3.sum({1}); });
  }
  {
    const int64_t B = o.smoke ? 1 : 4, H = o.smoke ? 2 : 8, L = o.smoke ? 16 : 256, D = o.smoke ? 8 : 64;
    Tensor q = randn({B, H, L, D}), k = randn({B, H, L, D}), v = randn({B, H, L, D}), out;
    const double fl = 4.0 * double(B * H * L * L * D);
    kiln_case("attn/sdpa_b4h8l256d64", fl, o, [&] { out = F::scaled_dot_product_attention(q, k, v); });
    kiln_case("attn/sdpa_b4h8l256d64/causal", fl / 2, o,
              [&] { out = F::scaled_dot_product_attention(q, k, v, {.is_causal = true}); });
  }
  {
    const Device ad = Device::cpu().autodiff();
    Tensor a = tensor({1.f, 2.f, 3.f, 4.f}, ad).require_grad();
    Tensor b = tensor({0.5f, 0.25f, 2.f, 1.f}, ad).require_grad();
    const int inner = o.smoke ? 10 : 100000;
    Tensor r;
    kiln_case(
        "overhead/add_ad", 0, o, [&] { r = a + b; }, inner);
    kiln_case(
        "overhead/exp_ad", 0, o, [&] { r = a.exp(); }, inner);
    kiln_case(
        "overhead/sum_ad", 0, o, [&] { r = a.sum(); }, inner);
  }
}

}  // namespace bench
