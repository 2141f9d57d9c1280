// SPDX-License-Identifier: MIT OR Apache-2.0
// The part every renderer shares: naming values, walking regions into statements, and the
// expressions whose syntax the C-like targets agree on. A target overrides the hooks.
#pragma once
#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernel/ir.h"

namespace kiln::kernel::gen {

/// A piece of text as it is copied (a string, a literal or one character). A char array is a
/// string literal: its text is all of it but the terminating zero, and its size is part of its type,
/// so that its copy is a few moves rather than a call. Anything else becomes a view once (one
/// strlen for a `const char*`).
template <size_t N>
struct Lit {
  const char* s;
};
template <size_t N>
Lit<N - 1> as_piece(const char (&s)[N]) {
  return {s};
}
inline char as_piece(const char& c) { return c; }
inline std::string_view as_piece(std::string_view s) { return s; }

inline size_t piece_size(std::string_view s) { return s.size(); }
inline size_t piece_size(char) { return 1; }
template <size_t N>
size_t piece_size(Lit<N>) {
  return N;
}
/// Writes a piece at `at`, which has room for it, and returns the end.
inline char* put(char* at, std::string_view s) {
  if (!s.empty()) std::memcpy(at, s.data(), s.size());
  return at + s.size();
}
inline char* put(char* at, char c) {
  *at = c;
  return at + 1;
}
template <size_t N>
char* put(char* at, Lit<N> s) {
  std::memcpy(at, s.s, N);
  return at + N;
}
/// The pieces' total size, summed in registers (an array of views read back right after being
/// written stalls the loads on the stores), and the pieces written one after another at the
/// place `where(size)` gives.
template <class Where, class... P>
char* join(const Where& where, size_t& n, P... p) {
  n = (size_t{0} + ... + piece_size(p));
  char* const start = where(n);
  char* at = start;
  ((at = put(at, p)), ...);
  return start;
}

/// A source being written: appending copies the characters once (std::string::resize would
/// zero-fill them first).
class Out {
 public:
  /// n characters at the end, to be written by the caller.
  char* extend(size_t n) {
    if (cap_ - size_ < n) grow(n);
    char* p = buf_.get() + size_;
    size_ += n;
    return p;
  }
  void reserve(size_t n) {
    if (n > cap_) grow(n - size_);
  }
  void clear() { size_ = 0; }
  Out& operator+=(std::string_view s) {
    if (!s.empty()) std::memcpy(extend(s.size()), s.data(), s.size());
    return *this;
  }
  Out& operator=(std::string_view s) {
    clear();
    return *this += s;
  }
  operator std::string() const { return std::string(buf_.get(), size_); }

 private:
  std::unique_ptr<char[]> buf_;
  size_t size_ = 0, cap_ = 0;
  void grow(size_t n) {
    const size_t cap = std::max(cap_ * 2, size_ + n + 4096);
    std::unique_ptr<char[]> b(new char[cap]);
    if (size_) std::memcpy(b.get(), buf_.get(), size_);
    buf_ = std::move(b);
    cap_ = cap;
  }
};

/// Appends the pieces to `out` (one size check for them all).
template <class... P>
void append(Out& out, const P&... p) {
  size_t n;
  join([&](size_t size) { return out.extend(size); }, n, as_piece(p)...);
}

/// Where rendered text lives: a thread's chunks of characters, reused from the start once the
/// outermost renderer of the thread ends (Base counts them). Rendering builds an expression's
/// text from its operands' texts; keeping them here costs a pointer bump, not an allocation.
class TextArena {
 public:
  /// n characters that stay put until the arena is reset.
  static char* alloc(size_t n) {
    Cursor& c = cursor;
    if (static_cast<size_t>(c.end - c.at) < n) return grow(n);
    char* p = c.at;
    c.at += n;
    return p;
  }
  /// Counts a renderer in and out; the last one out resets the arena.
  static void enter();
  static void leave();

