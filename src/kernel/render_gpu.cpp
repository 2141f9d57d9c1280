// SPDX-License-Identifier: MIT OR Apache-2.0
// The shading-language targets: GLSL 4.50 compute (for SPIR-V and Vulkan) and WGSL (WebGPU).
// Neither has erf: both get the same polynomial (fractional error below 1.2e-7).
#include <algorithm>
#include <cmath>

#include "kernel/render.h"

namespace kiln::kernel::gen {
namespace {

using ir::Kind;

/// Whether k (or a function it calls) has a value, parameter, local or memory of type t.
bool uses_type(const ir::Kernel& k, Type t) {
  for (const auto& b : k.buffers)
    if (b.type == t) return true;
  for (const auto& s : k.shared)
    if (s.type == t) return true;
  for (const auto& s : k.scalars)
    if (s.type == t) return true;
  for (Type l : k.locals)
    if (l == t) return true;
  for (const auto& f : k.functions)
    if (f->uses.types >> static_cast<int>(t) & 1) return true;
  for (const auto& r : k.regions)
    for (uint32_t id : r.ops)
      if (k.ops[id].type == t) return true;
  return false;
}

bool uses_unary(const ir::Kernel& k, ir::UnaryFn f) {
  return any_op(
      k, [f](const ir::Op& op) { return op.kind == Kind::Unary && op.attr == static_cast<uint8_t>(f); },
      [f](const ir::Function::Uses& u) { return u.unary >> static_cast<int>(f) & 1; });
}

/// (A function's body has no subgroup operation.)
bool uses_subgroups(const ir::Kernel& k) {
  return any_op(
      k,
      [](const ir::Op& op) {
        return op.kind == Kind::Subgroup ||
               (op.kind == Kind::Builtin && op.attr == static_cast<uint8_t>(ir::Builtin::LaneId));
      },
      [](const ir::Function::Uses&) { return false; });
}

class Glsl : public Base {
 public:
  Glsl(const ir::Kernel& kk, bool debug) : Base(kk, Target::Glsl), debug_(debug) {}

