// SPDX-License-Identifier: MIT OR Apache-2.0
// The C-like targets: C++ for the CPU and CUDA C for NVRTC. They share types, literals, the
// f16/bf16 conversions (the same bit-exact code on both) and most expressions.
//
// The C++ target runs a group's threads one after another. A barrier splits the kernel body
// into phases: control flow that contains a barrier runs once per group (its condition is
// uniform, which validate() guarantees), and each stretch of other statements becomes a loop
// over the group's threads. A value defined in one phase and used in another is kept per thread
// (an array over the group), as is a local variable used in more than one phase.
//
// A loop whose bounds are the same for every thread (a uniform `for_` outside divergent control
// flow, and a uniform `if_` holding one) also runs once per group, with the loop over the
// threads inside it: the threads' work of one iteration is then a loop the compiler vectorises
// across threads (a tiled matmul's k loop), where a loop per thread would run scalar code.
#include <cmath>
#include <functional>

#include "kernel/render.h"

namespace kiln::kernel::gen {
namespace {

using ir::Kind;
using ir::kNone;

const char* kConversions = R"(KK_FN float kk_h2f(unsigned short h) {
  unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return kk_as_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) { float v = (float)m * 5.9604644775390625e-8f; return sign ? -v : v; }
  return kk_as_float(sign | ((e + 112u) << 23) | (m << 13));
}
KK_FN unsigned short kk_f2h(float f) {
  unsigned x = kk_as_uint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (unsigned short)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (ax < 0x38800000u) return (unsigned short)(sign | (kk_as_uint(kk_as_float(ax) + 0.5f) - 0x3f000000u));
  ax += 0xc8000fffu + ((ax >> 13) & 1u);
  return (unsigned short)(sign | (ax >> 13));
}
KK_FN float kk_b2f(unsigned short b) { return kk_as_float((unsigned)b << 16); }
KK_FN unsigned short kk_f2b(float f) {
  unsigned u = kk_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
KK_FN float kk_sigmoid(float x) { return 1.0f / (1.0f + kk_exp(-x)); }
template <class T> KK_FN T kk_min(T a, T b) { return b < a ? b : a; }
template <class T> KK_FN T kk_max(T a, T b) { return a < b ? b : a; }
template <class T, int N> struct alignas(sizeof(T) * N) kk_v { T v[N]; };
)";