 private:
  struct Cursor {
    char *at = nullptr, *end = nullptr;  ///< the free part of the chunk being filled
  };
  static thread_local Cursor cursor;
  /// alloc() where the chunk being filled has no room: the next chunk that does.
  static char* grow(size_t n);
};

/// Rendered text: a view of characters that stay put while a renderer runs (the arena, a
/// literal, or a string that outlives the renderer). Built from a std::string, it copies it
/// into the arena.
struct Text : std::string_view {
  Text() = default;
  Text(const char* s) : std::string_view(s) {}
  explicit Text(std::string_view v) : std::string_view(v) {}
  Text(const std::string& s) : std::string_view(copy(s)) {}
  /// v's characters copied into the arena.
  static std::string_view copy(std::string_view v) {
    char* p = TextArena::alloc(v.size());
    if (!v.empty()) std::memcpy(p, v.data(), v.size());
    return {p, v.size()};
  }
};

/// The pieces joined, in the arena.
template <class... P>
Text cat(const P&... p) {
  size_t n;
  char* at = join([](size_t size) { return TextArena::alloc(size); }, n, as_piece(p)...);
  return Text(std::string_view(at, n));
}
inline Text operator+(const Text& a, const Text& b) { return cat(a, b); }
inline Text& operator+=(Text& a, const Text& b) { return a = cat(a, b); }
/// Appends the pieces to a text (a new text in the arena).
template <class... P>
void append(Text& t, const P&... p) {
  t = cat(t, p...);
}
/// The decimal text of an integer, in the arena.
Text num(int64_t v);

/// "kk_" and s with every character that cannot be in a C identifier as '_'.
inline std::string identifier(const std::string& s) {
  std::string r = "kk_";
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return r;
}

/// Whether p(op) holds for an op of k's regions, or q(uses) for a function it calls (the
/// function's ir::Function::Uses, which sums its body once).
template <class P, class Q>
bool any_op(const ir::Kernel& k, const P& p, const Q& q) {
  for (const ir::Region& r : k.regions)
    for (uint32_t id : r.ops)
      if (p(k.ops[id])) return true;
  for (const auto& f : k.functions)
    if (q(f->uses)) return true;
  return false;
}

class Base {
 public:
  Base(const ir::Kernel& k, Target t);
  virtual ~Base() { TextArena::leave(); }
  Base(const Base&) = delete;
  Base& operator=(const Base&) = delete;
  /// The whole source text.
  virtual std::string text() = 0;

 protected:
  const ir::Kernel& k;
  Target target;
  Out out;
  int depth = 1;
  std::vector<bool> atomic_buf, atomic_shared;  ///< memory used by an atomic
  std::vector<Text> literals;                   ///< op id -> lit() of a constant, once rendered
  std::vector<Text> name_text;                  ///< op id -> name() (v and a compact number), once named
  uint32_t next_name = 0;
  bool in_function_ = false;  ///< rendering a Function's body (function())

  [[noreturn]] void unsupported(const std::string& what) const;
  /// Appends one line at the current depth: the pieces, then a newline.
  template <class... P>
  void line(const P&... p) {
    static constexpr char kSpaces[] = "                                                                ";
    const size_t indent = static_cast<size_t>(depth) * 2;
    if (indent < sizeof kSpaces)
      append(out, std::string_view(kSpaces, indent), p..., '\n');
    else
      append(out, std::string(indent, ' '), p..., '\n');
  }
  Text name(uint32_t id);
  /// Const, Scalar, Builtin: written where used.
  bool inlined(uint32_t id) const {
    const ir::Kind kd = k.ops[id].kind;
    return kd == ir::Kind::Const || kd == ir::Kind::Scalar || kd == ir::Kind::Builtin;
  }

  /// How a statement refers to a value.
  virtual Text ref(uint32_t id);
  virtual Text ty(Type t, int lanes = 1) = 0;
  virtual Text lit(const ir::Op& op) = 0;
  virtual Text builtin(const ir::Op& op) = 0;
  virtual Text scalar(uint32_t obj) { return cat("p", num(obj)); }
  /// The math function f of x, a value of type t (F32, or F64 for abs, sqrt, rsqrt, floor, ceil).
  virtual Text math(ir::UnaryFn f, Type t, Text x) = 0;
  virtual Text binary_fn(ir::BinaryFn f, Type t, Text a, Text b) = 0;
  /// A comparison a (cmp) b of values of type t (`same`: both operands are one value).
  virtual Text compare(ir::CmpFn f, Type t, Text a, Text b, bool same) {
    return cat("(", a, " ", ir::cmp_name(f), " ", b, ")");
  }
  virtual Text select(Text c, Text a, Text b) { return cat("(", c, " ? ", a, " : ", b, ")"); }
  /// a * b + c rounded once, of type t (F32 or F64).
  virtual Text fma(Type, Text a, Text b, Text c) { return cat("fma(", a, ", ", b, ", ", c, ")"); }
  virtual Text cast(Type to, Type from, Text x) { return cat(ty(to), "(", x, ")"); }
  /// The bits of x (F32, I32, U32) as type `to`.
  virtual Text bitcast(Type to, Type from, Text x) = 0;
  /// Integer a / b (or a % b).
  virtual Text int_divide(bool mod, Text a, Text b) { return cat("(", a, (mod ? " % " : " / "), b, ")"); }
  virtual Text shift_amount(Text b, Type) { return b; }
  virtual Text extract(Text v, int lane) { return cat(v, ".", "xyzw"[lane]); }
  virtual Text load(const ir::Op& op, Text idx) = 0;
  virtual Text load_vec(const ir::Op& op, Text idx) = 0;
  virtual void store(const ir::Op& op, Text idx, const std::vector<Text>& vals) = 0;
  virtual Text atomic(const ir::Op& op, Text idx, Text v) = 0;
  virtual Text subgroup(const ir::Op& op, Text v, Text other) = 0;
  virtual void barrier() = 0;
  virtual void define(uint32_t id, Text e);
  virtual Text local(uint32_t slot) { return cat("l", num(slot)); }
  virtual void open_for(uint32_t id, Text b, Text e, Text s);
  virtual void open_loop() { line("for (;;) {"); }

