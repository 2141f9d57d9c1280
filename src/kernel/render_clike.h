// SPDX-License-Identifier: MIT OR Apache-2.0
// The C-like targets' shared part: C++ for the CPU and CUDA C for NVRTC agree on types,
// literals, the f16/bf16 conversions (the same bit-exact code on both) and most expressions.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "kernel/render.h"

namespace kiln::kernel::gen {

/// The f16/bf16 conversions and small helpers both C-like targets include.
extern const std::string_view kConversions;
/// The C++ target's includes, argument block and checks.
extern const std::string_view kCppPrelude;
/// The C++ target's vector mode: the lane count KK_W (16 where KK_W16 is set before it and the
/// machine has AVX-512, else 8), the vector types kk_wf/kk_wi/kk_wu and their helpers.
extern const std::string_view kCppVectorPrelude;
/// Vector fma, sqrt, floor and ceil (the machine's instructions where it has them), for kernels
/// using them.
extern const std::string_view kCppVectorMath;

class CLike : public Base {
 public:
  CLike(const ir::Kernel& kk, Target t, bool debug) : Base(kk, t), cuda(t == Target::Cuda), debug_(debug) {}

 protected:
  bool cuda, debug_;

  Text ty(Type t, int lanes) override {
    static const char* n[] = {"bool",           "int",   "unsigned", "long long", "unsigned short",
                              "unsigned short", "float", "double"};
    Text s = n[static_cast<int>(t)];
    return lanes > 1 ? "kk_v<" + s + ", " + num(lanes) + ">" : s;
  }
  Text lit(const ir::Op& op) override {
    if (Text s = int_lit(op, "ll"); !s.empty()) return s;
    const bool d = op.type == Type::F64;
    if (std::isfinite(op.f)) return d ? double_text(op.f) : float_text(op.f) + "f";
    const Text v = std::isnan(op.f) ? "kk_as_float(0x7fc00000u)"
                   : op.f > 0       ? "kk_as_float(0x7f800000u)"
                                    : "kk_as_float(0xff800000u)";
    return d ? "((double)" + v + ")" : v;
  }
  Text math(ir::UnaryFn f, Type t, Text x) override {
    using U = ir::UnaryFn;
    const bool d = t == Type::F64;
    if (f == U::Sigmoid) return cat("kk_sigmoid(", x, ")");
    if (f == U::RoundF16) return cat("kk_h2f(kk_f2h(", x, "))");
    if (f == U::RoundBF16) return cat("kk_b2f(kk_f2b(", x, "))");
    if (f == U::Rsqrt)
      return cuda ? cat(d ? "rsqrt(" : "rsqrtf(", x, ")")
                  : cat(d ? "(1.0 / kk_m::sqrt(" : "(1.0f / kk_m::sqrt(", x, "))");
    static const char* n[] = {"",    "", "exp",  "log",   "sqrt", "",    "tanh",
                              "erf", "", "fabs", "floor", "ceil", "sin", "cos"};
    const char* fn = n[static_cast<int>(f)];
    return cuda ? cat(fn, d ? "(" : "f(", x, ")") : cat("kk_m::", fn, "(", x, ")");
  }
  Text binary_fn(ir::BinaryFn f, Type t, Text a, Text b) override {
    if (t == Type::F32 || t == Type::F64) {
      const char* n = f == ir::BinaryFn::Min ? "fmin" : f == ir::BinaryFn::Max ? "fmax" : "pow";
      return cuda ? cat(n, t == Type::F64 ? "(" : "f(", a, ", ", b, ")") : cat("kk_m::", n, "(", a, ", ", b, ")");
    }
    return cat(f == ir::BinaryFn::Min ? "kk_min(" : "kk_max(", a, ", ", b, ")");
  }
  Text fma(Type t, Text a, Text b, Text c) override {
    return cat((cuda ? (t == Type::F64 ? "fma(" : "fmaf(") : "kk_m::fma("), a, ", ", b, ", ", c, ")");
  }
  Text cast(Type to, Type, Text x) override { return cat("((", ty(to, 1), ")", x, ")"); }
  Text bitcast(Type to, Type from, Text x) override {
    if (to == Type::F32) return cat("kk_as_float((unsigned)", x, ")");
    if (from == Type::F32) return cat("((", ty(to, 1), ")kk_as_uint(", x, "))");
    return cat("((", ty(to, 1), ")", x, ")");
  }
  Text int_divide(bool mod, Text a, Text b) override {
    if (!debug_ || cuda) return Base::int_divide(mod, a, b);
    return cat("kk_div(", a, ", ", b, (mod ? ", true, a)" : ", false, a)"));
  }
  Text extract(Text v, int lane) override { return cat(v, ".v[", num(lane), "]"); }

