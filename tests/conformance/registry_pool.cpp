// SPDX-License-Identifier: MIT OR Apache-2.0
// Conformance registry of the pooling and resampling family (cases: scripts/golden_cases/pool.py).
#include <kiln/nn/functional.h>

#include <sstream>

#include "conformance/registry_util.h"

namespace kiln::conformance {
namespace {

using namespace reg;
namespace F = kiln::nn::functional;

F::IntList opt_list(At at, const char* key) { return at.has(key) ? F::IntList(at.dims(key)) : F::IntList(Dims{}); }

F::MaxPoolOptions mp_opts(At at) {
  return {.stride = opt_list(at, "stride"),
          .padding = at.has("padding") ? F::IntList(at.dims("padding")) : F::IntList(0),
          .dilation = at.has("dilation") ? F::IntList(at.dims("dilation")) : F::IntList(1),
          .ceil_mode = at.b("ceil_mode")};
}

F::AvgPoolOptions ap_opts(At at) {
  return {.stride = opt_list(at, "stride"),
          .padding = at.has("padding") ? F::IntList(at.dims("padding")) : F::IntList(0),
          .ceil_mode = at.b("ceil_mode"),
          .count_include_pad = at.b("count_include_pad", true),
          .divisor_override = at.opt_i("divisor_override")};
}

/// output_size with -1 standing for None.
F::OutputSize out_size(At at) {
  std::vector<int64_t> v = at.ints("output_size");
  if (v.size() == 1) return v[0] < 0 ? F::OutputSize({std::nullopt}) : F::OutputSize(v[0]);
  Dims d(v.begin(), v.end());
  bool none = false;
  for (int64_t e : v) none |= e < 0;
  if (!none) return F::OutputSize(d);
  if (v.size() == 2)
    return F::OutputSize({v[0] < 0 ? std::optional<int64_t>() : v[0], v[1] < 0 ? std::optional<int64_t>() : v[1]});
  return F::OutputSize({v[0] < 0 ? std::optional<int64_t>() : v[0], v[1] < 0 ? std::optional<int64_t>() : v[1],
                        v[2] < 0 ? std::optional<int64_t>() : v[2]});
}

F::MaxUnpoolOptions unpool_opts(At at) {
  F::MaxUnpoolOptions o{.stride = opt_list(at, "stride"),
                        .padding = at.has("padding") ? F::IntList(at.dims("padding")) : F::IntList(0)};
  if (at.has("output_size")) o.output_size = at.shape("output_size");  // empty when absent
  return o;
}

F::InterpolateOptions interp_opts(At at) {
  F::InterpolateOptions o;
  if (at.has("size")) o.size = F::IntList(at.dims("size"));
  if (at.has("scale_factor")) {
    std::vector<double> sf;
    std::stringstream ss(at.str("scale_factor"));
    std::string tok;
    while (std::getline(ss, tok, ',')) sf.push_back(std::stod(tok));
    o.scale_factor = F::ScaleList(sf);
  }
  o.mode = at.str("mode");
  if (at.has("align_corners")) o.align_corners = at.b("align_corners");
  if (at.has("recompute_scale_factor")) o.recompute_scale_factor = at.b("recompute_scale_factor");
  return o;
}

#define MAX_POOL(nd)                                                                                       \
  OP(max_pool##nd##d) {                                                                                    \
    F::IntList k(at.dims("kernel_size"));                                                                  \
    if (at.b("return_indices")) return pair_out(F::max_pool##nd##d_with_indices(in[0].t, k, mp_opts(at))); \
    return {F::max_pool##nd##d(in[0].t, k, mp_opts(at))};                                                  \
  }                                                                                                        \
  END
#define ADAPTIVE(nd)                                                                                              \
  OP(adaptive_avg_pool##nd##d) { return {F::adaptive_avg_pool##nd##d(in[0].t, out_size(at))}; }                   \
  END, OP(adaptive_max_pool##nd##d) {                                                                             \
    if (at.b("return_indices")) return pair_out(F::adaptive_max_pool##nd##d_with_indices(in[0].t, out_size(at))); \
    return {F::adaptive_max_pool##nd##d(in[0].t, out_size(at))};                                                  \
  }                                                                                                               \
  END

const RegistryPart part({
    MAX_POOL(1),
    MAX_POOL(2),
    MAX_POOL(3),
    OP(avg_pool1d){return {F::avg_pool1d(in[0].t, F::IntList(at.dims("kernel_size")), ap_opts(at))};
}  // namespace
END, OP(avg_pool2d) { return {F::avg_pool2d(in[0].t, F::IntList(at.dims("kernel_size")), ap_opts(at))}; }
END, OP(avg_pool3d) { return {F::avg_pool3d(in[0].t, F::IntList(at.dims("kernel_size")), ap_opts(at))}; }
END, ADAPTIVE(1), ADAPTIVE(2), ADAPTIVE(3), OP(max_unpool1d) {
  return {F::max_unpool1d(in[0].t, in[1].t, F::IntList(at.dims("kernel_size")), unpool_opts(at))};
}
END, OP(max_unpool2d) {
  return {F::max_unpool2d(in[0].t, in[1].t, F::IntList(at.dims("kernel_size")), unpool_opts(at))};
}
END, OP(max_unpool3d) {
  return {F::max_unpool3d(in[0].t, in[1].t, F::IntList(at.dims("kernel_size")), unpool_opts(at))};
}
END, OP(interpolate) { return {F::interpolate(in[0].t, interp_opts(at))}; }
END, OP(grid_sample) {
  return {F::grid_sample(
      in[0].t, in[1].t,
      {.mode = at.str("mode"), .padding_mode = at.str("padding_mode"), .align_corners = at.b("align_corners")})};
}
END, OP(affine_grid) { return {F::affine_grid(in[0].t, at.shape("size"), at.b("align_corners"))}; }
END, OP(pixel_shuffle) { return {F::pixel_shuffle(in[0].t, at.i("r"))}; }
END, OP(pixel_unshuffle) { return {F::pixel_unshuffle(in[0].t, at.i("r"))}; }
END,
}  // namespace kiln::conformance
);

}  // namespace
}  // namespace kiln::conformance