  // ---- functions (kiln::kernel::Function) ----
  /// The name of f in the generated sources.
  static Text function_name(const ir::Function& f);
  /// f's definition in this target (a renderer of this target over f.body calls function()).
  virtual std::string render_function(const ir::Function& f) = 0;
  /// The first line of f's definition, through the opening brace.
  virtual Text function_head(const ir::Function& f) = 0;
  virtual void declare_local(uint32_t slot, Type t) { line(ty(t), " l", num(slot), ";"); }
  /// The definition of f, whose body is this renderer's kernel.
  std::string function(const ir::Function& f);
  /// Appends the definitions of the functions the kernel calls (those k.functions[i] with
  /// (*roots)[i], when given), callees first, each rendered once per process and target:
  /// render(f) into ir::Function::text[slot].
  void functions(int slot, const std::function<std::string(const ir::Function&)>& render,
                 const std::vector<bool>* roots = nullptr);
  /// The same definitions, in that order, without appending them.
  std::vector<const std::string*> function_texts(int slot,
                                                 const std::function<std::string(const ir::Function&)>& render,
                                                 const std::vector<bool>* roots = nullptr);
  void functions() {
    functions(static_cast<int>(target), [this](const ir::Function& f) { return render_function(f); });
  }
  /// A call's argument list "(a, b)".
  Text call_args(const ir::Op& op);

  /// The expression of a pure op or a load.
  Text expr(uint32_t id);
  /// Renders one op as statements (control flow recursing into its regions).
  virtual void statement(uint32_t id);
  void region(uint32_t r);
  /// The C-style literal of a bool, i32, u32 or i64 constant (i64 with the suffix `i64`), "" for
  /// other types.
  static Text int_lit(const ir::Op& op, Text i64);
  /// The literal of a float (finite), shortest round-trip form with a '.' or exponent.
  static Text float_text(double f);
  /// The same for a double (finite): 17 significant digits where fewer do not round-trip.
  static Text double_text(double f);
};

}  // namespace kiln::kernel::gen
namespace kiln::kernel::detail {
/// Writes a rendered source into $KILN_KERNEL_DUMP (when set).
void dump_rendered(const ir::Kernel& k, Target t, const std::string& text);
/// Forgets the kernels compile_cpu loaded in this process (they stay mapped): the next call
/// looks in the disk cache. For tests.
void forget_loaded_kernels();
/// Starts the in-process GLSL compiler's one-time setup in a background thread (a no-op where
/// SPIR-V is compiled by a tool), so a device's first kernel does not pay it.
void warm_spirv_compiler();
/// Waits until that setup has ended (tests that fork: a sanitizer's allocator is not fork-safe).
void join_spirv_warm_up();
/// Whether compile_spirv compiles in this process (shaderc linked, KILN_GLSLC unset, not a
/// forked child).
bool spirv_in_process();
/// The SPIR-V bytes of a GLSL compute shader from the in-process compiler; kiln::Error (prefix,
/// then the compiler's message) when it does not compile or there is no such compiler.
std::string glsl_to_spirv(const std::string& glsl, const std::string& prefix);
}  // namespace kiln::kernel::detail
namespace kiln::kernel::gen {

std::string render_cpp(const ir::Kernel& k, bool debug);
std::string render_cuda(const ir::Kernel& k);
/// debug: every buffer and shared access checked (KILN_KERNEL_DEBUG), the first out of range
/// recorded in one more buffer (binding: the buffer count) as {1, object, index, size}.
std::string render_glsl(const ir::Kernel& k, bool debug = false);
std::string render_wgsl(const ir::Kernel& k);

/// Element size in bytes of a storage type.
inline int type_bytes(Type t) {
  return t == Type::I64 || t == Type::F64 ? 8 : (t == Type::F16 || t == Type::BF16) ? 2 : t == Type::Bool ? 1 : 4;
}

}  // namespace kiln::kernel::gen
