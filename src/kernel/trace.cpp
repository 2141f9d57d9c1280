// SPDX-License-Identifier: MIT OR Apache-2.0
// Tracing: the kernel function runs once with symbolic values, and every operation on them
// appends an op to the current region of the kernel being traced (one per thread at a time).
// Type rules, access rules and the detectable shared-memory races are checked here, as the
// operations happen, so an error names the statement; the rest is checked in validate().
#include <atomic>
#include <map>

#include "kernel/function.h"
#include "kernel/ir.h"
#include "kernel/library.h"
#include "kernel/value_table.h"
#include "kiln/half.h"

namespace kiln::kernel {
namespace {

using ir::Kind;
using ir::kNone;

struct Write {
  uint32_t index;   ///< value id of the index
  uint32_t region;  ///< the region the write happened in
  bool divergent;   ///< inside control flow that depends on the thread
  uint32_t loc;
};

struct Tracer {
  ir::Kernel k;
  std::vector<uint32_t> stack{0};      ///< open regions, innermost last
  std::vector<bool> stack_div{false};  ///< is each open region inside thread-dependent control
  std::vector<bool> tdep;              ///< per op: may the value differ between the threads of a group
  std::vector<bool> local_tdep;
  /// Constants, parameters and builtins, in order: they lead region 0 when tracing ends (kept
  /// apart until then, as inserting each at the front would move the whole body).
  std::vector<uint32_t> lead;
  /// Hoisted ops by their key (see hoisted()).
  struct InternKey {
    uint64_t head, i, f;
    bool operator==(const InternKey&) const = default;
  };
  /// Open addressing over a power-of-two table (linear probing, grown at half full): a kernel
  /// asks for a constant per use, so this lookup is on the tracing's hot path.
  struct InternTable {
    struct Slot {
      InternKey key;
      uint32_t id = kNone;
    };
    std::vector<Slot> slots = std::vector<Slot>(64);
    size_t used = 0;

    static size_t hash(const InternKey& x) {
      uint64_t h = x.head * 0x9e3779b97f4a7c15ull ^ x.i * 0xc2b2ae3d27d4eb4full ^ x.f * 0x165667b19e3779f9ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
    /// The slot of key: its entry, or the empty slot where it belongs.
    Slot& find(const InternKey& key) {
      const size_t mask = slots.size() - 1;
      for (size_t i = hash(key) & mask;; i = (i + 1) & mask)
        if (slots[i].id == kNone || slots[i].key == key) return slots[i];
    }
    void add(Slot& s, const InternKey& key, uint32_t id) {
      s.key = key;
      s.id = id;
      if (++used * 2 <= slots.size()) return;
      std::vector<Slot> old(slots.size() * 2);
      old.swap(slots);
      for (const Slot& o : old)
        if (o.id != kNone) find(o.key) = o;
    }
  };
  InternTable interned;
  /// The pure values recorded in the open regions (an equal op is not recorded again).
  ir::ValueTable values{k};
  std::map<std::pair<bool, uint32_t>, std::vector<Write>> writes;  ///< since the last barrier
  uint32_t last_loc = kNone;
  bool group_set = false;
  bool function = false;            ///< tracing a Function's body
  uint32_t serial = next_serial();  ///< tells this trace's values from those of others