  std::string text() override {
    out = "#version 450\n// kernel " + k.name + " [" + k.spec + "]\n";
    bool h = uses_type(k, Type::F16), bf = uses_type(k, Type::BF16);
    if (h || bf) out += "#extension GL_EXT_shader_16bit_storage : require\n";
    if (h) out += "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n";
    if (bf) out += "#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require\n";
    if (uses_type(k, Type::I64)) out += "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
    if (uses_subgroups(k)) {
      out += "#extension GL_KHR_shader_subgroup_basic : require\n";
      out += "#extension GL_KHR_shader_subgroup_arithmetic : require\n";
      out += "#extension GL_KHR_shader_subgroup_shuffle : require\n";
      out += "#extension GL_KHR_shader_subgroup_shuffle_relative : require\n";
    }
    out += "layout(local_size_x = " + num(k.group[0]) + ", local_size_y = " + num(k.group[1]) +
           ", local_size_z = " + num(k.group[2]) + ") in;\n";
    for (size_t i = 0; i < k.buffers.size(); ++i) {
      const auto& b = k.buffers[i];
      Text n = num(i);
      const char* q = b.access == Access::Read ? "readonly " : b.access == Access::Write ? "writeonly " : "";
      out += "layout(std430, set = 0, binding = " + n + ") " + q + "buffer B" + n + " { " + ty(b.type) + " d[]; } b" +
             n + ";\n";
    }
    if (debug_) {
      // The first out-of-range access of a dispatch: flag, object (buffers, then shared arrays),
      // index, size. An access out of range reads element 0; a store or atomic there is skipped.
      const Text n = num(k.buffers.size());
      out += "layout(std430, set = 0, binding = " + n + ") buffer KKErr { uint e[4]; } kk_err;\n";
      out +=
          "bool kk_ok(int i, int n, uint obj) {\n"
          "  if (i >= 0 && i < n) return true;\n"
          "  if (atomicCompSwap(kk_err.e[0], 0u, 1u) == 0u) {\n"
          "    kk_err.e[1] = obj; kk_err.e[2] = uint(i); kk_err.e[3] = uint(n);\n"
          "  }\n"
          "  return false;\n"
          "}\n";
    }
    if (!k.scalars.empty()) {
      out += "layout(push_constant) uniform P {";
      for (size_t i = 0; i < k.scalars.size(); ++i) out += " " + ty(k.scalars[i].type) + " p" + num(i) + ";";
      out += " } kk_p;\n";
    }
    for (size_t i = 0; i < k.shared.size(); ++i)
      out += "shared " + ty(k.shared[i].type) + " s" + num(i) + "[" + num(k.shared[i].count) + "];\n";
    if (uses_unary(k, ir::UnaryFn::Sigmoid)) out += "float kk_sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }\n";
    if (uses_unary(k, ir::UnaryFn::RoundF16))
      out +=
          "float kk_round_f16(float x) {\n"
          "  uint u = floatBitsToUint(x), s = u & 0x80000000u, a = u & 0x7fffffffu;\n"
          "  if (a > 0x7f800000u) return x;\n"
          "  if (a >= 0x477ff000u) return uintBitsToFloat(s | 0x7f800000u);\n"
          "  if (a >= 0x38800000u) return uintBitsToFloat(s | ((a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u));\n"
          "  return uintBitsToFloat(s | floatBitsToUint(roundEven(uintBitsToFloat(a) * 16777216.0) * "
          "5.9604644775390625e-8));\n"
          "}\n";
    if (uses_unary(k, ir::UnaryFn::RoundBF16))
      out +=
          "float kk_round_bf16(float x) {\n"
          "  uint u = floatBitsToUint(x);\n"
          "  if ((u & 0x7fffffffu) > 0x7f800000u) return x;\n"
          "  return uintBitsToFloat((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);\n"
          "}\n";
    if (uses_unary(k, ir::UnaryFn::Erf))
      out +=
          "float kk_erf(float x) {\n"
          "  float z = abs(x), t = 1.0 / (1.0 + 0.5 * z);\n"
          "  float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * "
          "(-0.18628806 +\n"
          "            t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * "
          "0.17087277)))))))));\n"
          "  return x >= 0.0 ? 1.0 - r : r - 1.0;\n"
          "}\n";
    if (bf)
      out +=
          "uint kk_f2b(float f) {\n  uint u = floatBitsToUint(f);\n  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> "
          "16) | 0x40u;\n  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;\n}\n";
    functions();
    out += "void main() {\n";
    for (size_t i = 0; i < k.locals.size(); ++i) line(ty(k.locals[i]), " l", num(i), ";");
    region(0);
    out += "}\n";
    return out;
  }

