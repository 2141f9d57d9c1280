// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kernel/render.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "core/charconv.h"

namespace kiln::kernel {
namespace gen {

using ir::Kind;
using ir::kNone;

Base::Base(const ir::Kernel& kk, Target t) : k(kk), target(t), literals(kk.ops.size()), name_text(kk.ops.size()) {
  TextArena::enter();
  atomic_buf.assign(k.buffers.size(), false);
  atomic_shared.assign(k.shared.size(), false);
  for (const ir::Region& r : k.regions)
    for (uint32_t id : r.ops)
      if (k.ops[id].kind == Kind::Atomic) (k.ops[id].shared ? atomic_shared : atomic_buf)[k.ops[id].obj] = true;
}

void Base::unsupported(const std::string& what) const {
  throw Error(k.prefix() + "the " + std::string(target_name(target)) + " target does not support " + what);
}

Text Base::name(uint32_t id) {
  if (name_text[id].empty()) name_text[id] = cat('v', num(next_name++));
  return name_text[id];
}

namespace {
/// One thread's arena: chunks of at least 64 KiB, filled in order.
struct Arena {
  std::vector<std::unique_ptr<char[]>> chunks;
  std::vector<size_t> sizes;
  size_t chunk = 0;  ///< the chunk being filled
  int users = 0;
};
thread_local Arena arena;
}  // namespace

thread_local TextArena::Cursor TextArena::cursor;

char* TextArena::grow(size_t n) {
  Arena& a = arena;
  Cursor& c = cursor;
  // The next chunk that holds n characters (a new one at the end where none does).
  size_t i = c.at ? a.chunk + 1 : 0;
  while (i < a.chunks.size() && a.sizes[i] < n) ++i;
  if (i == a.chunks.size()) {
    a.sizes.push_back(std::max<size_t>(size_t{1} << 16, n));
    a.chunks.emplace_back(new char[a.sizes.back()]);
  }
  a.chunk = i;
  c.at = a.chunks[i].get() + n;
  c.end = a.chunks[i].get() + a.sizes[i];
  return a.chunks[i].get();
}

void TextArena::enter() { ++arena.users; }

void TextArena::leave() {
  Arena& a = arena;
  if (--a.users > 0) return;
  a.chunk = 0;
  cursor = Cursor{};
  if (a.chunks.size() > 4) {  // a very large kernel: keep what a usual one needs
    a.chunks.resize(4);
    a.sizes.resize(4);
  }
}

Text num(int64_t v) {
  // 0 to 999 (names of values and locals, sizes, small constants) from a table: no conversion,
  // nothing copied.
  static constexpr auto kSmall = [] {
    std::array<std::array<char, 3>, 1000> t{};
    for (int i = 0; i < 1000; ++i) t[i] = {char('0' + i / 100), char('0' + i / 10 % 10), char('0' + i % 10)};
    return t;
  }();
  if (v >= 0 && v < 1000) {
    const size_t n = v < 10 ? 1 : v < 100 ? 2 : 3;
    return Text(std::string_view(kSmall[static_cast<size_t>(v)].data() + 3 - n, n));
  }
  char b[24];
  const auto r = std::to_chars(b, b + sizeof b, v);
  return Text(Text::copy(std::string_view(b, static_cast<size_t>(r.ptr - b))));
}

Text Base::ref(uint32_t id) {
  const ir::Op& op = k.ops[id];
  if (op.kind == Kind::Const) {
    if (literals[id].empty()) literals[id] = lit(op);
    return literals[id];
  }
  if (op.kind == Kind::Scalar) return in_function_ ? cat("p", num(op.obj)) : scalar(op.obj);
  if (op.kind == Kind::Builtin) return builtin(op);
  return name(id);
}

Text Base::int_lit(const ir::Op& op, Text i64) {
  switch (op.type) {
    case Type::Bool:
      return op.i ? "true" : "false";
    case Type::I32:
      return op.i == INT32_MIN ? "(-2147483647 - 1)" : num(op.i);
    case Type::U32:
      return cat(num(static_cast<uint32_t>(op.i)), "u");  // -1 is 4294967295u
    case Type::I64:
      return op.i == INT64_MIN ? "(-9223372036854775807" + i64 + " - 1" + i64 + ")" : num(op.i) + i64;
    default:
      return "";
  }
}

/// The text of an integer value below 10^6 in magnitude ("3.0"), what the %g loops below give
/// for it; "" for other values (and -0).
static std::string integral_text(double f) {
  if (f != std::trunc(f) || std::fabs(f) >= 1e6 || (f == 0 && std::signbit(f))) return "";
  return std::to_string(static_cast<int64_t>(f)) + ".0";
}

/// printf's "%.*g" of f into b (48 bytes), returning its end; read_text: the double a text reads
/// as. std::to_chars and std::from_chars give the same text and value where the library has
/// them for floats, several times faster than snprintf and strtod.
static char* general_text(char* b, double f, int prec) {
#if KILN_FLOAT_CHARCONV
  return std::to_chars(b, b + 48, f, std::chars_format::general, prec).ptr;
#else
  return b + std::snprintf(b, 48, "%.*g", prec, f);
#endif
}
static double read_text(const char* b, const char* e) {
#if KILN_FLOAT_CHARCONV
  double v = 0;
  std::from_chars(b, e, v, std::chars_format::general);
  return v;
#else
  (void)e;
  return std::strtod(b, nullptr);
#endif
}

/// The first text of f with 6 to 9 (float) or 15 to 17 (double) significant digits that reads
/// back as f, with a '.' or exponent.
static std::string shortest_text(double f, bool dbl) {
  if (std::string s = integral_text(f); !s.empty()) return s;
  char b[48];
  char* e = b;
  for (int prec = dbl ? 15 : 6; prec <= (dbl ? 17 : 9); ++prec) {
    e = general_text(b, f, prec);
    const double back = read_text(b, e);
    if (dbl ? back == f : static_cast<float>(back) == static_cast<float>(f)) break;
  }
  std::string s(b, e);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

Text Base::float_text(double f) { return shortest_text(f, false); }

Text Base::double_text(double f) { return shortest_text(f, true); }

void Base::define(uint32_t id, Text e) {
  const ir::Op& op = k.ops[id];
  line("const ", ty(op.type, op.lanes), " ", name(id), " = ", e, ";");
}

void Base::open_for(uint32_t id, Text b, Text e, Text s) {
  Text iv = name(id);
  line("for (", ty(k.ops[id].type), " ", iv, " = ", b, "; ", iv, " < ", e, "; ", iv, " += ", s, ") {");
}

Text Base::expr(uint32_t id) {
  const ir::Op& op = k.ops[id];
  auto in = [&](int i) { return ref(op.in[static_cast<size_t>(i)]); };
  switch (op.kind) {
    case Kind::Unary: {
      auto f = static_cast<ir::UnaryFn>(op.attr);
      if (f == ir::UnaryFn::Neg) return cat("(-", in(0), ")");
      if (f == ir::UnaryFn::Not) return cat(op.type == Type::Bool ? "(!" : "(~", in(0), ")");
      if (f == ir::UnaryFn::Abs && !is_float(op.type))
        return binary_fn(ir::BinaryFn::Max, op.type, in(0), "(-" + in(0) + ")");
      return math(f, op.type, in(0));
    }
    case Kind::Binary: {
      auto f = static_cast<ir::BinaryFn>(op.attr);
      if (f == ir::BinaryFn::Min || f == ir::BinaryFn::Max || f == ir::BinaryFn::Pow)
        return binary_fn(f, op.type, in(0), in(1));
      if (op.type == Type::Bool) {
        const char* o = f == ir::BinaryFn::And ? " && " : f == ir::BinaryFn::Or ? " || " : " != ";
        return cat("(", in(0), o, in(1), ")");
      }
      if ((f == ir::BinaryFn::Div || f == ir::BinaryFn::Mod) && !is_float(op.type))
        return int_divide(f == ir::BinaryFn::Mod, in(0), in(1));
      if (f == ir::BinaryFn::Shl || f == ir::BinaryFn::Shr)
        return cat("(", in(0), " ", ir::binary_name(f), " ", shift_amount(in(1), op.type), ")");
      return cat("(", in(0), " ", ir::binary_name(f), " ", in(1), ")");
    }
    case Kind::Compare:
      return compare(static_cast<ir::CmpFn>(op.attr), k.ops[op.in[0]].type, in(0), in(1), op.in[0] == op.in[1]);
    case Kind::Select:
      return select(in(0), in(1), in(2));
    case Kind::Fma:
      return fma(op.type, in(0), in(1), in(2));
    case Kind::Cast:
      if (op.attr) return bitcast(op.type, k.ops[op.in[0]].type, in(0));
      return cast(op.type, k.ops[op.in[0]].type, in(0));
    case Kind::Extract:
      return extract(in(0), op.axis);
    case Kind::Load:
      return load(op, in(0));
    case Kind::LoadVec:
      return load_vec(op, in(0));
    case Kind::LocalLoad:
      return local(op.obj);
    case Kind::Call:
      return cat(function_name(*k.functions[op.obj]), call_args(op));
    default:
      return "?";
  }
}

void Base::statement(uint32_t id) {
  const ir::Op& op = k.ops[id];
  auto in = [&](int i) { return ref(op.in[static_cast<size_t>(i)]); };
  switch (op.kind) {
    case Kind::Const:
    case Kind::Scalar:
    case Kind::Builtin:
      return;
    case Kind::Store:
      store(op, in(0), {in(1)});
      return;
    case Kind::StoreVec: {
      std::vector<Text> v;
      for (int l = 0; l < op.lanes; ++l) v.push_back(in(1 + l));
      store(op, in(0), v);
      return;
    }
    case Kind::Atomic:
      define(id, atomic(op, in(0), in(1)));
      return;
    case Kind::Subgroup:
      define(id, subgroup(op, in(0), op.nin > 1 ? in(1) : ""));
      return;
    case Kind::LocalStore:
      line(local(op.obj), " = ", in(0), ";");
      return;
    case Kind::Barrier:
      barrier();
      return;
    case Kind::If:
      line("if (", in(0), ") {");
      ++depth;
      region(op.region[0]);
      --depth;
      if (op.region[1] != kNone && !k.regions[op.region[1]].ops.empty()) {
        line("} else {");
        ++depth;
        region(op.region[1]);
        --depth;
      }
      line("}");
      return;
    case Kind::For:
      open_for(id, in(0), in(1), in(2));
      ++depth;
      region(op.region[0]);
      --depth;
      line("}");
      return;
    case Kind::While:
      open_loop();
      ++depth;
      region(op.region[0]);
      region(op.region[1]);
      --depth;
      line("}");
      return;
    case Kind::Yield:
      if (in_function_)
        line("return ", in(0), ";");
      else
        line("if (!", in(0), ") { break; }");
      return;
    default:
      define(id, expr(id));
  }
}

Text Base::function_name(const ir::Function& f) { return identifier("f_" + f.name); }

Text Base::call_args(const ir::Op& op) {
  Text r = "(";
  for (uint8_t i = 0; i < op.nin; ++i) append(r, i ? ", " : "", ref(op.in[i]));
  return r + ")";
}

std::string Base::function(const ir::Function& f) {
  in_function_ = true;
  out.clear();
  depth = 0;
  line(function_head(f));
  depth = 1;
  for (size_t i = 0; i < k.locals.size(); ++i) declare_local(static_cast<uint32_t>(i), k.locals[i]);
  region(0);
  out += "}\n";
  return out;
}

std::vector<const std::string*> Base::function_texts(int slot,
                                                     const std::function<std::string(const ir::Function&)>& render,
                                                     const std::vector<bool>* roots) {
  std::vector<const std::string*> texts;
  std::vector<const ir::Function*> done;
  // f's callees, then f (the C++ vector form, slot 4, takes a fast form first: guard and fast).
  auto define = [&](const ir::Function* f, auto& visit) -> void {
    visit(f->body, visit);
    if (slot == 4 && f->fast)
      for (const ir::Function* g : {f->guard.get(), f->fast.get()}) {
        visit(g->body, visit);
        std::lock_guard<std::mutex> lock(g->text_mu);
        if (g->text[slot].empty()) g->text[slot] = render(*g);
        texts.push_back(&g->text[slot]);
      }
    done.push_back(f);
    std::lock_guard<std::mutex> lock(f->text_mu);
    std::string& text = f->text[slot];
    if (text.empty()) text = render(*f);
    texts.push_back(&text);  // set once, never changed: valid while k holds f
  };
  auto visit = [&](const ir::Kernel& kk, auto& self) -> void {
    for (size_t i = 0; i < kk.functions.size(); ++i) {
      const ir::Function* f = kk.functions[i].get();
      if ((&kk == &k && roots && !(*roots)[i]) || std::find(done.begin(), done.end(), f) != done.end()) continue;
      for (const ir::Function* d : done)
        if (d->name == f->name) throw Error(k.prefix() + "calls two different functions named '" + f->name + "'");
      define(f, self);
    }
  };
  visit(k, visit);
  return texts;
}

void Base::functions(int slot, const std::function<std::string(const ir::Function&)>& render,
                     const std::vector<bool>* roots) {
  for (const std::string* t : function_texts(slot, render, roots)) out += *t;
}

void Base::region(uint32_t r) {
  if (r == kNone) return;
  for (uint32_t id : k.regions[r].ops) statement(id);
}

}  // namespace gen

std::string render(const Kernel& kernel, Target t) {
  if (!kernel) throw Error("[kernel] render: an empty Kernel");
  const ir::Kernel& k = kernel.ir();
  std::string text;
  switch (t) {
    case Target::Cpp:
      text = gen::render_cpp(k, false);
      break;
    case Target::Cuda:
      text = gen::render_cuda(k);
      break;
    case Target::Glsl:
      text = gen::render_glsl(k);
      break;
    case Target::Wgsl:
      text = gen::render_wgsl(k);
      break;
    default:
      throw Error(k.prefix() + "unknown target");
  }
  detail::dump_rendered(k, t, text);
  return text;
}

}  // namespace kiln::kernel