const char* kCppPrelude = R"(#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#define KK_FN static inline
static inline float kk_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned kk_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float kk_exp(float x) { return std::exp(x); }
struct kk_error { int set; int buf; long long index; };
struct kk_args {
  void* const* bufs;
  const long long* sizes;
  const long long* iargs;
  const double* fargs;
  unsigned groups[3];
  kk_error* err;
};
struct kk_oob {};
[[noreturn]] static void kk_fail(int buf, long long i, const kk_args* a) {
  int z = 0;
  if (__atomic_compare_exchange_n(&a->err->set, &z, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    a->err->buf = buf;
    a->err->index = i;
  }
  throw kk_oob{};
}
static inline long long kk_chk(long long i, long long n, int buf, const kk_args* a) {
  if ((unsigned long long)i >= (unsigned long long)n) kk_fail(buf, i, a);
  return i;
}
template <class T> static inline T kk_div(T x, T y, bool mod, const kk_args* a) {
  if (y == 0 || (std::is_signed<T>::value && y == T(-1) && x == std::numeric_limits<T>::min())) kk_fail(-1, (long long)x, a);
  return mod ? x % y : x / y;
}
template <class T> static inline T kk_atomic_min(T* p, T v) {
  T o = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < o && !__atomic_compare_exchange_n(p, &o, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return o;
}
template <class T> static inline T kk_atomic_max(T* p, T v) {
  T o = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (o < v && !__atomic_compare_exchange_n(p, &o, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return o;
}
)";

const char* kCudaPrelude = R"(#define KK_FN __device__ __forceinline__
KK_FN float kk_as_float(unsigned u) { return __uint_as_float(u); }
KK_FN unsigned kk_as_uint(float f) { return __float_as_uint(f); }
KK_FN float kk_exp(float x) { return expf(x); }
template <class T> KK_FN T kk_sg_add(T v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }
template <class T> KK_FN T kk_sg_min(T v) { for (int o = 16; o > 0; o >>= 1) { T w = __shfl_xor_sync(0xffffffffu, v, o); v = w < v ? w : v; } return v; }
template <class T> KK_FN T kk_sg_max(T v) { for (int o = 16; o > 0; o >>= 1) { T w = __shfl_xor_sync(0xffffffffu, v, o); v = v < w ? w : v; } return v; }
)";

std::string identifier(const std::string& s) {
  std::string r = "kk_";
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return r;
}

class CLike : public Base {
 public:
  CLike(const ir::Kernel& kk, Target t, bool debug) : Base(kk, t), cuda(t == Target::Cuda), debug_(debug) {}

 protected:
  bool cuda, debug_;

  std::string ty(Type t, int lanes) override {
    static const char* n[] = {"bool",           "int",   "unsigned", "long long", "unsigned short",
                              "unsigned short", "float", "double"};
    std::string s = n[static_cast<int>(t)];
    return lanes > 1 ? "kk_v<" + s + ", " + std::to_string(lanes) + ">" : s;
  }
  std::string lit(const ir::Op& op) override {
    switch (op.type) {
      case Type::Bool:
        return op.i ? "true" : "false";
      case Type::I32:
        return op.i == INT32_MIN ? "(-2147483647 - 1)" : std::to_string(op.i);
      case Type::U32:
        return std::to_string(static_cast<uint32_t>(op.i)) + "u";  // -1 is 4294967295u
      case Type::I64:
        return op.i == INT64_MIN ? "(-9223372036854775807ll - 1)" : std::to_string(op.i) + "ll";
      default:
        break;
    }
    const bool d = op.type == Type::F64;
    if (std::isfinite(op.f)) return d ? double_text(op.f) : float_text(op.f) + "f";
    const std::string v = std::isnan(op.f) ? "kk_as_float(0x7fc00000u)"
                          : op.f > 0       ? "kk_as_float(0x7f800000u)"
                                           : "kk_as_float(0xff800000u)";
    return d ? "((double)" + v + ")" : v;
  }
  std::string math(ir::UnaryFn f, Type t, const std::string& x) override {
    using U = ir::UnaryFn;
    const bool d = t == Type::F64;
    if (f == U::Sigmoid) return "kk_sigmoid(" + x + ")";
    if (f == U::Rsqrt)
      return cuda ? (d ? "rsqrt(" : "rsqrtf(") + x + ")" : (d ? "(1.0 / std::sqrt(" : "(1.0f / std::sqrt(") + x + "))";
    static const char* n[] = {"",    "", "exp",  "log",   "sqrt", "",    "tanh",
                              "erf", "", "fabs", "floor", "ceil", "sin", "cos"};
    return (cuda ? std::string(n[static_cast<int>(f)]) + (d ? "(" : "f(")
                 : "std::" + std::string(n[static_cast<int>(f)]) + "(") +
           x + ")";
  }
  std::string binary_fn(ir::BinaryFn f, Type t, const std::string& a, const std::string& b) override {
    if (t == Type::F32 || t == Type::F64) {
      const char* n = f == ir::BinaryFn::Min ? "fmin" : f == ir::BinaryFn::Max ? "fmax" : "pow";
      return (cuda ? std::string(n) + (t == Type::F64 ? "(" : "f(") : "std::" + std::string(n) + "(") + a + ", " + b +
             ")";
    }
    return std::string(f == ir::BinaryFn::Min ? "kk_min(" : "kk_max(") + a + ", " + b + ")";
  }
  std::string cast(Type to, Type, const std::string& x) override { return "((" + ty(to, 1) + ")" + x + ")"; }
  std::string bitcast(Type to, Type from, const std::string& x) override {
    if (to == Type::F32) return "kk_as_float((unsigned)" + x + ")";
    if (from == Type::F32) return "((" + ty(to, 1) + ")kk_as_uint(" + x + "))";
    return "((" + ty(to, 1) + ")" + x + ")";
  }
  std::string int_divide(bool mod, const std::string& a, const std::string& b) override {
    if (!debug_ || cuda) return Base::int_divide(mod, a, b);
    return "kk_div(" + a + ", " + b + (mod ? ", true, a)" : ", false, a)");
  }
  std::string extract(const std::string& v, int lane) override { return v + ".v[" + std::to_string(lane) + "]"; }

  std::string mem(const ir::Op& op) const { return std::string(op.shared ? "s" : "b") + std::to_string(op.obj); }
  Type elem(const ir::Op& op) const { return op.shared ? k.shared[op.obj].type : k.buffers[op.obj].type; }
  std::string index(const ir::Op& op, const std::string& idx, int lanes = 1) {
    if (!debug_) return idx;
    std::string n = op.shared ? std::to_string(k.shared[op.obj].count) : "n" + std::to_string(op.obj);
    int id = static_cast<int>(op.shared ? k.buffers.size() + op.obj : op.obj);
    if (lanes == 1) return "kk_chk(" + idx + ", " + n + ", " + std::to_string(id) + ", a)";
    return "(kk_chk((long long)" + idx + " + " + std::to_string(lanes - 1) + ", " + n + ", " + std::to_string(id) +
           ", a) - " + std::to_string(lanes - 1) + ")";
  }
  std::string from_storage(Type t, const std::string& x) {
    return t == Type::F16 ? "kk_h2f(" + x + ")" : t == Type::BF16 ? "kk_b2f(" + x + ")" : x;
  }
  std::string to_storage(Type t, const std::string& x) {
    return t == Type::F16 ? "kk_f2h(" + x + ")" : t == Type::BF16 ? "kk_f2b(" + x + ")" : x;
  }
  std::string load(const ir::Op& op, const std::string& idx) override {
    return from_storage(elem(op), mem(op) + "[" + index(op, idx) + "]");
  }
  std::string load_vec(const ir::Op& op, const std::string& idx) override {
    Type e = elem(op);
    std::string i = index(op, idx, op.lanes);
    if (cuda && e != Type::F16 && e != Type::BF16)
      return "*(const " + ty(e, op.lanes) + "*)(" + mem(op) + " + " + i + ")";
    std::string s = ty(op.type, op.lanes) + "{{";
    for (int l = 0; l < op.lanes; ++l)
      s += (l ? ", " : "") + from_storage(e, mem(op) + "[" + i + " + " + std::to_string(l) + "]");
    return s + "}}";
  }
  void store(const ir::Op& op, const std::string& idx, const std::vector<std::string>& v) override {
    Type e = elem(op);
    std::string i = index(op, idx, op.lanes);
    if (v.size() == 1) {
      line(mem(op) + "[" + i + "] = " + to_storage(e, v[0]) + ";");
      return;
    }
    if (cuda && e != Type::F16 && e != Type::BF16) {
      std::string s = "*(" + ty(e, op.lanes) + "*)(" + mem(op) + " + " + i + ") = " + ty(e, op.lanes) + "{{";
      for (size_t l = 0; l < v.size(); ++l) s += (l ? ", " : "") + v[l];
      line(s + "}};");
      return;
    }
    line("{");
    ++depth;
    line("const long long kk_i = " + i + ";");
    for (size_t l = 0; l < v.size(); ++l)
      line(mem(op) + "[kk_i + " + std::to_string(l) + "] = " + to_storage(e, v[l]) + ";");
    --depth;
    line("}");
  }
  std::string atomic(const ir::Op& op, const std::string& idx, const std::string& v) override {
    std::string p = std::string("&") + mem(op) + "[" + index(op, idx) + "]";
    auto f = static_cast<ir::AtomicFn>(op.attr);
    if (cuda) {
      const char* n = f == ir::AtomicFn::Add ? "atomicAdd(" : f == ir::AtomicFn::Min ? "atomicMin(" : "atomicMax(";
      return n + p + ", " + v + ")";
    }
    if (f == ir::AtomicFn::Add) return "__atomic_fetch_add(" + p + ", " + v + ", __ATOMIC_RELAXED)";
    return std::string(f == ir::AtomicFn::Min ? "kk_atomic_min(" : "kk_atomic_max(") + p + ", " + v + ")";
  }
  std::string subgroup(const ir::Op& op, const std::string& v, const std::string& other) override {
    if (!cuda) unsupported("subgroups of more than one lane (trace with Limits::subgroups = false)");
    if (k.limits.subgroup_size != 32) unsupported("a subgroup size other than 32");
    switch (static_cast<ir::SubgroupFn>(op.attr)) {
      case ir::SubgroupFn::Add:
        return "kk_sg_add(" + v + ")";
      case ir::SubgroupFn::Min:
        return "kk_sg_min(" + v + ")";
      case ir::SubgroupFn::Max:
        return "kk_sg_max(" + v + ")";
      case ir::SubgroupFn::Shuffle:
        return "__shfl_sync(0xffffffffu, " + v + ", " + other + ")";
      case ir::SubgroupFn::ShuffleXor:
        return "__shfl_xor_sync(0xffffffffu, " + v + ", " + other + ")";
    }
    return "";
  }
  std::string builtin(const ir::Op& op) override {
    auto b = static_cast<ir::Builtin>(op.attr);
    std::string ax(1, "xyz"[op.axis]);
    if (cuda) {
      if (b == ir::Builtin::ThreadId) return "((int)threadIdx." + ax + ")";
      if (b == ir::Builtin::GroupId) return "((int)blockIdx." + ax + ")";
      if (b == ir::Builtin::NumGroups) return "((int)gridDim." + ax + ")";
      return "((int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u))";
    }
    if (b == ir::Builtin::ThreadId) return "kk_t" + ax;
    if (b == ir::Builtin::GroupId) return "kk_g" + ax;
    if (b == ir::Builtin::NumGroups) return "kk_n" + ax;
    return "0";
  }
  void barrier() override {
    if (cuda) line("__syncthreads();");
  }

  void declarations() {
    for (size_t i = 0; i < k.locals.size(); ++i) line(ty(k.locals[i], 1) + " l" + std::to_string(i) + ";");
  }
  void body_params(std::string& s) {
    for (size_t i = 0; i < k.buffers.size(); ++i) {
      const auto& b = k.buffers[i];
      if (!s.empty()) s += ", ";
      s += (b.access == Access::Read ? "const " : "") + ty(b.type, 1) + "* __restrict__ b" + std::to_string(i);
    }
    for (size_t i = 0; i < k.scalars.size(); ++i) {
      if (!s.empty()) s += ", ";
      s += ty(k.scalars[i].type, 1) + " p" + std::to_string(i);
    }
  }

 public:
  std::string cuda_text() {
    out = "// kernel " + k.name + " [" + k.spec + "]\n";
    out += kCudaPrelude;
    out += kConversions;
    std::string params;
    body_params(params);
    std::string fn = identifier(k.name);
    out += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(k.threads()) + ") " + fn + "(" + params +
           ") {\n";
    for (size_t i = 0; i < k.shared.size(); ++i)
      line("__shared__ " + ty(k.shared[i].type, 1) + " s" + std::to_string(i) + "[" +
           std::to_string(k.shared[i].count) + "];");
    declarations();
    region(0);
    out += "}\n";
    return out;
  }
  std::string text() override { return cuda_text(); }
};

/// The C++ target: phases split at barriers, threads of a group as loops.
class Cpp : public CLike {
 public:
  Cpp(const ir::Kernel& kk, bool debug) : CLike(kk, Target::Cpp, debug) {}

  std::string text() override {
    if (k.limits.subgroups) unsupported("subgroups of more than one lane (trace with Limits::subgroups = false)");
    plan();
    out = "// kernel " + k.name + " [" + k.spec + "]\n";
    out += kCppPrelude;
    out += kConversions;
    out += "extern \"C\" void kk_run(const kk_args* a, long long g0, long long g1) {\n";
    for (size_t i = 0; i < k.buffers.size(); ++i) {
      const auto& b = k.buffers[i];
      std::string n = std::to_string(i);
      line(std::string(b.access == Access::Read ? "const " : "") + ty(b.type, 1) + "* const b" + n + " = (" +
           (b.access == Access::Read ? "const " : "") + ty(b.type, 1) + "*)a->bufs[" + n + "];");
      if (debug_) line("const long long n" + n + " = a->sizes[" + n + "];");
    }
    for (size_t i = 0; i < k.scalars.size(); ++i) {
      Type t = k.scalars[i].type;
      std::string n = std::to_string(i);
      line("const " + ty(t, 1) + " p" + n + " = (" + ty(t, 1) + ")a->" + (is_float(t) ? "fargs[" : "iargs[") + n +
           "];");
    }
    line("const int kk_nx = (int)a->groups[0], kk_ny = (int)a->groups[1], kk_nz = (int)a->groups[2];");
    line("(void)kk_nz;");
    if (debug_) {
      line("try {");
      ++depth;
    }
    line("for (long long kk_g = g0; kk_g < g1; ++kk_g) {");
    ++depth;
    line(
        "const int kk_gx = (int)(kk_g % kk_nx), kk_gy = (int)(kk_g / kk_nx % kk_ny), kk_gz = (int)(kk_g / ((long "
        "long)kk_nx * kk_ny));");
    line("(void)kk_gx; (void)kk_gy; (void)kk_gz;");
    for (size_t i = 0; i < k.shared.size(); ++i)
      line(ty(k.shared[i].type, 1) + " s" + std::to_string(i) + "[" + std::to_string(k.shared[i].count) + "];");
    std::string gs = std::to_string(k.threads());
    for (size_t i = 0; i < k.locals.size(); ++i)
      line(ty(k.locals[i], 1) + " l" + std::to_string(i) + (local_multi[i] ? "[" + gs + "]" : "") + ";");
    for (uint32_t id = 0; id < k.ops.size(); ++id)
      if (crossing[id]) line(ty(k.ops[id].type, k.ops[id].lanes) + " " + name(id) + "[" + gs + "];");
    group_region(0);
    --depth;
    line("}");
    if (debug_) {
      --depth;
      line("} catch (const kk_oob&) {}");
    }
    out += "}\n";
    return out;
  }

 private:
  std::vector<int> def_phase;     ///< op -> phase of its definition (-1: group level)
  std::vector<bool> crossing;     ///< value used outside its phase: one per thread
  std::vector<int> local_phase;   ///< local -> first phase using it
  std::vector<bool> local_multi;  ///< local used in several phases
  std::vector<bool> group_level;  ///< op runs once per group
  bool in_threads = false;        ///< rendering inside a loop over the threads
  int open_loops = 0;             ///< loops opened by open_threads()

  std::vector<bool> divergent;  ///< ir::divergence: the value may differ between threads
  std::vector<bool> hoist;      ///< a uniform loop (or a uniform if holding one): run per group
  /// Integer arithmetic over thread and group ids, scalars and constants only (a few ops deep):
  /// written out where used instead of kept per thread, so that an index stays an expression
  /// of the thread loop's variable (contiguous accesses the compiler vectorises, not gathers).
  std::vector<bool> remat;

  void mark_remat() {
    remat.assign(k.ops.size(), false);
    std::vector<int> cost(k.ops.size(), 0);
    for (uint32_t id = 0; id < k.ops.size(); ++id) {
      const ir::Op& op = k.ops[id];
      const bool pure = op.kind == Kind::Binary || op.kind == Kind::Unary || op.kind == Kind::Compare ||
                        op.kind == Kind::Select || (op.kind == Kind::Cast && !op.attr);
      if (!pure || op.lanes != 1 || is_float(op.type)) continue;
      int c = 1;
      bool ok = true;
      for (uint8_t i = 0; i < op.nin && ok; ++i) {
        const uint32_t in = op.in[i];
        const bool from_builtin =
            k.ops[in].kind == Kind::Builtin || k.ops[in].kind == Kind::Const || k.ops[in].kind == Kind::Scalar;
        ok = (from_builtin && !is_float(k.ops[in].type)) || remat[in];
        c += cost[in];
      }
      if (ok && c <= 12) {
        remat[id] = true;
        cost[id] = c;
      }
    }
  }

  bool is_group(uint32_t id) const {
    const ir::Op& op = k.ops[id];
    if (op.kind == Kind::Barrier || hoist[id]) return true;
    return contains_barrier(k, op.region[0]) || contains_barrier(k, op.region[1]);
  }

  /// Marks the uniform For ops of region r (and the uniform Ifs holding them) to be run per
  /// group; whether it marked any.
  bool mark_hoist(uint32_t r) {
    if (r == kNone) return false;
    bool any = false;
    for (uint32_t id : k.regions[r].ops) {
      const ir::Op& op = k.ops[id];
      if (op.kind == Kind::For && !divergent[id]) {
        hoist[id] = true;
        mark_hoist(op.region[0]);
      } else if (op.kind == Kind::If && !divergent[id]) {
        const bool a = mark_hoist(op.region[0]), b = mark_hoist(op.region[1]);
        hoist[id] = a || b;
      }
      any = any || hoist[id];
    }
    return any;
  }

  void use(uint32_t v, int phase) {
    if (inlined(v) || remat[v] || def_phase[v] == -2) return;
    if (def_phase[v] != phase || phase == -1) crossing[v] = true;
  }
  void touch_local(uint32_t slot, int phase) {
    if (local_phase[slot] == -1)
      local_phase[slot] = phase;
    else if (local_phase[slot] != phase)
      local_multi[slot] = true;
  }

  /// Assigns phases; `group` is true for a region whose ops may be group level.
  void plan_region(uint32_t r, bool group, int& phase, int& cur) {
    if (r == kNone) return;
    for (uint32_t id : k.regions[r].ops) {
      const ir::Op& op = k.ops[id];
      bool g = group && (is_group(id) || op.kind == Kind::Yield);
      if (g) {
        group_level[id] = true;
        cur = -1;
        for (uint8_t i = 0; i < op.nin; ++i) use(op.in[i], -1);
        if (op.kind == Kind::For) def_phase[id] = -2;  // a plain variable of the group loop
        plan_region(op.region[0], true, phase, cur);
        plan_region(op.region[1], true, phase, cur);
        cur = -1;
        continue;
      }
      if (cur == -1) cur = ++phase;
      def_phase[id] = cur;
      for (uint8_t i = 0; i < op.nin; ++i) use(op.in[i], cur);
      if (op.kind == Kind::LocalLoad || op.kind == Kind::LocalStore) touch_local(op.obj, cur);
      plan_region(op.region[0], false, phase, cur);
      plan_region(op.region[1], false, phase, cur);
    }
  }

  void plan() {
    divergent = ir::divergence(k);
    hoist.assign(k.ops.size(), false);
    mark_hoist(0);
    mark_remat();
    def_phase.assign(k.ops.size(), -1);
    crossing.assign(k.ops.size(), false);
    group_level.assign(k.ops.size(), false);
    local_phase.assign(k.locals.size(), -1);
    local_multi.assign(k.locals.size(), false);
    int phase = 0, cur = -1;
    plan_region(0, true, phase, cur);
    for (uint32_t id = 0; id < k.ops.size(); ++id)
      if (crossing[id]) name(id);
  }

  std::string ref(uint32_t id) override {
    if (id < remat.size() && remat[id]) return expr(id);
    std::string s = CLike::ref(id);
    if (id < crossing.size() && crossing[id]) s += in_threads ? "[kk_t]" : "[0]";
    return s;
  }
  void statement(uint32_t id) override {
    if (!remat[id]) CLike::statement(id);
  }
  std::string local(uint32_t slot) override {
    return std::string("l") + std::to_string(slot) + (local_multi[slot] ? (in_threads ? "[kk_t]" : "[0]") : "");
  }
  void define(uint32_t id, const std::string& e) override {
    if (crossing[id])
      line(name(id) + "[kk_t] = " + e + ";");
    else
      CLike::define(id, e);
  }

  /// Opens the loops over the group's threads: one per axis of more than one thread, x innermost
  /// so that consecutive threads are consecutive iterations.
  void open_threads() {
    if (in_threads) return;
    const auto& g = k.group;
    open_loops = 0;
    for (int axis = 2; axis >= 0; --axis) {
      std::string v = std::string("kk_t") + "xyz"[axis];
      if (g[static_cast<size_t>(axis)] == 1 && axis > 0) continue;
      // The threads of one phase are independent (what one writes, another reads only after a
      // barrier, which ends the phase), so the compiler may vectorise across them.
      if (axis == 0) line("#pragma GCC ivdep");
      line("for (int " + v + " = 0; " + v + " < " + std::to_string(g[static_cast<size_t>(axis)]) + "; ++" + v + ") {");
      ++depth;
      ++open_loops;
    }
    if (g[1] == 1) line("const int kk_ty = 0;");
    if (g[2] == 1) line("const int kk_tz = 0;");
    line("const int kk_t = (kk_tz * " + std::to_string(g[1]) + " + kk_ty) * " + std::to_string(g[0]) + " + kk_tx;");
    line("(void)kk_t; (void)kk_ty; (void)kk_tz;");
    in_threads = true;
  }
  void close_threads() {
    if (!in_threads) return;
    for (; open_loops > 0; --open_loops) {
      --depth;
      line("}");
    }
    in_threads = false;
  }

  void group_region(uint32_t r) {
    if (r == kNone) return;
    for (uint32_t id : k.regions[r].ops) {
      if (!group_level[id]) {
        if (!inlined(id) && !remat[id]) {
          open_threads();
          statement(id);
        }
        continue;
      }
      close_threads();
      const ir::Op& op = k.ops[id];
      switch (op.kind) {
        case Kind::Barrier:
          line("// barrier");
          break;
        case Kind::If:
          line("if (" + ref(op.in[0]) + ") {");
          ++depth;
          group_region(op.region[0]);
          --depth;
          if (op.region[1] != kNone) {
            line("} else {");
            ++depth;
            group_region(op.region[1]);
            --depth;
          }
          line("}");
          break;
        case Kind::For:
          open_for(id, ref(op.in[0]), ref(op.in[1]), ref(op.in[2]));
          ++depth;
          group_region(op.region[0]);
          --depth;
          line("}");
          break;
        case Kind::While:
          open_loop();
          ++depth;
          group_region(op.region[0]);
          group_region(op.region[1]);
          --depth;
          line("}");
          break;
        case Kind::Yield:
          line("if (!" + ref(op.in[0]) + ") { break; }");
          break;
        default:
          break;
      }
    }
    close_threads();
  }
};

}  // namespace

std::string render_cpp(const ir::Kernel& k, bool debug) { return Cpp(k, debug).text(); }
std::string render_cuda(const ir::Kernel& k) { return CLike(k, Target::Cuda, false).text(); }

}  // namespace kiln::kernel::gen