 protected:
  Text ty(Type t, int lanes = 1) override {
    static const char* s[] = {"bool", "int", "uint", "int64_t", "float16_t", "uint16_t", "float", "double"};
    static const char* v[] = {"bvec", "ivec", "uvec", "i64vec", "f16vec", "u16vec", "vec", "dvec"};
    return lanes > 1 ? v[static_cast<int>(t)] + num(lanes) : s[static_cast<int>(t)];
  }
  Text lit(const ir::Op& op) override {
    if (Text s = int_lit(op, "l"); !s.empty()) return s;
    const bool d = op.type == Type::F64;
    if (std::isfinite(op.f)) return d ? double_text(op.f) + "lf" : float_text(op.f);
    const Text v = std::isnan(op.f) ? "uintBitsToFloat(0x7fc00000u)"
                   : op.f > 0       ? "uintBitsToFloat(0x7f800000u)"
                                    : "uintBitsToFloat(0xff800000u)";
    return d ? "double(" + v + ")" : v;
  }
  Text scalar(uint32_t obj) override { return cat("kk_p.p", num(obj)); }
  Text builtin(const ir::Op& op) override {
    const char ax = "xyz"[op.axis];
    switch (static_cast<ir::Builtin>(op.attr)) {
      case ir::Builtin::ThreadId:
        return cat("int(gl_LocalInvocationID.", ax, ")");
      case ir::Builtin::GroupId:
        return cat("int(gl_WorkGroupID.", ax, ")");
      case ir::Builtin::NumGroups:
        return cat("int(gl_NumWorkGroups.", ax, ")");
      case ir::Builtin::LaneId:
        return "int(gl_SubgroupInvocationID)";
    }
    return "";
  }
  Text math(ir::UnaryFn f, Type, Text x) override {
    if (f == ir::UnaryFn::RoundF16) return cat("kk_round_f16(", x, ")");
    if (f == ir::UnaryFn::RoundBF16) return cat("kk_round_bf16(", x, ")");
    static const char* n[] = {"",       "",           "exp", "log",   "sqrt", "inversesqrt", "tanh",
                              "kk_erf", "kk_sigmoid", "abs", "floor", "ceil", "sin",         "cos"};
    return cat(n[static_cast<int>(f)], "(", x, ")");
  }
  Text binary_fn(ir::BinaryFn f, Type, Text a, Text b) override {
    return cat(f == ir::BinaryFn::Min ? "min(" : f == ir::BinaryFn::Max ? "max(" : "pow(", a, ", ", b, ")");
  }
  Text bitcast(Type to, Type from, Text x) override {
    if (to == Type::F32) return cat(from == Type::I32 ? "intBitsToFloat(" : "uintBitsToFloat(", x, ")");
    if (from == Type::F32) return cat(to == Type::I32 ? "floatBitsToInt(" : "floatBitsToUint(", x, ")");
    return cat(ty(to), "(", x, ")");
  }
  Text mem(const ir::Op& op, Text idx, bool checked = true) {
    Text i = k.ops[op.in[0]].type == Type::I64 ? cat("int(", idx, ")") : idx;
    if (debug_ && checked) i = cat("(", ok(op, i), " ? ", i, " : 0)");
    return cat(op.shared ? "s" : "b", num(op.obj), op.shared ? "[" : ".d[", i, "]");
  }
  /// KILN_KERNEL_DEBUG: whether index i of op's memory is in range (recording the first that is not).
  Text ok(const ir::Op& op, Text i) {
    const Text n = op.shared ? num(k.shared[op.obj].count) : "b" + num(op.obj) + ".d.length()";
    const size_t obj = op.shared ? k.buffers.size() + op.obj : op.obj;
    return cat("kk_ok(", i, ", ", n, ", ", num(obj), "u)");
  }
  bool debug_;
  Type elem(const ir::Op& op) const { return op.shared ? k.shared[op.obj].type : k.buffers[op.obj].type; }
  Text from_storage(Type t, Text x) {
    return t == Type::F16 ? cat("float(", x, ")") : t == Type::BF16 ? cat("uintBitsToFloat(uint(", x, ") << 16)") : x;
  }
  Text to_storage(Type t, Text x) {
    return t == Type::F16 ? cat("float16_t(", x, ")") : t == Type::BF16 ? cat("uint16_t(kk_f2b(", x, "))") : x;
  }
  Text load(const ir::Op& op, Text idx) override { return from_storage(elem(op), mem(op, idx)); }
  Text load_vec(const ir::Op& op, Text idx) override {
    Text s = ty(op.type, op.lanes) + "(";
    for (int l = 0; l < op.lanes; ++l)
      s += (l ? ", " : "") + from_storage(elem(op), mem(op, l ? "(" + idx + ") + " + num(l) : idx));
    return cat(s, ")");
  }
  void store(const ir::Op& op, Text idx, const std::vector<Text>& v) override {
    for (size_t l = 0; l < v.size(); ++l) {
      const Text i = l ? "(" + idx + ") + " + num(l) : idx;
      const Text st = mem(op, i, false) + " = " + to_storage(elem(op), v[l]) + ";";
      line(debug_ ? "if (" + ok(op, k.ops[op.in[0]].type == Type::I64 ? "int(" + i + ")" : i) + ") " + st : st);
    }
  }
  Text atomic(const ir::Op& op, Text idx, Text v) override {
    auto f = static_cast<ir::AtomicFn>(op.attr);
    const Text call = Text(f == ir::AtomicFn::Add   ? "atomicAdd("
                           : f == ir::AtomicFn::Min ? "atomicMin("
                                                    : "atomicMax(") +
                      mem(op, idx, false) + ", " + v + ")";
    if (!debug_) return call;
    const Text i = k.ops[op.in[0]].type == Type::I64 ? "int(" + idx + ")" : idx;
    return cat("(", ok(op, i), " ? ", call, " : ", ty(op.type), "(0))");
  }
  Text subgroup(const ir::Op& op, Text v, Text other) override {
    switch (static_cast<ir::SubgroupFn>(op.attr)) {
      case ir::SubgroupFn::Add:
        return cat("subgroupAdd(", v, ")");
      case ir::SubgroupFn::Min:
        return cat("subgroupMin(", v, ")");
      case ir::SubgroupFn::Max:
        return cat("subgroupMax(", v, ")");
      case ir::SubgroupFn::Shuffle:
        return cat("subgroupShuffle(", v, ", uint(", other, "))");
      case ir::SubgroupFn::ShuffleXor:
        return cat("subgroupShuffleXor(", v, ", uint(", other, "))");
    }
    return "";
  }
  void barrier() override {
    line("memoryBarrierShared();");
    line("memoryBarrierBuffer();");
    line("barrier();");
  }
  void define(uint32_t id, Text e) override {
    const ir::Op& op = k.ops[id];
    // precise: float arithmetic as written (no contraction, no reassociation by the driver's
    // compiler), so the CPU's forms (a two-constant reduction, say) keep their accuracy
    const bool fl = op.type == Type::F32 || op.type == Type::F64;
    line(fl ? "precise " : "", ty(op.type, op.lanes), " ", name(id), " = ", e, ";");
  }
  void open_loop() override { line("while (true) {"); }
  std::string render_function(const ir::Function& f) override { return Glsl(f.body, false).function(f); }
  Text function_head(const ir::Function& f) override {
    Text s = cat(ty(f.value_type()), " ", function_name(f), "(");
    for (size_t i = 0; i < f.body.scalars.size(); ++i)
      append(s, i ? ", " : "", ty(f.body.scalars[i].type), " p", num(i));
    return s + ") {";
  }
};

class Wgsl : public Base {
 public:
  explicit Wgsl(const ir::Kernel& kk) : Base(kk, Target::Wgsl) {}

