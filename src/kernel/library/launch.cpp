// SPDX-License-Identifier: MIT OR Apache-2.0
// One dispatch of a library kernel for an IR op (kernel/library.h, Launch): which kernel, its
// parameter block, push constants and groups, worked out once here for every backend.
#include <algorithm>
#include <string>

#include "ir/attrs.h"
#include "kernel/library.h"
#include "kiln/error.h"

namespace kiln::kernel::lib {

namespace {

using kiln::ir::Family;
using kiln::ir::OpKind;

/// A launch of kernel `name` traced by `trace(spec, limits)`, with a parameter block of `ints`.
template <class Spec>
Launch launch(const Spec& spec, Kernel (*trace)(const Spec&, const Limits&), int ints) {
  Launch l;
  l.name = spec.name;
  l.trace = [spec, trace](const Limits& limits) { return trace(spec, limits); };
  l.meta.assign(static_cast<size_t>(ints), 0);
  return l;
}

/// A size as the power of two at or above it (the class of shapes an autotuned choice covers).
std::string shape_class(int64_t n) {
  int64_t p = 1;
  while (p < n && p < (int64_t{1} << 30)) p *= 2;
  return std::to_string(p);
}

/// Nothing to run when n is 0, else `groups`.
std::array<uint32_t, 3> unless_empty(int64_t n, std::array<uint32_t, 3> groups) {
  return n == 0 ? std::array<uint32_t, 3>{0, 0, 0} : groups;
}

std::optional<Launch> reduce_launch(const kiln::ir::Op& op, bool float64) {
  const std::optional<Reduce> s = reduce_of(op, float64);
  if (!s || (s->acc == Type::F64 && !float64)) return std::nullopt;
  Launch l = launch(*s, trace_reduce, kReduceMetaInts);
  if (!reduce_meta(op, l.meta.data())) return std::nullopt;
  // max, min and their arg forms have no value over an empty range (the CPU says so); var and
  // std of nothing are NaN, from 0 / 0 in f64, as on the CPU
  const bool total = op.kind == OpKind::Sum || op.kind == OpKind::Mean || op.kind == OpKind::Prod ||
                     op.kind == OpKind::Any || op.kind == OpKind::All || op.kind == OpKind::Var;
  if (l.meta[kRed] == 0 && !total) return std::nullopt;
  l.push = s->push;
  l.inputs = 1;
  l.groups = unless_empty(l.meta[kOut], reduce_groups(l.meta[kOut]));
  return l;
}

std::optional<Launch> scan_launch(const kiln::ir::Op& op, bool float64) {
  Launch l;
  bool scan = false;
  if (const std::optional<Sort> s = sort_of(op)) {
    l = launch(*s, trace_sort, kReduceMetaInts);
    l.outputs = 2;
  } else if (const std::optional<Scan> s = scan_of(op, float64)) {
    scan = true;
    if (s->acc == Type::F64 && !float64) return std::nullopt;
    l = launch(*s, trace_scan, kReduceMetaInts);
    l.outputs = static_cast<int>(op.outputs.size());
  } else if (const std::optional<Softmax> m = softmax_of(op)) {
    l = launch(*m, trace_softmax, kReduceMetaInts);
  } else {
    return std::nullopt;
  }
  if (!softmax_meta(op, l.meta.data())) return std::nullopt;
  const int64_t rows = l.meta[kRed] == 0 ? 0 : l.meta[kOut];
  l.groups = unless_empty(rows, scan ? elementwise_groups(rows) : reduce_groups(rows));  // a thread or a group per row
  return l;
}

std::optional<Launch> elementwise_launch(const kiln::ir::Op& op, bool float64) {
  const std::optional<Elementwise> s = elementwise_of(op, float64);
  if (!s || (s->needs_f64 && !float64)) return std::nullopt;
  Launch l = launch(*s, trace_elementwise, kMetaInts);
  if (!elementwise_meta(op, l.meta.data())) return std::nullopt;
  l.push = s->push;
  const int64_t n = op.outputs[0].numel();
  const bool int_div = op.kind == OpKind::FloorDiv || op.kind == OpKind::TruncDiv || op.kind == OpKind::Remainder ||
                       op.kind == OpKind::Fmod;
  if (int_div && is_integral(op.inputs[0].dtype) && n > 0) {
    const char* api = op.kind == OpKind::Remainder ? "remainder" : op.kind == OpKind::Fmod ? "fmod" : "div";
    l.host_check =
        HostCheck{1, 0, 0, true, [api, d = op.inputs[0].dtype](double) {
                    KILN_CHECK(false, api, "integer division by zero (" << dtype_name(d).data() << " divisor holds 0)");
                  }};
  }
  if (op.kind == OpKind::Bernoulli)
    l.host_check =
        HostCheck{0, 0, 1, false, [shape = op.inputs[0].shape](double) {
                    KILN_CHECK(false, "bernoulli", "expects all elements of p to be in [0, 1] (shape " << shape << ")");
                  }};
  l.groups = unless_empty(n, elementwise_groups(n));
  return l;
}

/// A launch of one thread per element of the count at meta[count] (pads, index ops, pools and
/// convolutions).
template <class Spec>
std::optional<Launch> per_element(const std::optional<Spec>& s, Kernel (*trace)(const Spec&, const Limits&), int ints,
                                  bool (*meta)(const kiln::ir::Op&, int32_t*), const kiln::ir::Op& op, int count) {
  if (!s) return std::nullopt;
  Launch l = launch(*s, trace, ints);
  if (!meta(op, l.meta.data())) return std::nullopt;
  l.groups = unless_empty(l.meta[static_cast<size_t>(count)], elementwise_groups(l.meta[static_cast<size_t>(count)]));
  return l;
}

/// MaxUnpool: a thread per plane; the indices must lie in the output plane (the CPU's error).
std::optional<Launch> unpool_launch(const kiln::ir::Op& op) {
  const std::optional<Unpool> s = unpool_of(op);
  std::optional<Launch> l = per_element(s, trace_unpool, kUnpoolMetaInts, unpool_meta, op, kUpPlanes);
  if (!l) return l;
  const int64_t nsp = kiln::ir::PoolAttrs::decode(op).nsp;
  std::string sizes;
  for (size_t d = 2; d < op.outputs[0].shape.size(); ++d) {  // appended: GCC 12 -Wrestrict
    if (d > 2) sizes += 'x';
    sizes += std::to_string(op.outputs[0].shape[d]);
  }
  l->host_check =
      HostCheck{1, 0, static_cast<double>(l->meta[kUpOutPlane]), false, [nsp, sizes](double v) {
                  const std::string api = "max_unpool" + std::to_string(nsp) + "d";
                  KILN_CHECK(false, api.c_str(),
                             "Found an invalid max index: " << static_cast<int64_t>(v)
                                                            << " (output volumes are of size " << sizes << ")");
                }};
  return l;
}

}  // namespace

/// op with its 0-d operands as one element of rank 1, for a scan, sort, softmax or index op
/// whose operands all hold at most one element (along dim 0 or -1 either way); else nothing.
std::optional<kiln::ir::Op> as_rank1(const kiln::ir::Op& op) {
  const Family f = kiln::ir::op_family(op.kind);
  if (f != Family::Scan && f != Family::Index) return std::nullopt;
  bool zero_d = false, small = true;
  auto look = [&](const kiln::ir::TensorDesc& d) {
    small &= d.shape.size() <= 1 && d.numel() <= 1;
    zero_d |= d.shape.empty();
  };
  for (const kiln::ir::TensorDesc& d : op.inputs) look(d);
  for (const kiln::ir::TensorDesc& d : op.outputs) look(d);
  if (!zero_d || !small) return std::nullopt;
  kiln::ir::Op r = op;
  auto widen = [](kiln::ir::TensorDesc& d) {
    if (d.shape.empty()) d.shape = {1}, d.strides = {1};
  };
  for (kiln::ir::TensorDesc& d : r.inputs) widen(d);
  for (kiln::ir::TensorDesc& d : r.outputs) widen(d);
  return r;
}

std::optional<Launch> launch_of(const kiln::ir::Op& op, bool float64) {
  if (!float64 && uses_f64(op)) return std::nullopt;
  if (const std::optional<kiln::ir::Op> v = as_rank1(op)) return launch_of(*v, float64);
  if (op.kind == OpKind::Pad) {
    const std::optional<Pad> s = pad_of(op);
    std::optional<Launch> l = per_element(s, trace_pad, kPadMetaInts, pad_meta, op, kPdCount);
    if (l) l->push = s->push, l->inputs = 1;
    return l;
  }
  switch (kiln::ir::op_family(op.kind)) {
    case Family::Reduce:
      return reduce_launch(op, float64);
    case Family::Contract: {
      const std::optional<MatMul> s = matmul_of(op);
      if (!s) return std::nullopt;
      Launch l = launch(*s, trace_matmul, kMatMulMetaInts);
      matmul_meta(op, l.meta.data());
      const std::array<uint32_t, 3> g = matmul_groups(op);
      l.groups = unless_empty(int64_t{g[0]} * g[1] * g[2], g);
      // an 8 x 8 tile: more groups for small products
      const MatMul v = matmul_variant(*s, 8);
      l.variants.push_back(
          {v.name, [v](const Limits& limits) { return trace_matmul(v, limits); }, matmul_groups(op, 8)});
      l.tune_key = s->name + ":" + shape_class(l.meta[kM]) + "x" + shape_class(l.meta[kN]) + "x" +
                   shape_class(l.meta[kK]) + (op.outputs[0].shape[0] > 1 ? ":batched" : "");
      return l;
    }
    case Family::Scan:
      return scan_launch(op, float64);
    case Family::Index: {
      const std::optional<Index> s = index_of(op);
      std::optional<Launch> l = per_element(s, trace_index, kIndexMetaInts, index_meta, op, kIxCount);
      if (!l) return l;
      l->push = s->push;
      const IndexCheck c = index_check_of(op);
      l->host_check = HostCheck{1, static_cast<double>(c.wrap ? -c.size : 0), static_cast<double>(c.size), false,
                                [c, name = kiln::ir::op_name(op.kind)](double v) {
                                  KILN_CHECK(false, std::string(name).c_str(),
                                             "index " << static_cast<int64_t>(v) << " is out of range for dim " << c.dim
                                                      << " with size " << c.size);
                                }};
      return l;
    }
    case Family::Pool: {
      if (op.kind == OpKind::MaxUnpool) return unpool_launch(op);
      const std::optional<Pool> s = pool_of(op);
      std::optional<Launch> l = per_element(s, trace_pool, kPoolMetaInts, pool_meta, op, kPlCount);
      if (l) l->outputs = s->indices ? 2 : 1;
      return l;
    }
    case Family::Norm: {
      const std::optional<Norm> s = float64 ? norm_of(op) : std::nullopt;
      if (!s) return std::nullopt;
      Launch l = launch(*s, trace_norm, kNormMetaInts);
      if (!norm_meta(op, l.meta.data())) return std::nullopt;
      l.push = s->push;
      l.outputs = 3;
      l.groups = unless_empty(l.meta[kNmRows], reduce_groups(l.meta[kNmRows]));
      return l;
    }
    case Family::Conv: {
      std::optional<Launch> l = per_element(conv_of(op), trace_conv, kConvMetaInts, conv_meta, op, kCvCount);
      if (l && op.kind == OpKind::ConvWeightGrad)  // a group per weight element
        l->groups = unless_empty(l->meta[kCvCount], reduce_groups(l->meta[kCvCount]));
      return l;
    }
    default:
      return elementwise_launch(op, float64);
  }
}

}  // namespace kiln::kernel::lib
