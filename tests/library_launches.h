// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// A sample of the kernel library's launches, shared by the kernel-target tests (every kernel
// renders and compiles) and the kernel bench (how long tracing and rendering them takes).
#include <kiln/capture.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernel/library.h"

namespace kiln::test {

using LaunchVisitor =
    std::function<void(const std::string& name, const std::function<kernel::Kernel(const kernel::Limits&)>& trace)>;

/// Calls f(name, trace) for each kernel the library launches (variants too) for one op of each
/// of its families and storages, captured from tensor calls, and for the fused kernels of a
/// chain alone, closing a row op and closing a product. `trace` is valid during the call only.
inline void for_each_library_launch(const LaunchVisitor& f) {
  using namespace kiln::kernel;
  using kiln::Tensor;
  using V = std::vector<Tensor>;
  namespace F = kiln::nn::functional;
  kiln::manual_seed(1);
  const Tensor x = kiln::randn({4, 6}), y = kiln::randn({4, 6}), img = kiln::randn({2, 4, 6, 6});
  const Tensor idx = kiln::tensor<int64_t>({0, 2, 1, 2}, {4}).reshape({4, 1});
  const std::vector<std::pair<kiln::CaptureFunction, V>> cases = {
      {[](const V& v) {
         return V{v[0].exp(), v[0].sin(), v[0].fmod(v[1]), v[0].atan2(v[1]), v[0].tanh()};
       },
       {x, y}},
      {[](const V& v) {
         return V{kiln::where(v[0] > v[1], v[0], v[1]), v[0].to(kiln::f16), v[0].pow(v[1])};
       },
       {x, y}},
      {[](const V& v) {
         return V{v[0].to(kiln::i64) + v[1].to(kiln::i64), kiln::floor_divide(v[0].to(kiln::i32), 3)};
       },
       {x, y}},
      {[](const V& v) {
         return V{v[0].to(kiln::i8) * v[1].to(kiln::i8), kiln::bernoulli(v[0].sigmoid())};
       },
       {x, y}},
      {[](const V& v) {
         return V{v[0] + kiln::rand_like(v[0]), v[0] + kiln::randn_like(v[0]),
                  v[0].flatten() + kiln::arange(0, 24, 1, kiln::f32, v[0].device())};
       },
       {x}},
      {[](const V& v) {
         return V{v[0].sum({1}), kiln::amax(v[0].to(kiln::f64), {0}), kiln::argmax(v[0], 1), kiln::var(v[0], {1})};
       },
       {x}},
      {[](const V& v) {
         return V{kiln::cumsum(v[0], 1), kiln::cummax(v[0], 0).first, kiln::softmax(v[0], 1),
                  kiln::log_softmax(v[0], 0)};
       },
       {x}},
      {[](const V& v) {
         return V{kiln::sort(v[0], 1).first, kiln::sort(v[0].to(kiln::i64), 0, true).second};
       },
       {x}},
      {[](const V& v) {
         return V{kiln::index_select(v[0], 0, v[1].flatten()), kiln::gather(v[0], 1, v[1]),
                  kiln::scatter_reduce(v[0], 1, v[1], v[0], "amax"), kiln::index_add(v[0], 0, v[1].flatten(), v[0])};
       },
       {x, idx}},
      {[](const V& v) {
         return V{kiln::pad(v[0], {1, 2}, "reflect"), kiln::cat({v[0], v[0]}, 1)};
       },
       {x}},
      {[](const V& v) {
         const auto [p, i] = F::max_pool2d_with_indices(v[0], 2);
         return V{p, F::avg_pool2d(v[0], 2), F::adaptive_avg_pool2d(v[0], 1), F::max_unpool2d(p, i, 2)};
       },
       {img}},
      {[](const V& v) {
         const kiln::TensorOptions on{.device = v[0].device()};
         const Tensor w = kiln::ones({3, 4, 3, 3}, on), b = kiln::ones({3}, on);
         const Tensor o = F::conv2d(v[0], w, b, {.padding = 1});
         return V{o, F::conv_transpose2d(o, w, {}, {.padding = 1}),
                  kiln::nn::grad::conv2d_weight(v[0], {3, 4, 3, 3}, o, {.padding = 1})};
       },
       {img}},
      {[](const V& v) {
         const kiln::TensorOptions o{.device = v[0].device()};
         return V{F::layer_norm(v[0], {6}, kiln::ones({6}, o), kiln::zeros({6}, o)), F::rms_norm(v[0], {6}),
                  F::group_norm(v[1].to(kiln::f16), 2)};
       },
       {x, img}},
      {[](const V& v) {
         return V{kiln::matmul(v[0], v[1].t()), kiln::matmul(v[0].to(kiln::f16), v[1].t().to(kiln::f16)),
                  kiln::matmul(v[0].to(kiln::i64), v[1].t().to(kiln::i64))};
       },
       {x, y}},
  };
  std::vector<std::string> seen;
  for (const auto& [fn, in] : cases) {
    const kiln::CapturedGraph g = kiln::capture(fn, in);
    for (const auto& node : g.nodes) {
      const std::optional<lib::Launch> l = lib::launch_of(*node.op, true);
      if (!l || std::find(seen.begin(), seen.end(), l->name) != seen.end()) continue;
      seen.push_back(l->name);
      f(l->name, l->trace);
      for (const auto& v : l->variants) f(v.name, v.trace);
    }
  }
  // A fused chain (lib::fused_launch): exp, fmod and tanh of the first case over a plain and a
  // broadcast operand, two of the values stored.
  const kiln::CapturedGraph g = kiln::capture(cases[0].first, cases[0].second);
  auto op_of = [&](kiln::ir::OpKind kind) -> const kiln::ir::Op* {
    for (const auto& node : g.nodes)
      if (node.op->kind == kind) return node.op.get();
    return nullptr;
  };
  const kiln::ir::Op *ex = op_of(kiln::ir::OpKind::Exp), *fm = op_of(kiln::ir::OpKind::Fmod),
                     *th = op_of(kiln::ir::OpKind::Tanh);
  if (ex && fm && th) {
    std::vector<lib::FusedLoad> loads(2);
    loads[0].desc = ex->inputs[0];
    loads[1].kind = lib::FusedLoad::Gather;
    loads[1].desc = fm->inputs[1];
    loads[1].shape = {4, 6};
    loads[1].strides = {0, 1};
    const std::vector<lib::FusedStep> steps = {{ex, {-1}, false}, {fm, {0, -2}, true}, {th, {1}, true}};
    if (const std::optional<lib::Launch> l = lib::fused_launch(loads, steps, 24, true)) f(l->name, l->trace);
  }
  // The chain in a row op's kernel (exp closed by the layer norm with weight and bias) and in a
  // product's (tanh of the matmul's results): lib::fused_tail_launch, lib::fused_product_launch.
  auto first_of = [&](size_t c, kiln::ir::OpKind kind) -> const kiln::ir::Op* {
    const kiln::CapturedGraph gc = kiln::capture(cases[c].first, cases[c].second);
    for (const auto& node : gc.nodes)
      if (node.op->kind == kind) return new kiln::ir::Op(*node.op);  // outlives the graph
    return nullptr;
  };
  std::unique_ptr<const kiln::ir::Op> norm, mm;
  for (size_t c = 0; c < cases.size(); ++c) {
    if (!norm) norm.reset(first_of(c, kiln::ir::OpKind::LayerNorm));
    if (!mm) mm.reset(first_of(c, kiln::ir::OpKind::MatMul));
  }
  if (ex && th && norm && mm) {
    std::vector<lib::FusedLoad> loads(1);
    loads[0].desc = norm->inputs[0];
    if (const std::optional<lib::Launch> l = lib::fused_tail_launch(loads, {{ex, {-1}, false}}, 0, *norm, true))
      f(l->name, l->trace);
    loads[0].kind = lib::FusedLoad::Given;
    loads[0].desc = mm->outputs[0];
    if (const std::optional<lib::Launch> l = lib::fused_product_launch(*mm, false, loads, {{th, {-1}, true}}, true))
      f(l->name, l->trace);
  }
}

}  // namespace kiln::test