  std::string text() override {
    if (uses_type(k, Type::I64)) unsupported("i64 (WGSL has no 64-bit integers)");
    if (uses_type(k, Type::F64)) unsupported("f64 (WGSL has no 64-bit floats)");
    if (uses_type(k, Type::BF16)) unsupported("bf16 buffers (WGSL has no 16-bit integers)");
    out = "// kernel " + k.name + " [" + k.spec + "]\n";
    if (uses_type(k, Type::F16)) out += "enable f16;\n";
    bool sg = uses_subgroups(k);
    if (sg) out += "enable subgroups;\n";
    for (size_t i = 0; i < k.buffers.size(); ++i) {
      const auto& b = k.buffers[i];
      Text e = atomic_buf[i] ? "atomic<" + ty(b.type) + ">" : ty(b.type);
      out += "@group(0) @binding(" + num(i) + ") var<storage, " + (b.access == Access::Read ? "read" : "read_write") +
             "> b" + num(i) + ": array<" + e + ">;\n";
    }
    if (!k.scalars.empty()) {
      out += "struct Params {";
      for (size_t i = 0; i < k.scalars.size(); ++i)
        out += (i ? ", " : " ") + Text("p") + num(i) + ": " + ty(k.scalars[i].type);
      out += " }\n@group(0) @binding(" + num(k.buffers.size()) + ") var<uniform> kk_p: Params;\n";
    }
    for (size_t i = 0; i < k.shared.size(); ++i) {
      Text e = atomic_shared[i] ? "atomic<" + ty(k.shared[i].type) + ">" : ty(k.shared[i].type);
      out += "var<workgroup> s" + num(i) + ": array<" + e + ", " + num(k.shared[i].count) + ">;\n";
    }
    if (uses_unary(k, ir::UnaryFn::Sigmoid)) out += "fn kk_sigmoid(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }\n";
    if (uses_unary(k, ir::UnaryFn::RoundF16))
      out +=
          "fn kk_round_f16(x: f32) -> f32 {\n"
          "  let u = bitcast<u32>(x);\n  let s = u & 0x80000000u;\n  let a = u & 0x7fffffffu;\n"
          "  if (a > 0x7f800000u) { return x; }\n"
          "  if (a >= 0x477ff000u) { return bitcast<f32>(s | 0x7f800000u); }\n"
          "  if (a >= 0x38800000u) { return bitcast<f32>(s | ((a + 0xfffu + ((a >> 13u) & 1u)) & 0xffffe000u)); }\n"
          "  return bitcast<f32>(s | bitcast<u32>(round(bitcast<f32>(a) * 16777216.0) * 5.9604644775390625e-8));\n"
          "}\n";
    if (uses_unary(k, ir::UnaryFn::RoundBF16))
      out +=
          "fn kk_round_bf16(x: f32) -> f32 {\n"
          "  let u = bitcast<u32>(x);\n"
          "  if ((u & 0x7fffffffu) > 0x7f800000u) { return x; }\n"
          "  return bitcast<f32>((u + 0x7fffu + ((u >> 16u) & 1u)) & 0xffff0000u);\n"
          "}\n";
    // WGSL's constant expressions may not hold an infinity or a NaN (a shader compiler rejects
    // bitcast<f32>(0x7f800000u)); a function's result is not a constant expression.
    const bool special = any_op(
        k, [](const ir::Op& op) { return op.kind == ir::Kind::Const && is_float(op.type) && !std::isfinite(op.f); },
        [](const ir::Function::Uses& u) { return u.special; });
    if (special) out += "fn kk_f32_bits(b: u32) -> f32 { return bitcast<f32>(b); }\n";
    // WGSL lets an implementation assume that floats are never NaN (SwiftShader folds x != x
    // to false): comparisons of floats test for NaN on the bits, so that they follow IEEE 754
    // as on the other targets.
    const bool float_compare = any_op(
        k, [&](const ir::Op& op) { return op.kind == ir::Kind::Compare && is_float(k.ops[op.in[0]].type); },
        [](const ir::Function::Uses& u) { return u.float_compare; });
    if (float_compare) out += "fn kk_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }\n";
    if (uses_unary(k, ir::UnaryFn::Erf))
      out +=
          "fn kk_erf(x: f32) -> f32 {\n"
          "  let z = abs(x);\n  let t = 1.0 / (1.0 + 0.5 * z);\n"
          "  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * "
          "(-0.18628806 +\n"
          "          t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * "
          "0.17087277)))))))));\n"
          "  return select(r - 1.0, 1.0 - r, x >= 0.0);\n"
          "}\n";
    functions();
    out += "@compute @workgroup_size(" + num(k.group[0]) + ", " + num(k.group[1]) + ", " + num(k.group[2]) + ")\n";
    out += "fn main(@builtin(local_invocation_id) kk_lid: vec3<u32>, @builtin(workgroup_id) kk_wid: vec3<u32>,\n";
    out += "        @builtin(num_workgroups) kk_nwg: vec3<u32>";
    if (sg) out += ", @builtin(subgroup_invocation_id) kk_lane: u32";
    out += ") {\n";
    for (size_t i = 0; i < k.locals.size(); ++i) line("var l", num(i), ": ", ty(k.locals[i]), ";");
    region(0);
    out += "}\n";
    return out;
  }