  static uint32_t next_serial() {
    static std::atomic<uint32_t> n{0};
    return ++n;
  }
};

thread_local Tracer* g_tracer = nullptr;

[[noreturn, gnu::cold]] void no_tracer() {
  throw Error("[kernel] kernel values are used outside kiln::kernel::trace()");
}

inline Tracer& tr() {
  Tracer* t = g_tracer;
  if (!t) [[unlikely]]
    no_tracer();
  return *t;
}

[[noreturn]] void fail(const std::string& what, uint32_t loc = kNone) {
  Tracer& t = tr();
  uint32_t l = loc != kNone ? loc : t.last_loc;
  std::string where = l == kNone ? "" : (loc != kNone ? t.k.where(l) : " (after " + t.k.loc_text(l) + ")");
  throw Error(t.k.prefix() + what + where);
}

uint32_t record(const Loc& loc) {
  Tracer& t = tr();
  t.k.locs.push_back(loc);
  t.last_loc = static_cast<uint32_t>(t.k.locs.size() - 1);
  return t.last_loc;
}

bool region_divergent() { return tr().stack_div.back(); }

/// Fails when a Function's body is being traced: `what` is not available there.
void no_function(const char* what) {
  if (tr().function)
    fail(std::string(what) + " cannot be used in a function (a function computes a value from its arguments)");
}

Val hoisted(const ir::Op& op, bool dep);

/// Records op in the open region; a pure op is folded first (ir::fold_op), and one equal to an
/// earlier value of the open regions is that value: then nothing is recorded.
uint32_t emit(const ir::Op& op, bool dep) {
  Tracer& t = tr();
  uint32_t id = static_cast<uint32_t>(t.k.ops.size());
  if (op.nin > 0 && op.pure()) {
    ir::Op folded;
    const uint32_t r = ir::fold_op(t.k, op, folded);
    if (r == ir::kFolded) return hoisted(folded, false).id;
    if (r != kNone) return r;
    if (const uint32_t same = t.values.find_or_add(op, id); same != kNone) return same;
  }
  t.k.ops.push_back(op);
  t.tdep.push_back(dep);
  t.k.regions[t.stack.back()].ops.push_back(id);
  return id;
}

/// Constants, parameters and builtins: interned, and placed at the top of the kernel so that
/// every region may use them.
Val hoisted(const ir::Op& op, bool dep) {
  Tracer& t = tr();
  uint64_t fbits = 0;
  static_assert(sizeof(double) == sizeof(uint64_t));
  __builtin_memcpy(&fbits, &op.f, sizeof fbits);
  const Tracer::InternKey key{(uint64_t{static_cast<uint8_t>(op.kind)} << 24) | (uint64_t{op.axis} << 16) |
                                  (uint64_t{static_cast<uint8_t>(op.type)} << 8) | op.attr,
                              static_cast<uint64_t>(op.i) + (op.obj == kNone ? 0 : (uint64_t{op.obj} << 40)), fbits};
  Tracer::InternTable::Slot& slot = t.interned.find(key);
  if (slot.id != kNone) return Val(Val::Raw{}, slot.id, op.type, t.serial);
  uint32_t id = static_cast<uint32_t>(t.k.ops.size());
  t.k.ops.push_back(op);
  t.tdep.push_back(dep);
  t.lead.push_back(id);
  t.interned.add(slot, key, id);
  return Val(Val::Raw{}, id, op.type, t.serial);
}

Val value(uint32_t id) { return Val(Val::Raw{}, id, tr().k.ops[id].type, tr().serial); }

// f16 and bf16 values: the IR holds them as f32 values rounded to the type (each operation on
// them is its f32 form followed by a RoundF16 / RoundBF16), and the Val carries the type.
bool half(Type t) { return t == Type::F16 || t == Type::BF16; }
/// The f32 value `id` (exactly representable in t) as a value of type t.
Val tagged(uint32_t id, Type t) { return Val(Val::Raw{}, id, t, tr().serial); }
/// An f16/bf16 value as the f32 value it is.
Val widen(Val x) { return half(x.type) ? tagged(x.id, Type::F32) : x; }
/// The f32 value x rounded to t (nearest, ties to even), as a value of type t.
Val round_to(Val x, Type t) {
  ir::Op op;
  op.kind = Kind::Unary;
  op.attr = static_cast<uint8_t>(t == Type::F16 ? ir::UnaryFn::RoundF16 : ir::UnaryFn::RoundBF16);
  op.type = Type::F32;
  op.nin = 1;
  op.in[0] = x.id;
  return tagged(emit(op, tr().tdep[x.id]), t);
}
/// f applied to an f16/bf16 value through f32, the result rounded back (or f(x) for others).
Val through_f32(Val x, Val (*f)(Val)) { return half(x.type) ? round_to(f(widen(x)), x.type) : f(x); }

void check_value(const Val& v, const char* what) {
  if (v.id == UINT32_MAX) fail(std::string("an undefined value used in ") + what);
  if (v.trace != tr().serial || v.id >= tr().k.ops.size())
    fail(std::string("a value of another trace used in ") + what +
         " (a value lives only inside the trace that made it)");
}

Val builtin(ir::Builtin b, int axis) {
  no_function("a thread or group index");
  if (axis < 0 || axis > 2) fail("axis " + std::to_string(axis) + " is not 0, 1 or 2");
  ir::Op op;
  op.kind = Kind::Builtin;
  op.attr = static_cast<uint8_t>(b);
  op.axis = static_cast<uint8_t>(axis);
  op.type = Type::I32;
  return hoisted(op, b == ir::Builtin::ThreadId || b == ir::Builtin::LaneId);
}

Val unary(ir::UnaryFn f, Val x) {
  check_value(x, ir::unary_name(f));
  using U = ir::UnaryFn;
  if (half(x.type) && f != U::Not) {  // neg, abs, floor and ceil are exact in the type
    Val r = unary(f, widen(x));
    return f == U::Neg || f == U::Abs || f == U::Floor || f == U::Ceil ? tagged(r.id, x.type) : round_to(r, x.type);
  }
  const bool f64_ok = f == U::Sqrt || f == U::Rsqrt || f == U::Floor || f == U::Ceil;
  bool ok = f == U::Not                  ? (x.type == Type::Bool || is_int(x.type))
            : f == U::Neg || f == U::Abs ? x.type != Type::Bool && x.type != Type::U32
                                         : x.type == Type::F32 || (x.type == Type::F64 && f64_ok);
  if (!ok) fail(std::string("'") + ir::unary_name(f) + "' does not take " + std::string(type_name(x.type)));
  ir::Op op;
  op.kind = Kind::Unary;
  op.attr = static_cast<uint8_t>(f);
  op.type = x.type;
  op.nin = 1;
  op.in[0] = x.id;
  return value(emit(op, tr().tdep[x.id]));
}

Val binary(ir::BinaryFn f, Val a, Val b) {
  check_value(a, ir::binary_name(f));
  check_value(b, ir::binary_name(f));
  using B = ir::BinaryFn;
  if (a.type != b.type)
    fail(std::string("type mismatch in '") + ir::binary_name(f) + "': " + std::string(type_name(a.type)) + " and " +
         std::string(type_name(b.type)) + " (convert one with cast())");
  bool bits = f == B::And || f == B::Or || f == B::Xor;
  if (half(a.type) && !bits && f != B::Shl && f != B::Shr && f != B::Mod) {
    Val r = binary(f, widen(a), widen(b));
    return f == B::Min || f == B::Max ? tagged(r.id, a.type) : round_to(r, a.type);
  }
  if (half(a.type)) fail(std::string("'") + ir::binary_name(f) + "' does not take " + std::string(type_name(a.type)));
  bool ok = a.type == Type::Bool  ? bits
            : a.type == Type::F32 ? !bits && f != B::Shl && f != B::Shr && f != B::Mod
            : a.type == Type::F64 ? !bits && f != B::Shl && f != B::Shr && f != B::Mod && f != B::Pow
                                  : f != B::Pow;
  if (!ok) fail(std::string("'") + ir::binary_name(f) + "' does not take " + std::string(type_name(a.type)));
  ir::Op op;
  op.kind = Kind::Binary;
  op.attr = static_cast<uint8_t>(f);
  op.type = a.type;
  op.nin = 2;
  op.in = {a.id, b.id};
  return value(emit(op, tr().tdep[a.id] || tr().tdep[b.id]));
}

Val compare(ir::CmpFn f, Val a, Val b) {
  check_value(a, ir::cmp_name(f));
  check_value(b, ir::cmp_name(f));
  if (a.type != b.type)
    fail(std::string("type mismatch in '") + ir::cmp_name(f) + "': " + std::string(type_name(a.type)) + " and " +
         std::string(type_name(b.type)) + " (convert one with cast())");
  ir::Op op;
  op.kind = Kind::Compare;
  op.attr = static_cast<uint8_t>(f);
  op.type = Type::Bool;
  op.nin = 2;
  op.in = {a.id, b.id};
  return value(emit(op, tr().tdep[a.id] || tr().tdep[b.id]));
}

std::string mem_name(bool shared, uint32_t obj) {
  const ir::Kernel& k = tr().k;
  return (shared ? "shared array '" + k.shared[obj].name : "buffer '" + k.buffers[obj].name) + "'";
}

Type elem_type(bool shared, uint32_t obj) {
  const ir::Kernel& k = tr().k;
  return shared ? k.shared[obj].type : k.buffers[obj].type;
}

/// The value type of an element of the given storage type.
Type value_of(Type storage) { return storage == Type::F16 || storage == Type::BF16 ? Type::F32 : storage; }

void check_index(Val index, const char* what) {
  no_function("memory");
  check_value(index, what);
  if (!is_int(index.type))
    fail(std::string("an index must be i32, u32 or i64, not ") + std::string(type_name(index.type)));
}

/// Reading memory that another thread of the group wrote since the last barrier.
void check_read(bool shared, uint32_t obj, Val index, const Loc& where) {
  Tracer& t = tr();
  if (!shared && t.k.buffers[obj].access == Access::Write)
    fail("reads " + mem_name(shared, obj) + ", which is declared write-only (output)", record(where));
  auto it = t.writes.find({shared, obj});
  if (it == t.writes.end()) return;
  for (const Write& w : it->second) {
    bool other_index = w.index != index.id && (t.tdep[w.index] || t.tdep[index.id]);
    bool in_scope = false;
    for (uint32_t r : t.stack) in_scope |= r == w.region;
    if (other_index || (w.divergent && !in_scope))
      fail("reads " + mem_name(shared, obj) + ", written by other threads of the group at " + t.k.loc_text(w.loc) +
               ", without a barrier() in between",
           record(where));
  }
}

void note_write(bool shared, uint32_t obj, Val index, uint32_t loc) {
  Tracer& t = tr();
  if (!shared && t.k.buffers[obj].access == Access::Read)
    fail("writes " + mem_name(shared, obj) + ", which is declared read-only (input)", loc);
  t.writes[{shared, obj}].push_back({index.id, t.stack.back(), region_divergent(), loc});
}

Val load(bool shared, uint32_t obj, Val index, const Loc& where) {
  check_index(index, "a load");
  check_read(shared, obj, index, where);
  ir::Op op;
  op.kind = Kind::Load;
  op.shared = shared;
  op.obj = obj;
  op.type = value_of(elem_type(shared, obj));
  op.nin = 1;
  op.in[0] = index.id;
  return value(emit(op, tr().tdep[index.id]));
}

void store(bool shared, uint32_t obj, Val index, Val v, uint32_t loc) {
  check_index(index, "a store");
  check_value(v, "a store");
  Type want = value_of(elem_type(shared, obj));
  if (v.type == elem_type(shared, obj)) v = widen(v);  // an f16 value into f16 memory
  if (v.type != want)
    fail("type mismatch: stores " + std::string(type_name(v.type)) + " into " + mem_name(shared, obj) + " of " +
             std::string(type_name(elem_type(shared, obj))),
         loc);
  note_write(shared, obj, index, loc);
  ir::Op op;
  op.kind = Kind::Store;
  op.shared = shared;
  op.obj = obj;
  op.type = want;
  op.nin = 2;
  op.in = {index.id, v.id};
  op.loc = loc;
  emit(op, false);
}

/// Opens a region for `body`, closes it, and returns its id.
uint32_t nested(bool divergent, const std::function<void()>& body) {
  no_function("control flow (if_, for_, while_)");
  Tracer& t = tr();
  uint32_t r = static_cast<uint32_t>(t.k.regions.size());
  t.k.regions.emplace_back();
  t.stack.push_back(r);
  t.stack_div.push_back(t.stack_div.back() || divergent);
  const size_t mark = t.values.mark();  // the region's values are not visible after it
  body();
  t.values.drop_to(mark);
  t.stack.pop_back();
  t.stack_div.pop_back();
  return r;
}

Val atomic(ir::AtomicFn f, const Ref& r, Val v, const Loc& where) {
  uint32_t loc = record(where);
  check_index(r.index(), "an atomic");
  check_value(v, "an atomic");
  Type t = elem_type(r.shared(), r.obj());
  if (t != Type::I32 && t != Type::U32)
    fail("atomics need an i32 or u32 element, not " + std::string(type_name(t)), loc);
  if (v.type != t)
    fail("type mismatch in an atomic: " + std::string(type_name(v.type)) + " into " + std::string(type_name(t)), loc);
  if (!r.shared() && tr().k.buffers[r.obj()].access != Access::ReadWrite)
    fail("an atomic on " + mem_name(false, r.obj()) + " needs read-write access (inout)", loc);
  ir::Op op;
  op.kind = Kind::Atomic;
  op.attr = static_cast<uint8_t>(f);
  op.shared = r.shared();
  op.obj = r.obj();
  op.type = t;
  op.nin = 2;
  op.in = {r.index().id, v.id};
  op.loc = loc;
  return value(emit(op, true));
}

Val subgroup(ir::SubgroupFn f, Val v, Val other = Val()) {
  no_function("a subgroup operation");
  check_value(v, "a subgroup operation");
  if (v.type == Type::Bool) fail("subgroup operations do not take bool");
  if (half(v.type)) {  // a sum rounds once, at the end
    Val r = subgroup(f, widen(v), other);
    return f == ir::SubgroupFn::Add ? round_to(r, v.type) : tagged(r.id, v.type);
  }
  ir::Op op;
  op.kind = Kind::Subgroup;
  op.attr = static_cast<uint8_t>(f);
  op.type = v.type;
  op.nin = 1;
  op.in[0] = v.id;
  if (other.id != UINT32_MAX) {
    check_value(other, "a subgroup shuffle");
    if (other.type != Type::I32) fail("a subgroup lane or mask must be i32");
    op.nin = 2;
    op.in[1] = other.id;
  }
  return value(emit(op, true));
}

}  // namespace

// ---- values ------------------------------------------------------------------------------------

Val Val::constant(double v, Type t) {
  if (half(t)) {
    const auto f = static_cast<float>(v);
    return tagged(
        constant(t == Type::F16 ? static_cast<float>(Half(f)) : static_cast<float>(BFloat16(f)), Type::F32).id, t);
  }
  ir::Op op;
  op.kind = Kind::Const;
  op.type = t;
  if (t == Type::F32)
    op.f = static_cast<double>(static_cast<float>(v));
  else if (t == Type::F64)
    op.f = v;
  else if (t == Type::Bool)
    op.i = v != 0;
  else if (t == Type::U32)
    op.i = static_cast<int64_t>(static_cast<uint32_t>(static_cast<int64_t>(v)));
  else if (t == Type::I32)
    op.i = static_cast<int32_t>(static_cast<int64_t>(v));
  else
    op.i = static_cast<int64_t>(v);
  return hoisted(op, false);
}
Val::Val(float v) : Val(constant(v, Type::F32)) {}
Val::Val(double v) : Val(constant(v, Type::F32)) {}
Val::Val(int v) : Val(constant(v, Type::I32)) {}
Val::Val(unsigned v) : Val(constant(v, Type::U32)) {}
namespace {
/// An exact i64 literal (through a double, values past 2^53 would round, and 2^63 overflow).
Val i64_literal(int64_t v) {
  ir::Op op;
  op.kind = Kind::Const;
  op.type = Type::I64;
  op.i = v;
  return hoisted(op, false);
}
}  // namespace
Val::Val(long v) : Val(i64_literal(v)) {}
Val::Val(long long v) : Val(i64_literal(v)) {}
Val::Val(bool v) : Val(constant(v, Type::Bool)) {}

namespace {
uint32_t new_local(Type t) {
  Tracer& tc = tr();
  tc.k.locals.push_back(half(t) ? Type::F32 : t);
  tc.local_tdep.push_back(false);
  return static_cast<uint32_t>(tc.k.locals.size() - 1);
}
}  // namespace

Var::Var(Type t) : slot_(new_local(t)), type_(t) { *this = Val::constant(0, t); }
Var::Var(Val init) : slot_(new_local(init.type)), type_(init.type) {
  check_value(init, "a Var");
  *this = init;
}

Var& Var::operator=(Val v) {
  check_value(v, "an assignment");
  if (v.type != type_)
    fail("type mismatch: assigns " + std::string(type_name(v.type)) + " to a Var of " + std::string(type_name(type_)));
  Tracer& t = tr();
  ir::Op op;
  op.kind = Kind::LocalStore;
  op.obj = slot_;
  op.type = half(type_) ? Type::F32 : type_;
  op.nin = 1;
  op.in[0] = v.id;
  emit(op, false);
  if (t.tdep[v.id] || region_divergent()) t.local_tdep[slot_] = true;
  return *this;
}
Var::operator Val() const {
  ir::Op op;
  op.kind = Kind::LocalLoad;
  op.obj = slot_;
  op.type = half(type_) ? Type::F32 : type_;
  return tagged(emit(op, tr().local_tdep[slot_]), type_);
}
Var& Var::operator+=(Val v) { return *this = Val(*this) + v; }
Var& Var::operator-=(Val v) { return *this = Val(*this) - v; }
Var& Var::operator*=(Val v) { return *this = Val(*this) * v; }

Ref::operator Val() const { return load(shared_, obj_, index_, loc_); }
const Ref& Ref::operator=(Val v) const {
  store(shared_, obj_, index_, v, record(loc_));
  return *this;
}
const Ref& Ref::operator+=(Val v) const { return *this = Val(*this) + v; }
Type Ref::value_type() const { return value_of(elem_type(shared_, obj_)); }

namespace {
std::vector<Val> load_vec(bool shared, uint32_t obj, Val index, uint8_t lanes, const Loc& where) {
  check_index(index, "a vector load");
  check_read(shared, obj, index, where);
  ir::Op op;
  op.kind = Kind::LoadVec;
  op.shared = shared;
  op.obj = obj;
  op.type = value_of(elem_type(shared, obj));
  op.lanes = lanes;
  op.nin = 1;
  op.in[0] = index.id;
  uint32_t vec = emit(op, tr().tdep[index.id]);
  std::vector<Val> out;
  for (uint8_t l = 0; l < lanes; ++l) {
    ir::Op e;
    e.kind = Kind::Extract;
    e.type = op.type;
    e.axis = l;
    e.nin = 1;
    e.in[0] = vec;
    out.push_back(value(emit(e, tr().tdep[vec])));
  }
  return out;
}
void store_vec(bool shared, uint32_t obj, Val index, const Val* v, uint8_t lanes, const Loc& where) {
  uint32_t loc = record(where);
  check_index(index, "a vector store");
  Type want = value_of(elem_type(shared, obj));
  ir::Op op;
  op.kind = Kind::StoreVec;
  op.shared = shared;
  op.obj = obj;
  op.type = want;
  op.lanes = lanes;
  op.nin = static_cast<uint8_t>(1 + lanes);
  op.in[0] = index.id;
  for (uint8_t l = 0; l < lanes; ++l) {
    check_value(v[l], "a vector store");
    if (v[l].type != want && v[l].type != elem_type(shared, obj))
      fail("type mismatch: stores " + std::string(type_name(v[l].type)) + " into " + mem_name(shared, obj), loc);
    op.in[1 + l] = v[l].id;
  }
  note_write(shared, obj, index, loc);
  op.loc = loc;
  emit(op, false);
}
}  // namespace

std::array<Val, 2> Memory::load2(Index index) const {
  auto v = load_vec(shared_, obj_, index.v, 2, index.loc);
  return {v[0], v[1]};
}
std::array<Val, 4> Memory::load4(Index index) const {
  auto v = load_vec(shared_, obj_, index.v, 4, index.loc);
  return {v[0], v[1], v[2], v[3]};
}
void Memory::store2(Index index, std::array<Val, 2> v) const {
  store_vec(shared_, obj_, index.v, v.data(), 2, index.loc);
}
void Memory::store4(Index index, std::array<Val, 4> v) const {
  store_vec(shared_, obj_, index.v, v.data(), 4, index.loc);
}

// ---- builder -----------------------------------------------------------------------------------

uint32_t Builder::add_buffer(std::string name, Type t, Access a) {
  if (t == Type::Bool) fail("buffer '" + name + "': bool buffers are not supported (use u32)");
  tr().k.buffers.push_back({std::move(name), t, a});
  return static_cast<uint32_t>(tr().k.buffers.size() - 1);
}
Val Builder::add_scalar(std::string name, Type t) {
  if (t == Type::F16 || t == Type::BF16 || t == Type::Bool)
    fail("scalar '" + name + "' must be i32, u32, i64, f32 or f64");
  Tracer& tc = tr();
  tc.k.scalars.push_back({std::move(name), t});
  ir::Op op;
  op.kind = Kind::Scalar;
  op.obj = static_cast<uint32_t>(tc.k.scalars.size() - 1);
  op.type = t;
  return hoisted(op, false);
}
uint32_t Builder::add_shared(std::string name, Type t, uint32_t count) {
  if (t == Type::Bool) fail("shared array '" + name + "': bool arrays are not supported");
  if (count == 0) fail("shared array '" + name + "' has no elements");
  tr().k.shared.push_back({std::move(name), t, count});
  return static_cast<uint32_t>(tr().k.shared.size() - 1);
}
void Builder::group_size(uint32_t x, uint32_t y, uint32_t z) {
  Tracer& t = tr();
  if (t.group_set) fail("group_size() must be set once, before group_size(axis) or global_id() read it");
  if (x == 0 || y == 0 || z == 0 || uint64_t{x} * y * z > t.k.limits.max_group_threads)
    fail("group size " + std::to_string(x) + "x" + std::to_string(y) + "x" + std::to_string(z) +
         " is empty or over the limit of " + std::to_string(t.k.limits.max_group_threads) + " threads");
  t.k.group = {x, y, z};
  t.group_set = true;
}
int64_t Builder::param(const std::string& name, int64_t value) {
  Tracer& t = tr();
  if (!t.k.spec.empty()) t.k.spec += ",";
  t.k.spec += name + "=" + std::to_string(value);
  return value;
}
const Limits& Builder::limits() const { return tr().k.limits; }

// ---- builtins, math, control flow --------------------------------------------------------------

Val thread_id(int axis) { return builtin(ir::Builtin::ThreadId, axis); }
Val group_id(int axis) { return builtin(ir::Builtin::GroupId, axis); }
Val num_groups(int axis) { return builtin(ir::Builtin::NumGroups, axis); }
Val group_size(int axis) {
  no_function("group_size()");
  Tracer& t = tr();
  if (axis < 0 || axis > 2) fail("axis " + std::to_string(axis) + " is not 0, 1 or 2");
  t.group_set = true;  // the size is read: it may no longer change
  return Val::constant(t.k.group[axis], Type::I32);
}
Val global_id(int axis) { return group_id(axis) * group_size(axis) + thread_id(axis); }
Val lane_id() { return builtin(ir::Builtin::LaneId, 0); }
Val subgroup_size() {
  no_function("subgroup_size()");
  const Limits& l = tr().k.limits;
  return Val::constant(l.subgroups ? l.subgroup_size : 1, Type::I32);
}

Val operator+(Val a, Val b) { return binary(ir::BinaryFn::Add, a, b); }
Val operator-(Val a, Val b) { return binary(ir::BinaryFn::Sub, a, b); }
Val operator*(Val a, Val b) { return binary(ir::BinaryFn::Mul, a, b); }
Val operator/(Val a, Val b) { return binary(ir::BinaryFn::Div, a, b); }
Val operator%(Val a, Val b) { return binary(ir::BinaryFn::Mod, a, b); }
Val operator&(Val a, Val b) { return binary(ir::BinaryFn::And, a, b); }
Val operator|(Val a, Val b) { return binary(ir::BinaryFn::Or, a, b); }
Val operator^(Val a, Val b) { return binary(ir::BinaryFn::Xor, a, b); }
Val operator<<(Val a, Val b) { return binary(ir::BinaryFn::Shl, a, b); }
Val operator>>(Val a, Val b) { return binary(ir::BinaryFn::Shr, a, b); }
Val operator&&(Val a, Val b) {
  if (a.type != Type::Bool || b.type != Type::Bool) fail("'&&' takes bool values");
  return a & b;
}
Val operator||(Val a, Val b) {
  if (a.type != Type::Bool || b.type != Type::Bool) fail("'||' takes bool values");
  return a | b;
}
Val operator<(Val a, Val b) { return compare(ir::CmpFn::Lt, a, b); }
Val operator<=(Val a, Val b) { return compare(ir::CmpFn::Le, a, b); }
Val operator>(Val a, Val b) { return compare(ir::CmpFn::Gt, a, b); }
Val operator>=(Val a, Val b) { return compare(ir::CmpFn::Ge, a, b); }
Val operator==(Val a, Val b) { return compare(ir::CmpFn::Eq, a, b); }
Val operator!=(Val a, Val b) { return compare(ir::CmpFn::Ne, a, b); }
Val operator-(Val a) { return unary(ir::UnaryFn::Neg, a); }
Val operator!(Val a) { return unary(ir::UnaryFn::Not, a); }

// exp, log, tanh, sigmoid and erf of f32 are traced as the CPU kernels' polynomial and rational
// forms (kernel/library.h, library/math.cpp), in plain f32 arithmetic on every target: the
// targets' built-ins (GLSL's exp: 3 + 2|x| ulps; WGSL's: the same; GLSL and WGSL have no erf)
// would miss the CPU's bounds. erf of a subnormal is the rational form's own arithmetic (no
// f64, which WGSL lacks): 0 where a device flushes subnormals.
Val exp(Val x) {
  if (half(x.type)) return through_f32(x, exp);
  return x.type == Type::F32 ? lib::exp_f32(x) : unary(ir::UnaryFn::Exp, x);
}
Val log(Val x) {
  if (half(x.type)) return through_f32(x, log);
  return x.type == Type::F32 ? lib::log_f32(x) : unary(ir::UnaryFn::Log, x);
}
Val sqrt(Val x) { return unary(ir::UnaryFn::Sqrt, x); }
Val rsqrt(Val x) { return unary(ir::UnaryFn::Rsqrt, x); }
Val tanh(Val x) {
  if (half(x.type)) return through_f32(x, tanh);
  return x.type == Type::F32 ? lib::tanh_f32(x) : unary(ir::UnaryFn::Tanh, x);
}
Val erf(Val x) {
  if (half(x.type)) return through_f32(x, erf);
  return x.type == Type::F32 ? lib::erf_f32(x, false) : unary(ir::UnaryFn::Erf, x);
}
Val sigmoid(Val x) {
  if (half(x.type)) return through_f32(x, sigmoid);
  return x.type == Type::F32 ? lib::sigmoid_f32(x) : unary(ir::UnaryFn::Sigmoid, x);
}
Val abs(Val x) { return unary(ir::UnaryFn::Abs, x); }
Val floor(Val x) { return unary(ir::UnaryFn::Floor, x); }
Val ceil(Val x) { return unary(ir::UnaryFn::Ceil, x); }
Val sin(Val x) {
  if (half(x.type)) return through_f32(x, sin);
  return x.type == Type::F32 ? lib::sin_cos_f32(false, x) : unary(ir::UnaryFn::Sin, x);
}
Val cos(Val x) {
  if (half(x.type)) return through_f32(x, cos);
  return x.type == Type::F32 ? lib::sin_cos_f32(true, x) : unary(ir::UnaryFn::Cos, x);
}
Val min(Val a, Val b) {
  if (a.type == Type::Bool) fail("'min' does not take bool");
  return binary(ir::BinaryFn::Min, a, b);
}
Val max(Val a, Val b) {
  if (a.type == Type::Bool) fail("'max' does not take bool");
  return binary(ir::BinaryFn::Max, a, b);
}
Val pow(Val a, Val b) {
  if (half(a.type) && a.type == b.type) return round_to(pow(widen(a), widen(b)), a.type);
  return a.type == Type::F32 && b.type == Type::F32 ? lib::pow_f32_nof64(a, b) : binary(ir::BinaryFn::Pow, a, b);
}

Val select(Val cond, Val a, Val b) {
  check_value(cond, "select");
  check_value(a, "select");
  check_value(b, "select");
  if (cond.type != Type::Bool) fail("select() needs a bool condition, not " + std::string(type_name(cond.type)));
  if (a.type != b.type)
    fail("type mismatch in select(): " + std::string(type_name(a.type)) + " and " + std::string(type_name(b.type)));
  if (half(a.type)) return tagged(select(cond, widen(a), widen(b)).id, a.type);
  ir::Op op;
  op.kind = Kind::Select;
  op.type = a.type;
  op.nin = 3;
  op.in = {cond.id, a.id, b.id};
  Tracer& t = tr();
  return value(emit(op, t.tdep[cond.id] || t.tdep[a.id] || t.tdep[b.id]));
}

Val fma(Val a, Val b, Val c) {
  check_value(a, "fma");
  check_value(b, "fma");
  check_value(c, "fma");
  if (a.type != b.type || a.type != c.type)
    fail("type mismatch in fma(): " + std::string(type_name(a.type)) + ", " + std::string(type_name(b.type)) + " and " +
         std::string(type_name(c.type)));
  if (half(a.type)) return round_to(fma(widen(a), widen(b), widen(c)), a.type);
  if (a.type != Type::F32 && a.type != Type::F64) fail("fma() takes f32 or f64, not " + std::string(type_name(a.type)));
  ir::Op op;
  op.kind = Kind::Fma;
  op.type = a.type;
  op.nin = 3;
  op.in = {a.id, b.id, c.id};
  Tracer& t = tr();
  return value(emit(op, t.tdep[a.id] || t.tdep[b.id] || t.tdep[c.id]));
}

Val cast(Val x, Type to) {
  check_value(x, "cast");
  if (x.type == to) return x;
  if (half(to)) {
    const ir::Op& src = tr().k.ops[x.id];
    // A load from memory of this type is already exact in it.
    if ((src.kind == Kind::Load || src.kind == Kind::Extract) && x.type == Type::F32) {
      const uint32_t mem = src.kind == Kind::Load ? x.id : src.in[0];
      const ir::Op& m = tr().k.ops[mem];
      if (elem_type(m.shared, m.obj) == to) return tagged(x.id, to);
    }
    return round_to(cast(widen(x), Type::F32), to);
  }
  if (half(x.type)) return cast(widen(x), to);
  ir::Op op;
  op.kind = Kind::Cast;
  op.type = to;
  op.nin = 1;
  op.in[0] = x.id;
  return value(emit(op, tr().tdep[x.id]));
}

Val bitcast(Val x, Type to) {
  check_value(x, "bitcast");
  auto word = [](Type t) { return t == Type::F32 || t == Type::I32 || t == Type::U32; };
  if (!word(x.type) || !word(to))
    fail("bitcast() takes f32, i32 or u32 to one of those, not " + std::string(type_name(x.type)) + " to " +
         std::string(type_name(to)));
  if (x.type == to) return x;
  ir::Op op;
  op.kind = Kind::Cast;
  op.attr = 1;
  op.type = to;
  op.nin = 1;
  op.in[0] = x.id;
  return value(emit(op, tr().tdep[x.id]));
}

IfChain if_(Val cond, const std::function<void()>& body, Loc where) {
  uint32_t loc = record(where);
  check_value(cond, "if_");
  if (cond.type != Type::Bool) fail("if_() needs a bool condition, not " + std::string(type_name(cond.type)), loc);
  bool div = tr().tdep[cond.id];
  uint32_t r = nested(div, body);
  ir::Op op;
  op.kind = Kind::If;
  op.nin = 1;
  op.in[0] = cond.id;
  op.region = {r, kNone};
  op.loc = loc;
  return IfChain(emit(op, false));
}

void IfChain::else_(const std::function<void()>& body, Loc where) {
  uint32_t loc = record(where);
  Tracer& t = tr();
  const auto& cur = t.k.regions[t.stack.back()].ops;
  if (cur.empty() || cur.back() != op_ || t.k.ops[op_].region[1] != kNone)
    fail("else_() must follow its if_() directly", loc);
  uint32_t r = nested(t.tdep[t.k.ops[op_].in[0]], body);
  t.k.ops[op_].region[1] = r;
}

void for_(Val begin, Val end, Val step, const std::function<void(Val)>& body, Loc where) {
  uint32_t loc = record(where);
  check_value(begin, "for_");
  check_value(end, "for_");
  check_value(step, "for_");
  if (!is_int(begin.type) || begin.type != end.type || begin.type != step.type)
    fail("for_() needs integer bounds and step of one type, not " + std::string(type_name(begin.type)) + ", " +
             std::string(type_name(end.type)) + ", " + std::string(type_name(step.type)),
         loc);
  Tracer& t = tr();
  if (t.k.ops[step.id].kind == Kind::Const && t.k.ops[step.id].i <= 0)
    fail("for_() needs a positive step, not " + std::to_string(t.k.ops[step.id].i), loc);
  bool div = t.tdep[begin.id] || t.tdep[end.id] || t.tdep[step.id];
  ir::Op op;
  op.kind = Kind::For;
  op.type = begin.type;
  op.nin = 3;
  op.in = {begin.id, end.id, step.id};
  op.loc = loc;
  uint32_t id = emit(op, div);
  Val iv = value(id);
  uint32_t r = nested(div, [&] { body(iv); });
  t.k.ops[id].region[0] = r;
}
void for_(Val begin, Val end, const std::function<void(Val)>& body, Loc where) {
  for_(begin, end, Val::constant(1, begin.type), body, where);
}

void while_(const std::function<Val()>& cond, const std::function<void()>& body, Loc where) {
  uint32_t loc = record(where);
  Tracer& t = tr();
  ir::Op op;
  op.kind = Kind::While;
  op.loc = loc;
  uint32_t id = emit(op, false);
  bool div = false;
  uint32_t rc = nested(false, [&] {
    Val c = cond();
    check_value(c, "while_");
    if (c.type != Type::Bool) fail("while_() needs a bool condition, not " + std::string(type_name(c.type)), loc);
    div = t.tdep[c.id];
    ir::Op y;
    y.kind = Kind::Yield;
    y.nin = 1;
    y.in[0] = c.id;
    emit(y, false);
  });
  uint32_t rb = nested(div, body);
  t.k.ops[id].region = {rc, rb};
}

void barrier(Loc where) {
  no_function("barrier()");
  uint32_t loc = record(where);
  Tracer& t = tr();
  ir::Op op;
  op.kind = Kind::Barrier;
  op.loc = loc;
  emit(op, false);
  t.writes.clear();
  t.k.uses_barrier = true;
}

Val atomic_add(const Ref& r, Val v, Loc loc) { return atomic(ir::AtomicFn::Add, r, v, loc); }
Val atomic_min(const Ref& r, Val v, Loc loc) { return atomic(ir::AtomicFn::Min, r, v, loc); }
Val atomic_max(const Ref& r, Val v, Loc loc) { return atomic(ir::AtomicFn::Max, r, v, loc); }

Val subgroup_add(Val v) { return subgroup(ir::SubgroupFn::Add, v); }
Val subgroup_min(Val v) { return subgroup(ir::SubgroupFn::Min, v); }
Val subgroup_max(Val v) { return subgroup(ir::SubgroupFn::Max, v); }
Val subgroup_shuffle(Val v, Val lane) { return subgroup(ir::SubgroupFn::Shuffle, v, lane); }
Val subgroup_shuffle_xor(Val v, Val mask) { return subgroup(ir::SubgroupFn::ShuffleXor, v, mask); }

// ---- functions ---------------------------------------------------------------------------------

namespace {

/// Makes t the current trace for its scope (the outer one, if any, again after it).
struct Active {
  explicit Active(Tracer& t) : outer(g_tracer) { g_tracer = &t; }
  ~Active() { g_tracer = outer; }
  Active(const Active&) = delete;
  Active& operator=(const Active&) = delete;
  Tracer* outer;
};

/// Ends a trace: the hoisted values lead the body, then the checks (a kernel) and the passes.
void finish(Tracer& t, bool check) {
  auto& body = t.k.regions[0].ops;
  body.insert(body.begin(), t.lead.begin(), t.lead.end());
  if (check) ir::validate(t.k);
  ir::optimize(t.k);
}

}  // namespace

/// Traces a Function's body into an optimised ir::Function (kernel/function.h).
std::shared_ptr<ir::Function> detail::trace_function(const std::string& name, const std::vector<Type>& params,
                                                     const std::function<Val(const std::vector<Val>&)>& fn,
                                                     bool bool_result) {
  Tracer t;
  t.function = true;
  t.k.is_function = true;
  t.k.name = name;
  t.k.regions.emplace_back();
  Type result = Type::F32;
  {
    Active active(t);
    std::vector<Val> args;
    for (size_t i = 0; i < params.size(); ++i) {
      const Type p = params[i];
      std::string pname = "a";
      pname += std::to_string(i);
      t.k.scalars.push_back({std::move(pname), value_of(p)});
      ir::Op op;
      op.kind = Kind::Scalar;
      op.obj = static_cast<uint32_t>(i);
      op.type = value_of(p);
      const Val v = hoisted(op, false);
      args.push_back(half(p) ? tagged(v.id, p) : v);
    }
    const Val r = fn(args);
    check_value(r, "the function's result");
    if ((r.type == Type::Bool) != bool_result)
      fail(bool_result ? "a fast form's guard returns bool" : "a function returns a number, not bool");
    result = r.type;
    ir::Op y;
    y.kind = Kind::Yield;
    y.nin = 1;
    y.in[0] = r.id;
    emit(y, false);
  }
  finish(t, false);
  auto f = std::make_shared<ir::Function>();
  f->name = name;
  f->params = params;
  f->result = result;
  f->body = std::move(t.k);
  f->uses = ir::function_uses(f->body);
  return f;
}

/// A call of f (kernel/function.h).
Val detail::emit_call(const std::shared_ptr<const ir::Function>& fn, const std::vector<Val>& args) {
  const ir::Function* f = fn.get();
  Tracer& t = tr();
  const std::string what = "a call of '" + f->name + "'";
  if (args.size() != f->params.size())
    fail(what + " with " + std::to_string(args.size()) + " arguments (it takes " + std::to_string(f->params.size()) +
         ")");
  ir::Op op;
  op.kind = Kind::Call;
  op.nin = static_cast<uint8_t>(args.size());
  op.type = f->value_type();
  bool dep = false;
  for (size_t i = 0; i < args.size(); ++i) {
    check_value(args[i], what.c_str());
    if (args[i].type != f->params[i])
      fail("type mismatch in " + what + ": argument " + std::to_string(i) + " is " +
           std::string(type_name(args[i].type)) + ", the parameter " + std::string(type_name(f->params[i])));
    op.in[i] = args[i].id;
    dep = dep || t.tdep[args[i].id];
  }
  uint32_t index = 0;
  while (index < t.k.functions.size() && t.k.functions[index].get() != f) {
    if (t.k.functions[index]->name == f->name) fail("two different functions named '" + f->name + "'");
    ++index;
  }
  if (index == t.k.functions.size()) t.k.functions.push_back(fn);
  op.obj = index;
  const uint32_t id = emit(op, dep);
  return half(f->result) ? tagged(id, f->result) : value(id);
}

// ---- trace -------------------------------------------------------------------------------------

Kernel trace(std::string name, const std::function<void(Builder&)>& fn, const Limits& limits) {
  Tracer t;
  t.k.name = std::move(name);
  t.k.limits = limits;
  t.k.regions.emplace_back();
  t.k.ops.reserve(256);
  {
    Active active(t);
    Builder b;
    fn(b);
  }
  finish(t, true);
  return Kernel(std::make_shared<const ir::Kernel>(std::move(t.k)));
}

}  // namespace kiln::kernel
