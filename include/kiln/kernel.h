// SPDX-License-Identifier: MIT OR Apache-2.0
// The kernel language: a compute kernel written once as an ordinary C++ function over symbolic
// values, traced into an SSA IR and rendered for each target (C++ for the CPU, CUDA C, GLSL 4.50
// compute, WGSL). Usable without the tensor library. The Book chapter is docs/kernels.md.
//
//   Kernel k = trace("scale", [](Builder& b) {
//     auto x = b.input<float>("x");
//     auto y = b.output<float>("y");
//     Val n = b.scalar<int32_t>("n"), a = b.scalar<float>("a");
//     b.group_size(64);
//     Val i = global_id();
//     if_(i < n, [&] { y[i] = a * x[i]; });
//   });
//   CpuKernel run = compile_cpu(k);
//   run({(n + 63) / 64}, {Arg(y_ptr, n), ...});
#pragma once
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln::kernel {

namespace ir {
struct Kernel;
struct Function;
}  // namespace ir

/// Element and value types. F16 and BF16 are storage types: a load gives an F32 value and a
/// store rounds an F32 value, on every target. F64 is a value type with arithmetic, comparisons,
/// min/max, abs, sqrt, floor and ceil (no transcendental functions: GLSL has none for it); WGSL
/// has no f64, and Vulkan needs the device's shaderFloat64.
enum class Type : uint8_t { Bool, I32, U32, I64, F16, BF16, F32, F64 };
std::string_view type_name(Type t);  ///< "f32", "u32", ...
constexpr bool is_float(Type t) { return t == Type::F32 || t == Type::F16 || t == Type::BF16 || t == Type::F64; }
constexpr bool is_int(Type t) { return t == Type::I32 || t == Type::U32 || t == Type::I64; }

/// The kernel type of a C++ element type (float, double, Half, BFloat16, int32_t, uint32_t,
/// int64_t, bool).
template <class T>
constexpr Type type_of() {
  if constexpr (std::is_same_v<T, float>)
    return Type::F32;
  else if constexpr (std::is_same_v<T, double>)
    return Type::F64;
  else if constexpr (std::is_same_v<T, Half>)
    return Type::F16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return Type::BF16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return Type::I32;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return Type::U32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return Type::I64;
  else if constexpr (std::is_same_v<T, bool>)
    return Type::Bool;
  else
    static_assert(sizeof(T) == 0, "no kernel type for this C++ type");
}

enum class Target : uint8_t { Cpp, Cuda, Glsl, Wgsl };
std::string_view target_name(Target t);  ///< "cpp", "cuda", "glsl", "wgsl"

/// What the device allows; part of a kernel's key. Traced kernels are checked against it.
struct Limits {
  uint32_t shared_bytes = 32768;      ///< workgroup shared memory per group
  uint32_t max_group_threads = 1024;  ///< invocations per group
  bool subgroups = false;             ///< false: subgroup operations run as subgroups of one lane
  uint32_t subgroup_size = 32;        ///< lanes per subgroup when `subgroups`
  std::string str() const;
};

/// A symbolic value of the kernel being traced. Literals convert implicitly (float and double
/// to F32, int to I32, unsigned to U32, int64_t to I64, bool to Bool); in a binary operation with
/// a value, a literal takes the value's type.
struct Val {
  uint32_t id = UINT32_MAX;
  Type type = Type::F32;
  uint32_t trace = 0;  ///< the trace that made it: a value is used only inside its own trace
  Val() = default;
  Val(float v);                           // NOLINT
  Val(double v);                          // NOLINT
  Val(int v);                             // NOLINT
  Val(unsigned v);                        // NOLINT
  Val(long v);                            // NOLINT
  Val(long long v);                       // NOLINT
  Val(bool v);                            // NOLINT
  static Val constant(double v, Type t);  ///< a literal of type t
  struct Raw {};
  Val(Raw, uint32_t i, Type t, uint32_t tr) : trace(tr) {
    // id and type as one 8-byte word (padding zero): GCC then builds a returned Val in
    // registers, where field by field it stores them and reloads them as one word, a load the
    // CPU cannot forward from the two stores (a stall on every traced operation).
    if constexpr (std::endian::native == std::endian::little) {
      const uint64_t word = i | uint64_t{static_cast<uint8_t>(t)} << 32;
      std::memcpy(static_cast<void*>(this), &word, sizeof word);
    } else {
      id = i;
      type = t;
    }
  }
};
static_assert(offsetof(Val, type) == 4 && sizeof(Type) == 1 && sizeof(Val) == 12);

template <class T>
concept Literal = std::is_arithmetic_v<T>;

/// A mutable local variable (a value that loops and branches update).
class Var {
 public:
  explicit Var(Type t);  ///< zero-initialised
  Var(Val init);         // NOLINT
  template <Literal T>
  Var(T v) : Var(Val(v)) {}  // NOLINT
  Var(const Var& o) : Var(Val(o)) {}
  Var& operator=(Val v);
  Var& operator=(const Var& o) { return *this = Val(o); }
  template <Literal T>
  Var& operator=(T v) {
    return *this = Val::constant(static_cast<double>(v), type_);
  }
  operator Val() const;  // NOLINT: a load
  Var& operator+=(Val v);
  Var& operator-=(Val v);
  Var& operator*=(Val v);
  Type type() const { return type_; }

 private:
  uint32_t slot_ = 0;
  Type type_;
};

/// A place in the source: the file and line of the call that made it (Loc's
/// part the language uses; the WebAssembly build's libc++ 13 has no <source_location>).
class Loc {
 public:
  static constexpr Loc current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) noexcept {
    return Loc(file, line);
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr unsigned line() const noexcept { return line_; }

 private:
  constexpr Loc(const char* file, unsigned line) noexcept : file_(file), line_(line) {}
  const char* file_ = "";
  unsigned line_ = 0;
};

/// An index into a buffer or shared array, with the place in the source that wrote it.
struct Index {
  Val v;
  Loc loc;
  template <class T>
  requires std::is_convertible_v<const T&, Val> Index(const T& i, Loc l = Loc::current())  // NOLINT
      : v(Val(i)), loc(l) {}
};

/// An element of a buffer or shared array: reading converts to a Val, assigning stores.
class Ref {
 public:
  Ref(uint32_t obj, bool shared, Index index) : obj_(obj), shared_(shared), index_(index.v), loc_(index.loc) {}
  Ref(const Ref&) = default;
  operator Val() const;  // NOLINT: a load
  const Ref& operator=(Val v) const;
  const Ref& operator=(const Ref& o) const { return *this = Val(o); }
  template <Literal T>
  const Ref& operator=(T v) const {
    return *this = Val::constant(static_cast<double>(v), value_type());
  }
  const Ref& operator+=(Val v) const;
  Type value_type() const;
  uint32_t obj() const { return obj_; }
  bool shared() const { return shared_; }
  Val index() const { return index_; }
  const Loc& loc() const { return loc_; }

 private:
  uint32_t obj_;
  bool shared_;
  Val index_;
  Loc loc_;
};

/// A global buffer parameter (typed, with its access) or a workgroup shared array.
class Memory {
 public:
  Memory(uint32_t obj, bool shared) : obj_(obj), shared_(shared) {}
  Ref operator[](Index index) const { return Ref(obj_, shared_, index); }
  /// Vector loads and stores of 2 or 4 consecutive elements starting at `index` (a multiple of
  /// the lane count).
  std::array<Val, 2> load2(Index index) const;
  std::array<Val, 4> load4(Index index) const;
  void store2(Index index, std::array<Val, 2> v) const;
  void store4(Index index, std::array<Val, 4> v) const;
  uint32_t obj() const { return obj_; }

 private:
  uint32_t obj_;
  bool shared_;
};
template <class T>
class Buffer : public Memory {
  using Memory::Memory;
};
template <class T>
class Shared : public Memory {
  using Memory::Memory;
};

enum class Access : uint8_t { Read, Write, ReadWrite };

/// Declares a kernel's parameters and layout while it is traced.
class Builder {
 public:
  template <class T>
  Buffer<T> input(std::string name) {
    return Buffer<T>(add_buffer(std::move(name), type_of<T>(), Access::Read), false);
  }
  template <class T>
  Buffer<T> output(std::string name) {
    return Buffer<T>(add_buffer(std::move(name), type_of<T>(), Access::Write), false);
  }
  template <class T>
  Buffer<T> inout(std::string name) {
    return Buffer<T>(add_buffer(std::move(name), type_of<T>(), Access::ReadWrite), false);
  }
  /// A scalar parameter (I32, U32, I64, F32 or F64).
  template <class T>
  Val scalar(std::string name) {
    return add_scalar(std::move(name), type_of<T>());
  }
  /// A workgroup shared array of `count` elements.
  template <class T>
  Shared<T> shared(std::string name, uint32_t count) {
    return Shared<T>(add_shared(std::move(name), type_of<T>(), count), true);
  }
  /// The number of threads of a group along x, y, z (a compile-time constant; default 64).
  void group_size(uint32_t x, uint32_t y = 1, uint32_t z = 1);
  /// A compile-time parameter: returns `value` and records "name=value" in the specialisation.
  int64_t param(const std::string& name, int64_t value);
  const Limits& limits() const;

 private:
  uint32_t add_buffer(std::string name, Type t, Access a);
  Val add_scalar(std::string name, Type t);
  uint32_t add_shared(std::string name, Type t, uint32_t count);
};

/// A traced, checked and optimised kernel.
class Kernel {
 public:
  Kernel() = default;
  explicit Kernel(std::shared_ptr<const ir::Kernel> k) : k_(std::move(k)) {}
  const std::string& name() const;
  const std::string& specialisation() const;
  const Limits& limits() const;
  /// (name, specialisation, target, limits): what identifies a compiled kernel.
  std::string key(Target t) const;
  std::array<uint32_t, 3> group_size() const;
  const ir::Kernel& ir() const { return *k_; }
  explicit operator bool() const { return k_ != nullptr; }

 private:
  std::shared_ptr<const ir::Kernel> k_;
};

/// Runs `fn` once with symbolic values and returns the checked, optimised kernel. Errors are
/// kiln::Error("[kernel 'name'] ... (file:line)").
Kernel trace(std::string name, const std::function<void(Builder&)>& fn, const Limits& limits = {});

/// A function kernels call (docs/kernels.md, Functions). `body` computes the result from one
/// value per parameter type (at most 5); it runs once per process, at the first call, and is
/// traced and optimised into a function of its own. A call records one operation in the calling
/// kernel, and each target's source defines the function once. The body may use arithmetic,
/// math, comparisons, select, casts, Var and other functions; memory, control flow, barriers,
/// subgroups and thread indices are errors. Names are unique in a process (the sources name the
/// function after it).
class Function {
 public:
  using Body = std::function<Val(const std::vector<Val>&)>;
  Function(std::string name, std::vector<Type> params, Body body);
  /// A function with a fast form for common arguments: where `guard` (a bool of the same
  /// arguments) holds, `fast` gives the bits `body` gives, in fewer operations. The C++ target's
  /// vector form takes the fast form when the guard holds on every lane (as the CPU kernels'
  /// fast paths do); every other form computes the body. Test both sides of the guard.
  Function(std::string name, std::vector<Type> params, Body body, Body guard, Body fast);
  /// The value of a call (in a trace): one argument of each parameter's type; a literal takes
  /// its parameter's type.
  template <class... A>
  Val operator()(const A&... args) const {
    size_t i = 0;
    return call({arg(args, i++)...});
  }
  Val call(const std::vector<Val>& args) const;
  const std::string& name() const;
  /// The traced function (traced now if it was not yet).
  const std::shared_ptr<const ir::Function>& ir() const;

 private:
  struct State;
  std::shared_ptr<State> s_;
  Type param(size_t i) const;
  std::shared_ptr<const ir::Function> trace() const;  ///< the body, with its fast form
  Val arg(const Val& v, size_t) const { return v; }
  template <Literal T>
  Val arg(const T& v, size_t i) const {
    return Val::constant(static_cast<double>(v), param(i));
  }
};

/// The kernel as source text for a target. Throws kiln::Error when the kernel uses something the
/// target cannot express (for example i64 in WGSL).
std::string render(const Kernel& k, Target t);
/// The text of the optimised IR (for tests and debugging).
std::string dump(const Kernel& k);

// ---- the language ----------------------------------------------------------------------------

Val thread_id(int axis = 0);   ///< the thread's index within its group (I32)
Val group_id(int axis = 0);    ///< the group's index within the grid (I32)
Val group_size(int axis = 0);  ///< threads per group (a constant I32)
Val num_groups(int axis = 0);  ///< groups in the grid (I32)
Val global_id(int axis = 0);   ///< group_id * group_size + thread_id
Val lane_id();                 ///< the thread's lane within its subgroup
Val subgroup_size();           ///< lanes per subgroup (a constant; 1 without subgroups)

Val operator+(Val a, Val b);
Val operator-(Val a, Val b);
Val operator*(Val a, Val b);
Val operator/(Val a, Val b);
Val operator%(Val a, Val b);
Val operator&(Val a, Val b);
Val operator|(Val a, Val b);
Val operator^(Val a, Val b);
Val operator<<(Val a, Val b);
Val operator>>(Val a, Val b);
Val operator<(Val a, Val b);
Val operator<=(Val a, Val b);
Val operator>(Val a, Val b);
Val operator>=(Val a, Val b);
Val operator==(Val a, Val b);
Val operator!=(Val a, Val b);
Val operator&&(Val a, Val b);
Val operator||(Val a, Val b);
Val operator-(Val a);
Val operator!(Val a);

#define KILN_KERNEL_LITERAL_OPS(op)                            \
  template <Literal T>                                         \
  Val operator op(Val a, T b) {                                \
    return a op Val::constant(static_cast<double>(b), a.type); \
  }                                                            \
  template <Literal T>                                         \
  Val operator op(T a, Val b) {                                \
    return Val::constant(static_cast<double>(a), b.type) op b; \
  }
KILN_KERNEL_LITERAL_OPS(+)
KILN_KERNEL_LITERAL_OPS(-)
KILN_KERNEL_LITERAL_OPS(*)
KILN_KERNEL_LITERAL_OPS(/)
KILN_KERNEL_LITERAL_OPS(%)
KILN_KERNEL_LITERAL_OPS(&)
KILN_KERNEL_LITERAL_OPS(|)
KILN_KERNEL_LITERAL_OPS(^)
KILN_KERNEL_LITERAL_OPS(<<)
KILN_KERNEL_LITERAL_OPS(>>)
KILN_KERNEL_LITERAL_OPS(<)
KILN_KERNEL_LITERAL_OPS(<=)
KILN_KERNEL_LITERAL_OPS(>)
KILN_KERNEL_LITERAL_OPS(>=)
KILN_KERNEL_LITERAL_OPS(==)
KILN_KERNEL_LITERAL_OPS(!=)
#undef KILN_KERNEL_LITERAL_OPS

Val exp(Val x);
Val log(Val x);
Val sqrt(Val x);
Val rsqrt(Val x);
Val tanh(Val x);
Val erf(Val x);
Val sigmoid(Val x);
Val abs(Val x);
Val floor(Val x);
Val ceil(Val x);
Val sin(Val x);
Val cos(Val x);
Val min(Val a, Val b);
Val max(Val a, Val b);
Val pow(Val a, Val b);
Val select(Val cond, Val if_true, Val if_false);
// min, max and pow with a literal: the literal takes the value's type, as with the operators.
#define KILN_KERNEL_LITERAL_FN(fn)                               \
  template <Literal T>                                           \
  Val fn(Val a, T b) {                                           \
    return fn(a, Val::constant(static_cast<double>(b), a.type)); \
  }                                                              \
  template <Literal T>                                           \
  Val fn(T a, Val b) {                                           \
    return fn(Val::constant(static_cast<double>(a), b.type), b); \
  }
KILN_KERNEL_LITERAL_FN(min)
KILN_KERNEL_LITERAL_FN(max)
KILN_KERNEL_LITERAL_FN(pow)
#undef KILN_KERNEL_LITERAL_FN
/// a * b + c with one rounding (f32 or f64; every target has it: on the CPU, a vector FMA where
/// the machine has one, else the C library's fma).
Val fma(Val a, Val b, Val c);
Val cast(Val x, Type t);
/// The bits of x (F32, I32 or U32) as another of those types.
Val bitcast(Val x, Type t);

/// The result of if_: attach an else block with .else_(...).
class IfChain {
 public:
  explicit IfChain(uint32_t op) : op_(op) {}
  void else_(const std::function<void()>& body, Loc loc = Loc::current());

 private:
  uint32_t op_;
};
IfChain if_(Val cond, const std::function<void()>& body, Loc loc = Loc::current());
/// for (i = begin; i < end; i += step). A loop with a compile-time count is unrolled when short.
void for_(Val begin, Val end, const std::function<void(Val)>& body, Loc loc = Loc::current());
void for_(Val begin, Val end, Val step, const std::function<void(Val)>& body, Loc loc = Loc::current());
void while_(const std::function<Val()>& cond, const std::function<void()>& body, Loc loc = Loc::current());

/// Waits until every thread of the group reaches it; memory written before is visible after.
void barrier(Loc loc = Loc::current());

/// Atomic read-modify-write of an I32 or U32 element; returns the old value.
Val atomic_add(const Ref& r, Val v, Loc loc = Loc::current());
Val atomic_min(const Ref& r, Val v, Loc loc = Loc::current());
Val atomic_max(const Ref& r, Val v, Loc loc = Loc::current());

/// Subgroup operations (over the lanes of the thread's subgroup).
Val subgroup_add(Val v);
Val subgroup_min(Val v);
Val subgroup_max(Val v);
Val subgroup_shuffle(Val v, Val lane);
Val subgroup_shuffle_xor(Val v, Val mask);

// ---- running on the CPU ----------------------------------------------------------------------

/// Groups along x, y, z (each 0 to 2^31 - 1; a launch checks).
struct Dim3 {
  int64_t x = 1, y = 1, z = 1;
  Dim3() = default;
  Dim3(int64_t x_, int64_t y_ = 1, int64_t z_ = 1) : x(x_), y(y_), z(z_) {}  // NOLINT
};

/// One launch argument: a buffer (pointer and element count) or a scalar, in declaration order.
struct Arg {
  Type type = Type::F32;
  bool is_buffer = false;
  void* ptr = nullptr;
  int64_t count = 0;
  int64_t i = 0;
  double f = 0;
  template <class T>
  Arg(T* p, int64_t n) : type(type_of<T>()), is_buffer(true), ptr(p), count(n) {}
  template <class T>
  Arg(std::vector<T>& v) : Arg(v.data(), static_cast<int64_t>(v.size())) {}  // NOLINT
  Arg(float v) : type(Type::F32), f(v) {}                                    // NOLINT
  Arg(double v) : type(Type::F64), f(v) {}                                   // NOLINT
  Arg(int32_t v) : type(Type::I32), i(v) {}                                  // NOLINT
  Arg(uint32_t v) : type(Type::U32), i(v) {}                                 // NOLINT
  Arg(int64_t v) : type(Type::I64), i(v) {}                                  // NOLINT
};

/// A kernel compiled for the CPU (C++ target, system compiler, disk cache). Groups run over
/// Kiln's threads; a group's threads run in order, its body split into phases at barriers.
class CpuKernel {
 public:
  struct Impl;
  CpuKernel() = default;
  explicit CpuKernel(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  /// Runs the kernel over `groups`. Checks the arguments against the kernel's parameters; under
  /// KILN_KERNEL_DEBUG=1 an out-of-range access raises kiln::Error naming the buffer and index.
  void operator()(Dim3 groups, std::initializer_list<Arg> args) const;
  void launch(Dim3 groups, const std::vector<Arg>& args) const;
  bool debug() const;  ///< built with bounds checks
  /// How the kernel was obtained: "compiled" (the compiler ran), "disk" or "memory".
  const std::string& origin() const;

 private:
  std::shared_ptr<const Impl> impl_;
};

/// Compiles (or finds in the memory or disk cache) the C++ rendering of `k`. `debug` -1 reads
/// KILN_KERNEL_DEBUG; 0 or 1 forces it. Throws kiln::Error with the compiler's message.
CpuKernel compile_cpu(const Kernel& k, int debug = -1);
/// The SPIR-V (Vulkan 1.2) of the GLSL rendering of `k`, compiled by glslc (or glslangValidator;
/// KILN_GLSLC names another) and cached in memory and on disk like compile_cpu. `origin`, when
/// given, receives "compiled", "disk" or "memory". `debug`: with a bounds check on every access
/// (KILN_KERNEL_DEBUG), the first access out of range recorded in one more storage buffer, bound
/// after the kernel's own, as four u32 {1, object, index, size} (objects: the buffers, then the
/// shared arrays); such an access reads element 0, and a store or atomic there is skipped.
/// Throws kiln::Error with the compiler's message.
std::vector<uint32_t> compile_spirv(const Kernel& k, std::string* origin = nullptr, bool debug = false);

/// A kernel compiled for an NVIDIA GPU: its CUDA C rendering compiled by NVRTC for the GPU's
/// architecture, loaded by the CUDA driver (both found at run time, never linked). A launch
/// takes host memory, like CpuKernel: each buffer is copied to the GPU, the kernel runs, the
/// buffers it may write are copied back, and the call returns when the GPU is done.
class CudaKernel {
 public:
  struct Impl;
  CudaKernel() = default;
  explicit CudaKernel(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  /// Runs the kernel over `groups` (y and z at most 65535). Checks the arguments like
  /// CpuKernel; a CUDA error raises kiln::Error naming the kernel and the call.
  void operator()(Dim3 groups, std::initializer_list<Arg> args) const;
  void launch(Dim3 groups, const std::vector<Arg>& args) const;
  /// The GPU's name and architecture ("NVIDIA H200, sm_90").
  std::string device() const;
  /// "compiled" (NVRTC ran), "disk" or "memory".
  const std::string& origin() const;

 private:
  std::shared_ptr<const Impl> impl_;
};

/// True when CUDA device `device` can run kernels (a driver, the device, NVRTC); otherwise
/// `why`, when given, says what is missing.
bool cuda_available(int device = 0, std::string* why = nullptr);
/// The limits of CUDA device `device` for tracing (shared memory, threads per group,
/// subgroups of 32 lanes). Throws kiln::Error when it is not available.
Limits cuda_limits(int device = 0);
/// Compiles (or finds in the memory or disk cache) the CUDA C rendering of `k` for device
/// `device`. Throws kiln::Error when no such device is available, with NVRTC's log when the
/// source does not compile, and when `k` was traced for limits the device lacks.
CudaKernel compile_cuda(const Kernel& k, int device = 0);

/// The cache folder of compiled kernels: $KILN_CACHE_DIR/kernels, else
/// $XDG_CACHE_HOME/kiln/kernels, else ~/.cache/kiln/kernels.
std::string cache_dir();

}  // namespace kiln::kernel