 protected:
  Text ty(Type t, int lanes = 1) override {
    static const char* s[] = {"bool", "i32", "u32", "i64", "f16", "u16", "f32", "f64"};
    Text e = s[static_cast<int>(t)];
    return lanes > 1 ? "vec" + num(lanes) + "<" + e + ">" : e;
  }
  Text lit(const ir::Op& op) override {
    switch (op.type) {
      case Type::Bool:
        return op.i ? "true" : "false";
      case Type::I32:
        return op.i == INT32_MIN ? "bitcast<i32>(0x80000000u)" : num(op.i) + "i";
      case Type::U32:
        return cat(num(static_cast<uint32_t>(op.i)), "u");  // -1 is 4294967295u
      default:
        break;
    }
    if (std::isfinite(op.f)) return cat(float_text(op.f), "f");
    return std::isnan(op.f) ? "kk_f32_bits(0x7fc00000u)"
           : op.f > 0       ? "kk_f32_bits(0x7f800000u)"
                            : "kk_f32_bits(0xff800000u)";
  }
  Text scalar(uint32_t obj) override { return cat("kk_p.p", num(obj)); }
  Text compare(ir::CmpFn f, Type t, Text a, Text b, bool same) override {
    if (!is_float(t)) return Base::compare(f, t, a, b, same);
    const Text na = "kk_isnan(f32(" + a + "))", nb = "kk_isnan(f32(" + b + "))";
    if (same && f == ir::CmpFn::Ne) return na;
    if (same && f == ir::CmpFn::Eq) return cat("!", na);
    if (f == ir::CmpFn::Ne) return cat("(", na, " || ", nb, " || ", a, " != ", b, ")");
    return cat("(!", na, " && !", nb, " && ", a, " ", ir::cmp_name(f), " ", b, ")");
  }
  Text builtin(const ir::Op& op) override {
    const char ax = "xyz"[op.axis];
    switch (static_cast<ir::Builtin>(op.attr)) {
      case ir::Builtin::ThreadId:
        return cat("i32(kk_lid.", ax, ")");
      case ir::Builtin::GroupId:
        return cat("i32(kk_wid.", ax, ")");
      case ir::Builtin::NumGroups:
        return cat("i32(kk_nwg.", ax, ")");
      case ir::Builtin::LaneId:
        return "i32(kk_lane)";
    }
    return "";
  }
  Text math(ir::UnaryFn f, Type, Text x) override {
    if (f == ir::UnaryFn::RoundF16) return cat("kk_round_f16(", x, ")");
    if (f == ir::UnaryFn::RoundBF16) return cat("kk_round_bf16(", x, ")");
    static const char* n[] = {"",       "",           "exp", "log",   "sqrt", "inverseSqrt", "tanh",
                              "kk_erf", "kk_sigmoid", "abs", "floor", "ceil", "sin",         "cos"};
    return cat(n[static_cast<int>(f)], "(", x, ")");
  }
  Text binary_fn(ir::BinaryFn f, Type, Text a, Text b) override {
    return cat(f == ir::BinaryFn::Min ? "min(" : f == ir::BinaryFn::Max ? "max(" : "pow(", a, ", ", b, ")");
  }
  Text bitcast(Type to, Type, Text x) override { return cat("bitcast<", ty(to), ">(", x, ")"); }
  Text select(Text c, Text a, Text b) override { return cat("select(", b, ", ", a, ", ", c, ")"); }
  Text mem(const ir::Op& op, Text idx) { return cat((op.shared ? "s" : "b"), num(op.obj), "[", idx, "]"); }
  bool is_atomic(const ir::Op& op) const { return op.shared ? atomic_shared[op.obj] : atomic_buf[op.obj]; }
  Type elem(const ir::Op& op) const { return op.shared ? k.shared[op.obj].type : k.buffers[op.obj].type; }
  Text load(const ir::Op& op, Text idx) override {
    if (is_atomic(op)) return cat("atomicLoad(&", mem(op, idx), ")");
    return elem(op) == Type::F16 ? cat("f32(", mem(op, idx), ")") : mem(op, idx);
  }
  Text load_vec(const ir::Op& op, Text idx) override {
    Text s = ty(op.type, op.lanes) + "(";
    for (int l = 0; l < op.lanes; ++l) {
      ir::Op one = op;
      s += (l ? ", " : "") + load(one, l ? "(" + idx + ") + " + num(l) : idx);
    }
    return cat(s, ")");
  }
  void store(const ir::Op& op, Text idx, const std::vector<Text>& v) override {
    for (size_t l = 0; l < v.size(); ++l) {
      Text m = mem(op, l ? "(" + idx + ") + " + num(l) : idx);
      Text x = elem(op) == Type::F16 ? "f16(" + v[l] + ")" : v[l];
      line(is_atomic(op) ? "atomicStore(&" + m + ", " + x + ");" : m + " = " + x + ";");
    }
  }
  Text atomic(const ir::Op& op, Text idx, Text v) override {
    auto f = static_cast<ir::AtomicFn>(op.attr);
    return cat(f == ir::AtomicFn::Add   ? "atomicAdd(&"
               : f == ir::AtomicFn::Min ? "atomicMin(&"
                                        : "atomicMax(&",
               mem(op, idx), ", ", v, ")");
  }
  Text subgroup(const ir::Op& op, Text v, Text other) override {
    switch (static_cast<ir::SubgroupFn>(op.attr)) {
      case ir::SubgroupFn::Add:
        return cat("subgroupAdd(", v, ")");
      case ir::SubgroupFn::Min:
        return cat("subgroupMin(", v, ")");
      case ir::SubgroupFn::Max:
        return cat("subgroupMax(", v, ")");
      case ir::SubgroupFn::Shuffle:
        return cat("subgroupShuffle(", v, ", u32(", other, "))");
      case ir::SubgroupFn::ShuffleXor:
        return cat("subgroupShuffleXor(", v, ", u32(", other, "))");
    }
    return "";
  }
  void barrier() override {
    line("storageBarrier();");
    line("workgroupBarrier();");
  }
  void define(uint32_t id, Text e) override {
    const ir::Op& op = k.ops[id];
    line("let ", name(id), ": ", ty(op.type, op.lanes), " = ", e, ";");
  }
  void open_for(uint32_t id, Text b, Text e, Text s) override {
    Text iv = name(id);
    line("for (var ", iv, ": ", ty(k.ops[id].type), " = ", b, "; ", iv, " < ", e, "; ", iv, " += ", s, ") {");
  }
  void open_loop() override { line("loop {"); }
  Text shift_amount(Text b, Type t) override { return t == Type::U32 ? b : cat("u32(", b, ")"); }
  std::string render_function(const ir::Function& f) override { return Wgsl(f.body).function(f); }
  Text function_head(const ir::Function& f) override {
    Text s = cat("fn ", function_name(f), "(");
    for (size_t i = 0; i < f.body.scalars.size(); ++i)
      append(s, i ? ", " : "", "p", num(i), ": ", ty(f.body.scalars[i].type));
    return cat(s, ") -> ", ty(f.value_type()), " {");
  }
  void declare_local(uint32_t slot, Type t) override { line("var l", num(slot), ": ", ty(t), ";"); }
};

}  // namespace

std::string render_glsl(const ir::Kernel& k, bool debug) { return Glsl(k, debug).text(); }
std::string render_wgsl(const ir::Kernel& k) { return Wgsl(k).text(); }

}  // namespace kiln::kernel::gen