  Text mem(const ir::Op& op) const { return cat(op.shared ? "s" : "b", num(op.obj)); }
  Type elem(const ir::Op& op) const { return op.shared ? k.shared[op.obj].type : k.buffers[op.obj].type; }
  Text index(const ir::Op& op, Text idx, int lanes = 1) {
    if (!debug_) return idx;
    Text n = op.shared ? num(k.shared[op.obj].count) : "n" + num(op.obj);
    int id = static_cast<int>(op.shared ? k.buffers.size() + op.obj : op.obj);
    if (lanes == 1) return cat("kk_chk(", idx, ", ", n, ", ", num(id), ", a)");
    return cat("(kk_chk((long long)", idx, " + ", num(lanes - 1), ", ", n, ", ", num(id), ", a) - ", num(lanes - 1),
               ")");
  }
  Text from_storage(Type t, Text x) {
    return t == Type::F16 ? cat("kk_h2f(", x, ")") : t == Type::BF16 ? cat("kk_b2f(", x, ")") : x;
  }
  Text to_storage(Type t, Text x) {
    return t == Type::F16 ? cat("kk_f2h(", x, ")") : t == Type::BF16 ? cat("kk_f2b(", x, ")") : x;
  }
  Text load(const ir::Op& op, Text idx) override {
    return from_storage(elem(op), cat(mem(op), "[", index(op, idx), "]"));
  }
  Text load_vec(const ir::Op& op, Text idx) override {
    Type e = elem(op);
    Text i = index(op, idx, op.lanes);
    if (cuda && e != Type::F16 && e != Type::BF16)
      return cat("*(const ", ty(e, op.lanes), "*)(", mem(op), " + ", i, ")");
    Text s = ty(op.type, op.lanes) + "{{";
    for (int l = 0; l < op.lanes; ++l) s += (l ? ", " : "") + from_storage(e, mem(op) + "[" + i + " + " + num(l) + "]");
    return cat(s, "}}");
  }
  void store(const ir::Op& op, Text idx, const std::vector<Text>& v) override {
    Type e = elem(op);
    Text i = index(op, idx, op.lanes);
    if (v.size() == 1) {
      line(mem(op), "[", i, "] = ", to_storage(e, v[0]), ";");
      return;
    }
    if (cuda && e != Type::F16 && e != Type::BF16) {
      Text s = "*(" + ty(e, op.lanes) + "*)(" + mem(op) + " + " + i + ") = " + ty(e, op.lanes) + "{{";
      for (size_t l = 0; l < v.size(); ++l) s += (l ? ", " : "") + v[l];
      line(s, "}};");
      return;
    }
    line("{");
    ++depth;
    line("const long long kk_i = ", i, ";");
    for (size_t l = 0; l < v.size(); ++l) line(mem(op), "[kk_i + ", num(l), "] = ", to_storage(e, v[l]), ";");
    --depth;
    line("}");
  }
  Text atomic(const ir::Op& op, Text idx, Text v) override {
    Text p = cat("&", mem(op), "[", index(op, idx), "]");
    auto f = static_cast<ir::AtomicFn>(op.attr);
    if (cuda) {
      const char* n = f == ir::AtomicFn::Add ? "atomicAdd(" : f == ir::AtomicFn::Min ? "atomicMin(" : "atomicMax(";
      return cat(n, p, ", ", v, ")");
    }
    if (f == ir::AtomicFn::Add) return cat("__atomic_fetch_add(", p, ", ", v, ", __ATOMIC_RELAXED)");
    return cat(f == ir::AtomicFn::Min ? "kk_atomic_min(" : "kk_atomic_max(", p, ", ", v, ")");
  }
  Text subgroup(const ir::Op& op, Text v, Text other) override {
    if (!cuda) unsupported("subgroups of more than one lane (trace with Limits::subgroups = false)");
    if (k.limits.subgroup_size != 32) unsupported("a subgroup size other than 32");
    switch (static_cast<ir::SubgroupFn>(op.attr)) {
      case ir::SubgroupFn::Add:
        return cat("kk_sg_add(", v, ")");
      case ir::SubgroupFn::Min:
        return cat("kk_sg_min(", v, ")");
      case ir::SubgroupFn::Max:
        return cat("kk_sg_max(", v, ")");
      case ir::SubgroupFn::Shuffle:
        return cat("__shfl_sync(0xffffffffu, ", v, ", ", other, ")");
      case ir::SubgroupFn::ShuffleXor:
        return cat("__shfl_xor_sync(0xffffffffu, ", v, ", ", other, ")");
    }
    return "";
  }
  Text builtin(const ir::Op& op) override {
    auto b = static_cast<ir::Builtin>(op.attr);
    const char ax = "xyz"[op.axis];
    if (cuda) {
      if (b == ir::Builtin::ThreadId) return cat("((int)threadIdx.", ax, ")");
      if (b == ir::Builtin::GroupId) return cat("((int)blockIdx.", ax, ")");
      if (b == ir::Builtin::NumGroups) return cat("((int)gridDim.", ax, ")");
      return "((int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u))";
    }
    if (b == ir::Builtin::ThreadId) return cat("kk_t", ax);
    if (b == ir::Builtin::GroupId) return cat("kk_g", ax);
    if (b == ir::Builtin::NumGroups) return cat("kk_n", ax);
    return "0";
  }
  void barrier() override {
    if (cuda) line("__syncthreads();");
  }

  std::string render_function(const ir::Function& f) override { return CLike(f.body, target, false).function(f); }
  Text function_head(const ir::Function& f) override {
    Text s =
        cat(cuda ? "__device__ __forceinline__ " : "static inline ", ty(f.value_type(), 1), " ", function_name(f), "(");
    for (size_t i = 0; i < f.body.scalars.size(); ++i)
      append(s, i ? ", " : "", ty(f.body.scalars[i].type, 1), " p", num(i));
    return s + ") {";
  }

  void declarations() {
    for (size_t i = 0; i < k.locals.size(); ++i) line(ty(k.locals[i], 1), " l", num(i), ";");
  }
  void body_params(Text& s) {
    for (size_t i = 0; i < k.buffers.size(); ++i) {
      const auto& b = k.buffers[i];
      if (!s.empty()) s += ", ";
      s += (b.access == Access::Read ? "const " : "") + ty(b.type, 1) + "* __restrict__ b" + num(i);
    }
    for (size_t i = 0; i < k.scalars.size(); ++i) {
      if (!s.empty()) s += ", ";
      s += ty(k.scalars[i].type, 1) + " p" + num(i);
    }
  }

 public:
  /// The CUDA C source of the kernel.
  std::string cuda_text();
  std::string text() override { return cuda_text(); }
};

}  // namespace kiln::kernel::gen
