// SPDX-License-Identifier: MIT OR Apache-2.0
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
//
// Vector mode (where the kernel allows it: no debug checks, x group size a multiple of 8, every
// value that varies between threads a 32- or 64-bit scalar): a phase runs its threads KK_W at a
// time (8, or 16 with AVX-512), each varying value a vector of KK_W lanes (GCC vector types;
// 64-bit values in vectors twice as long, masks always 32-bit), each uniform value a scalar. A varying `if` becomes a
// lane mask: memory is touched only for active lanes, the masked-off lanes of a local keep their value; a varying loop
// runs while some lane is in it, under the mask of those lanes. An index whose lanes are consecutive (thread_id(0) plus
// a uniform value) is one vector load or store; any other is a loop over the lanes. The compiler then keeps vector
// values in registers across a uniform loop (a tiled matmul's sums), which it does not do for per-thread arrays.
#include <algorithm>
#include <array>

#include "kernel/render_clike.h"

namespace kiln::kernel::gen {
namespace {

using ir::Kind;
using ir::kNone;

/// The C++ target: phases split at barriers, threads of a group as loops.
class Cpp : public CLike {
 public:
  Cpp(const ir::Kernel& kk, bool debug) : CLike(kk, Target::Cpp, debug) {}
  /// The last renderer of the thread to end gives back a memo table grown past kKeptCap
  /// entries by a very large kernel (as the text arena keeps what a usual kernel needs).
  ~Cpp() override {
    if (--live_renderers == 0 && kept_.size() > kKeptCap) std::vector<Kept>().swap(kept_);
  }

  /// The vector form of f for vector mode, vector_name(f): each parameter, value and local a
  /// vector of KK_W lanes (constants broadcast).
  std::string vector_function(const ir::Function& f) {
    const size_t n = k.ops.size();
    in_function_ = vec_ = in_threads = true;
    divergent.assign(n, true);
    for (size_t i = 0; i < n; ++i) divergent[i] = k.ops[i].kind != Kind::Const;
    remat.assign(n, false);
    has_div.assign(n, false);
    crossing.assign(n, false);
    hoist.assign(n, false);
    stride.assign(n, kNoStride);
    vlocal.assign(k.locals.size(), true);
    local_multi.assign(k.locals.size(), false);
    out.clear();
    depth = 0;
    Text head = cat("static inline ", wty(f.value_type()), " ", vector_name(f), "(");
    for (size_t i = 0; i < k.scalars.size(); ++i) append(head, i ? ", " : "", wty(k.scalars[i].type), " p", num(i));
    line(head, ") {");
    depth = 1;
    if (f.fast) {  // every lane where the guard holds: the fast form, with the body's bits
      Text args;
      for (size_t i = 0; i < k.scalars.size(); ++i) append(args, i ? ", p" : "p", num(i));
      line("if (kk_all(", vector_name(*f.guard), "(", args, "))) return ", vector_name(*f.fast), "(", args, ");");
    }
    for (size_t i = 0; i < k.locals.size(); ++i) line(wty(k.locals[i]), " l", num(i), ";");
    for (uint32_t id : k.regions[0].ops) {
      const ir::Op& op = k.ops[id];
      if (op.kind == Kind::Const || op.kind == Kind::Scalar) continue;
      if (op.kind == Kind::Yield)
        line("return ", bc(op.in[0]), ";");
      else if (op.kind == Kind::LocalStore)
        line(local(op.obj), " = ", bc(op.in[0]), ";");
      else
        define(id, vexpr(id));
    }
    out += "}\n";
    return out;
  }
  /// The name of f's vector form.
  static Text vector_name(const ir::Function& f) { return cat("kk_fv_", function_name(f).substr(5)); }

  std::string text() override {
    if (k.limits.subgroups) unsupported("subgroups of more than one lane (trace with Limits::subgroups = false)");
    plan();
    // The functions' definitions first (rendered once per process), so that the output is sized
    // once for them too. In vector mode a varying call takes the vector form, a uniform one the
    // scalar form.
    std::vector<const std::string*> defs;
    if (!k.functions.empty()) {
      std::vector<bool> scalar(k.functions.size(), !vec_), vector(k.functions.size(), false);
      if (vec_)
        ir::for_each_op(k, 0, [&](uint32_t id) {
          const ir::Op& op = k.ops[id];
          if (op.kind != Kind::Call) return;
          (divergent[id] ? vector : scalar)[op.obj] = true;
          if (remat[id]) scalar[op.obj] = true;  // rendered again lane by lane
        });
      defs = function_texts(
          static_cast<int>(Target::Cpp), [this](const ir::Function& f) { return render_function(f); }, &scalar);
      for (const std::string* t : function_texts(
               4, [](const ir::Function& f) { return Cpp(f.body, false).vector_function(f); }, &vector))
        defs.push_back(t);
    }
    size_t size = 8192 + 160 * k.ops.size();
    for (const std::string* t : defs) size += t->size();
    out.reserve(size);
    out += "// kernel " + k.name + " [" + k.spec + "]\n";
    out += kCppPrelude;
    out += kConversions;
    if (vec_) {
      out += k.group[0] % 16 == 0 ? "#define KK_W16 1\n" : "#define KK_W16 0\n";
      out += kCppVectorPrelude;
      if (vector_math()) out += kCppVectorMath;
    }
    for (const std::string* t : defs) out += *t;
    out += "extern \"C\" void kk_run(const kk_args* a, long long g0, long long g1) {\n";
    for (size_t i = 0; i < k.buffers.size(); ++i) {
      const auto& b = k.buffers[i];
      Text n = num(i);
      line(b.access == Access::Read ? "const " : "", ty(b.type, 1), "* const b", n, " = (",
           (b.access == Access::Read ? "const " : ""), ty(b.type, 1), "*)a->bufs[", n, "];");
      if (debug_) line("const long long n", n, " = a->sizes[", n, "];");
      if (streams(i)) line("const bool kk_s", n, " = (a->stream >> ", n, ") & 1;");
    }
    for (size_t i = 0; i < k.scalars.size(); ++i) {
      Type t = k.scalars[i].type;
      Text n = num(i);
      line("const ", ty(t, 1), " p", n, " = (", ty(t, 1), ")a->", (is_float(t) ? "fargs[" : "iargs["), n, "];");
    }
    line("const int kk_nx = (int)a->groups[0], kk_ny = (int)a->groups[1], kk_nz = (int)a->groups[2];");
    line("(void)kk_nz;");
    if (debug_) {
      line("try {");
      ++depth;
    }
    // The group's coordinates step along with kk_g: no division per group.
    line("int kk_cx = (int)(g0 % kk_nx), kk_cy = (int)(g0 / kk_nx % kk_ny), kk_cz = (int)(g0 / ((long long)kk_nx * ",
         "kk_ny));");
    line("for (long long kk_g = g0; kk_g < g1; ++kk_g, kk_next_group(kk_cx, kk_cy, kk_cz, kk_nx, kk_ny)) {");
    ++depth;
    line("const int kk_gx = kk_cx, kk_gy = kk_cy, kk_gz = kk_cz;");
    line("(void)kk_gx; (void)kk_gy; (void)kk_gz;");
    for (size_t i = 0; i < k.shared.size(); ++i)
      line(ty(k.shared[i].type, 1), " s", num(i), "[", num(k.shared[i].count), "];");
    Text gs = num(k.threads()), chunks = "[" + gs + " / KK_W]";
    for (size_t i = 0; i < k.locals.size(); ++i) {
      Text l = " l" + num(i);
      if (!vec_)
        line(ty(k.locals[i], 1), l, (local_multi[i] ? "[" + gs + "]" : ""), ";");
      else
        line((vlocal[i] ? wty(k.locals[i]) : ty(k.locals[i], 1)), l, (local_multi[i] ? chunks : ""), ";");
    }
    for (uint32_t id = 0; id < k.ops.size(); ++id) {
      if (!crossing[id]) continue;
      if (!vec_)
        line(ty(k.ops[id].type, k.ops[id].lanes), " ", name(id), "[", gs, "];");
      else
        line(divergent[id] ? wty(k.ops[id].type) : ty(k.ops[id].type, k.ops[id].lanes), " ", name(id),
             divergent[id] ? chunks : "", ";");
    }
    group_region(0);
    --depth;
    line("}");
    if (vec_ && std::any_of(k.buffers.begin(), k.buffers.end(),
                            [](const ir::BufferDecl& b) { return b.access == Access::Write; }))
      line("kk_stream_fence(a);");
    if (debug_) {
      --depth;
      line("} catch (const kk_oob&) {}");
    }
    out += "}\n";
    return out;
  }

 private:
  std::vector<int> def_phase;    ///< op -> phase of its definition (-1: group level)
  ir::Flags crossing;            ///< value used outside its phase: one per thread
  std::vector<int> local_phase;  ///< local -> first phase using it
  ir::Flags local_multi;         ///< local used in several phases
  ir::Flags group_level;         ///< op runs once per group
  bool in_threads = false;       ///< rendering inside a loop over the threads
  int open_loops = 0;            ///< loops opened by open_threads()

  ir::Flags divergent;  ///< ir::divergence: the value may differ between threads
  ir::Flags hoist;      ///< a uniform loop (or a uniform if holding one): run per group
  /// Integer arithmetic over thread and group ids, scalars and constants only (a few ops deep):
  /// written out where used instead of kept per thread, so that an index stays an expression
  /// of the thread loop's variable (contiguous accesses the compiler vectorises, not gathers).
  ir::Flags remat;

  void mark_remat() {
    remat.assign(k.ops.size(), false);
    has_div.assign(k.ops.size(), false);
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
        const auto f = static_cast<ir::BinaryFn>(op.attr);
        has_div[id] = op.kind == Kind::Binary && (f == ir::BinaryFn::Div || f == ir::BinaryFn::Mod);
        for (uint8_t i = 0; i < op.nin; ++i) has_div[id] = has_div[id] || has_div[op.in[i]];
      }
    }
  }

  // ---- rendered texts kept for reuse ----
  /// A rematerialised value is written out at every use; its text depends only on the lane
  /// being rendered (whole vectors, lane 0 or the lane loop's lane), on whether its lanes are
  /// rendered, and, where it divides, on the mask. Each form is rendered once.
  enum Memo { kWhole, kLane0, kLaneL, kUniform = 3, kFirstLane = 6, kBroadcast = 8, kScalarMode, kMemos };
  /// A kept text, valid while gen is the renderer's memo_gen_. The table is the thread's, reused
  /// by every renderer (nothing to clear per kernel) and never shrinks; a renderer nested in
  /// another (a function's) takes entries over, and the outer one renders those again.
  struct Kept {
    const char* p;
    uint32_t n, gen;
  };
  static thread_local std::vector<Kept> kept_;
  static thread_local uint32_t memo_generation;
  static thread_local int live_renderers;      ///< Cpp renderers alive on this thread
  static constexpr size_t kKeptCap = 1 << 16;  ///< entries kept between kernels (1 MiB)
  /// A generation no entry of the table has, with the table sized for kMemos slots of n ops
  /// (called once per renderer, which it counts).
  static uint32_t next_generation(size_t n) {
    ++live_renderers;
    if (kept_.size() < kMemos * n) kept_.resize(kMemos * n, Kept{nullptr, 0, 0});
    if (++memo_generation == 0) {  // wrapped around: the old entries could match again
      for (Kept& e : kept_) e.gen = 0;
      memo_generation = 1;
    }
    return memo_generation;
  }
  const uint32_t memo_gen_ = next_generation(k.ops.size());
  ir::Flags has_div;  ///< a rematerialised value with an integer division in it
  /// make(), or its text kept under (slot, id); slot < 0: not kept.
  template <class F>
  Text memo(int slot, uint32_t id, const F& make) {
    if (slot < 0 || (has_div[id] && !mask_.empty())) return make();
    const size_t at = static_cast<size_t>(slot) * k.ops.size() + id;
    if (kept_[at].gen != memo_gen_) {
      const Text t = make();  // may keep other texts, or grow the table
      kept_[at] = Kept{t.data(), static_cast<uint32_t>(t.size()), memo_gen_};
    }
    return Text(std::string_view(kept_[at].p, kept_[at].n));
  }
  /// The memo slot of the current lane (kWhole, kLane0, kLaneL; -1: another lane).
  int lane_slot() const { return lane_.empty() ? kWhole : lane_ == "0" ? kLane0 : lane_ == "kk_l" ? kLaneL : -1; }

  bool is_group(uint32_t id) {
    const ir::Op& op = k.ops[id];
    if (op.kind == Kind::Barrier || hoist[id]) return true;
    return op.region[0] != kNone && (has_barrier(op.region[0]) || has_barrier(op.region[1]));
  }
  std::vector<int8_t> barrier_in_;  ///< region -> holds a barrier (-1: not yet known)
  /// Whether region r (or a region nested in it) holds a barrier, found once per region.
  bool has_barrier(uint32_t r) {
    if (r == kNone) return false;
    if (barrier_in_.empty()) barrier_in_.assign(k.regions.size(), -1);
    if (barrier_in_[r] < 0) {
      bool any = false;
      for (uint32_t id : k.regions[r].ops) {
        const ir::Op& op = k.ops[id];
        any = any || op.kind == Kind::Barrier || (op.region[0] != kNone && has_barrier(op.region[0])) ||
              (op.region[1] != kNone && has_barrier(op.region[1]));
      }
      barrier_in_[r] = any;
    }
    return barrier_in_[r] != 0;
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
      if (inlined(id)) continue;  // written where used: no phase, no operands
      const ir::Op& op = k.ops[id];
      bool g = group && (is_group(id) || op.kind == Kind::Yield);
      if (g) {
        group_level[id] = true;
        cur = -1;
        for (uint8_t i = 0; i < op.nin; ++i) use(op.in[i], -1);
        if (op.kind == Kind::For) def_phase[id] = -2;  // a plain variable of the group loop
        if (op.region[0] != kNone) {
          plan_region(op.region[0], true, phase, cur);
          plan_region(op.region[1], true, phase, cur);
        }
        cur = -1;
        continue;
      }
      if (cur == -1) cur = ++phase;
      def_phase[id] = cur;
      for (uint8_t i = 0; i < op.nin; ++i) use(op.in[i], cur);
      if (op.kind == Kind::LocalLoad || op.kind == Kind::LocalStore) touch_local(op.obj, cur);
      if (op.region[0] != kNone) {
        plan_region(op.region[0], false, phase, cur);
        plan_region(op.region[1], false, phase, cur);
      }
    }
  }

  void plan() {
    divergent = ir::divergence(k, &vlocal);
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
    vec_ = vector_ok(0) && k.group[0] % 8 == 0 && !debug_;
    for (size_t i = 0; i < k.locals.size() && vec_; ++i) vec_ = !vlocal[i] || lane_type(k.locals[i]);
    if (vec_) mark_strides();
  }

  Text ref(uint32_t id) override {
    if (vec_) return vref(id);
    if (id < remat.size() && remat[id]) return memo(kScalarMode, id, [&] { return expr(id); });
    Text s = CLike::ref(id);
    if (id < crossing.size() && crossing[id]) s += in_threads ? "[kk_t]" : "[0]";
    return s;
  }
  void statement(uint32_t id) override {
    if (remat[id]) return;
    if (vec_)
      vstatement(id);
    else
      CLike::statement(id);
  }
  Text local(uint32_t slot) override {
    if (vec_) {
      // A local used in several phases has a copy per chunk of lanes (each chunk runs a phase
      // to its end before the next starts), even when uniform: a read-modify-write of it must
      // see the chunk's own previous value.
      const bool lane = vlocal[slot] && !lane_.empty();
      if (!lane && !local_multi[slot]) return local_name(slot);
      return cat(local_name(slot), local_multi[slot] ? (in_threads ? "[kk_c]" : "[0]") : "", lane ? "[" : "",
                 lane ? lane_ : Text(), lane ? "]" : "");
    }
    if (!local_multi[slot]) return local_name(slot);
    return cat(local_name(slot), in_threads ? "[kk_t]" : "[0]");
  }
  std::vector<Text> local_names_;
  /// "l" and the slot, rendered once.
  Text local_name(uint32_t slot) {
    if (local_names_.empty()) local_names_.resize(k.locals.size());
    if (local_names_[slot].empty()) local_names_[slot] = cat("l", num(slot));
    return local_names_[slot];
  }
  void define(uint32_t id, Text e) override {
    if (vec_ && divergent[id]) {
      if (crossing[id])
        line(name(id), "[kk_c] = ", e, ";");
      else
        line("const ", wty(k.ops[id].type), " ", name(id), " = ", e, ";");
    } else if (crossing[id]) {
      line(name(id), vec_ ? " = " : "[kk_t] = ", e, ";");
    } else {
      CLike::define(id, e);
    }
  }
  Text builtin(const ir::Op& op) override {
    auto b = static_cast<ir::Builtin>(op.attr);
    if (!vec_ || (b != ir::Builtin::ThreadId && b != ir::Builtin::LaneId)) return CLike::builtin(op);
    if (b == ir::Builtin::LaneId) return lane_.empty() ? "kk_wi{}" : "0";
    const char ax = "xyz"[op.axis];
    if (lane_.empty()) return cat("kk_wt", ax);
    return op.axis == 0 ? cat("(kk_tx0 + ", lane_, ")") : cat("kk_t", ax, "0");
  }
  Text int_divide(bool mod, Text a, Text b) override {
    Text e = CLike::int_divide(mod, a, b);
    // A uniform division under a lane mask runs only if some lane is active (b may be 0 else).
    if (vec_ && in_threads && lane_.empty() && !mask_.empty()) return cat("(kk_any(", mask_, ") ? ", e, " : 0)");
    return e;
  }

  /// Opens the loops over the group's threads: one per axis of more than one thread, x innermost
  /// so that consecutive threads are consecutive iterations.
  void open_threads() {
    if (in_threads) return;
    const auto& g = k.group;
    open_loops = 0;
    if (vec_) {
      open_chunks();
      return;
    }
    for (int axis = 2; axis >= 0; --axis) {
      const Text v = cat("kk_t", "xyz"[axis]);
      if (g[static_cast<size_t>(axis)] == 1 && axis > 0) continue;
      // The threads of one phase are independent (what one writes, another reads only after a
      // barrier, which ends the phase), so the compiler may vectorise across them.
      if (axis == 0) line("#pragma GCC ivdep");
      line("for (int ", v, " = 0; ", v, " < ", num(g[static_cast<size_t>(axis)]), "; ++", v, ") {");
      ++depth;
      ++open_loops;
    }
    if (g[1] == 1) line("const int kk_ty = 0;");
    if (g[2] == 1) line("const int kk_tz = 0;");
    line("const int kk_t = (kk_tz * ", num(g[1]), " + kk_ty) * ", num(g[0]), " + kk_tx;");
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

  // ---- vector mode ----
  /// Whether stores to buffer b may bypass the cache (kk_args::stream): an output-only buffer,
  /// in vector mode.
  bool streams(size_t b) const { return vec_ && b < 64 && k.buffers[b].access == Access::Write; }
  bool vec_ = false;            ///< threads run KK_W at a time as vector lanes
  ir::Flags vlocal;             ///< local slot that varies between threads (a vector)
  std::vector<int64_t> stride;  ///< an integer's step from one lane to the next (kNoStride: none)
  Text mask_;                   ///< the active lanes ("": all)
  Text lane_;                   ///< rendering the scalar value of this lane ("": whole vectors)
  int temps_ = 0;
  static constexpr int64_t kNoStride = INT64_MIN;

  /// A type a varying value may have in vector mode (f16/bf16 values are f32 inside).
  static bool lane_type(Type t) {
    return t == Type::Bool || t == Type::I32 || t == Type::U32 || t == Type::F32 || t == Type::I64 || t == Type::F64;
  }
  static bool wide(Type t) { return t == Type::I64 || t == Type::F64; }
  /// The vector type of a varying value (a bool is a mask of 0 / -1 ints; 64-bit values take
  /// vectors twice as long, as many lanes).
  static const char* wty(Type t) {
    return t == Type::F32   ? "kk_wf"
           : t == Type::U32 ? "kk_wu"
           : t == Type::F64 ? "kk_wd"
           : t == Type::I64 ? "kk_wl"
                            : "kk_wi";
  }
  /// A mask (kk_wi) as the mask of values of type t.
  static Text mask_for(Type t, Text m) { return wide(t) ? cat("kk_wide(", m, ")") : m; }
  /// The result of a comparison of values of type t as a mask (kk_wi).
  static Text as_mask(Type t, Text c) { return wide(t) ? cat("kk_narrow(", c, ")") : c; }
  Text temp(const char* stem) { return cat(stem, num(temps_++)); }

  /// Whether every varying value of region r (and below) is a scalar of a vector type (no subgroup
  /// operation, no vector load or store of a varying value).
  bool vector_ok(uint32_t r) const {
    if (r == kNone) return true;
    for (uint32_t id : k.regions[r].ops) {
      const ir::Op& op = k.ops[id];
      if (divergent[id]) {
        if (op.kind == Kind::Subgroup || op.kind == Kind::StoreVec || op.lanes != 1) return false;
        if (op.has_value() && !lane_type(op.type)) return false;
      }
      if (op.region[0] != kNone && (!vector_ok(op.region[0]) || !vector_ok(op.region[1]))) return false;
    }
    return true;
  }

  /// Lane strides of the integer values: thread_id(0) steps by 1 (a chunk of lanes lies in one
  /// row of the group), uniform values by 0, sums, differences and multiples by constants follow.
  void mark_strides() {
    stride.assign(k.ops.size(), kNoStride);
    for (uint32_t id = 0; id < k.ops.size(); ++id) {
      const ir::Op& op = k.ops[id];
      if (!divergent[id]) {
        stride[id] = 0;
        continue;
      }
      auto st = [&](int i) { return stride[op.in[static_cast<size_t>(i)]]; };
      auto cst = [&](int i) -> const ir::Op* {
        const ir::Op& o = k.ops[op.in[static_cast<size_t>(i)]];
        return o.kind == Kind::Const && !is_float(o.type) ? &o : nullptr;
      };
      if (op.kind == Kind::Builtin && op.attr == static_cast<uint8_t>(ir::Builtin::ThreadId)) {
        stride[id] = op.axis == 0 ? 1 : 0;
      } else if (op.kind == Kind::For && !divergent[op.in[2]]) {
        stride[id] = st(0);  // every lane steps alike: the lanes keep their distance
      } else if (op.kind == Kind::Cast && !op.attr && is_index(op.type) && is_index(k.ops[op.in[0]].type)) {
        stride[id] = st(0);
      } else if (op.kind == Kind::Binary && st(0) != kNoStride && st(1) != kNoStride && !is_float(op.type)) {
        auto f = static_cast<ir::BinaryFn>(op.attr);
        if (f == ir::BinaryFn::Add) stride[id] = st(0) + st(1);
        if (f == ir::BinaryFn::Sub) stride[id] = st(0) - st(1);
        if (f == ir::BinaryFn::Mul && cst(1)) stride[id] = st(0) * cst(1)->i;
        if (f == ir::BinaryFn::Mul && cst(0)) stride[id] = st(1) * cst(0)->i;
        if (stride[id] != kNoStride && (stride[id] > INT32_MAX || stride[id] < INT32_MIN)) stride[id] = kNoStride;
      }
    }
  }
  bool contiguous(uint32_t idx) const { return stride[idx] == 1; }
  static bool is_index(Type t) { return t == Type::I32 || t == Type::U32 || t == Type::I64; }
  /// Whether the vector math helpers are needed (kCppVectorMath).
  bool vector_math() const {
    // an op kk_wfma, kk_wsqrt, kk_wfloor or kk_wceil renders (for a function: any such op)
    auto uses = [](const ir::Op& op) {
      using U = ir::UnaryFn;
      const auto f = static_cast<U>(op.attr);
      return op.type == Type::F32 &&
             (op.kind == Kind::Fma ||
              (op.kind == Kind::Unary && (f == U::Sqrt || f == U::Rsqrt || f == U::Floor || f == U::Ceil)));
    };
    using U = ir::UnaryFn;
    constexpr uint32_t kVectorUnary = 1u << static_cast<int>(U::Sqrt) | 1u << static_cast<int>(U::Rsqrt) |
                                      1u << static_cast<int>(U::Floor) | 1u << static_cast<int>(U::Ceil);
    for (const auto& f : k.functions)
      if (f->uses.fma_f32 || (f->uses.unary_f32 & kVectorUnary)) return true;
    for (uint32_t id = 0; id < k.ops.size(); ++id)
      if (divergent[id] && uses(k.ops[id])) return true;
    return false;
  }
  /// Lane 0 of a value with a stride, as a scalar expression of lane 0 of its operands (not an
  /// extract from the vector, which the compiler would then compute).
  Text first_lane(uint32_t id) {
    return memo(kFirstLane + in_threads, id, [&] {
      const ir::Op& op = k.ops[id];
      if (!divergent[id] || stride[id] == kNoStride || (op.kind != Kind::Binary && op.kind != Kind::Cast))
        return at_lane(id, "0");
      if (op.kind == Kind::Cast) return cast(op.type, k.ops[op.in[0]].type, first_lane(op.in[0]));
      return cat("(", first_lane(op.in[0]), " ", ir::binary_name(static_cast<ir::BinaryFn>(op.attr)), " ",
                 first_lane(op.in[1]), ")");
    });
  }

  /// The scalar value of lane `l` of a value (any value: uniform ones are already scalars).
  Text at_lane(uint32_t id, Text l) {
    Text saved = lane_;
    lane_ = l;
    Text r = ref(id);
    lane_ = saved;
    return r;
  }
  /// A value as a vector (uniform values broadcast).
  Text bc(uint32_t id) {
    if (divergent[id]) return ref(id);
    return memo(kBroadcast, id, [&] {
      const Text r = ref(id);
      const Type t = k.ops[id].type;
      if (t == Type::Bool) return cat("(kk_wi{} + ((", r, ") ? -1 : 0))");
      // x - 0 is x for every float (x + 0 is not: -0 + 0 is +0), so the compiler drops it.
      return cat("((", r, ") - ", wty(t), "{})");
    });
  }

  Text vref(uint32_t id) {
    const bool lanes = in_threads && divergent[id];
    if (remat[id]) {
      const int slot = lane_slot();
      return memo(slot < 0 ? -1
                  : lanes  ? slot
                           : kUniform + slot,
                  id, [&] { return lanes && lane_.empty() ? vexpr(id) : expr(id); });
    }
    if (!lanes || inlined(id)) return CLike::ref(id);  // a uniform crossing value is one scalar
    if (lane_.empty() && !crossing[id]) return name(id);
    return cat(name(id), crossing[id] ? "[kk_c]" : "", lane_.empty() ? "" : "[", lane_, lane_.empty() ? "" : "]");
  }

  /// Opens the loop over the group's threads in chunks of KK_W lanes.
  void open_chunks() {
    const auto& g = k.group;
    const Text gx = num(g[0]), gxy = num(g[0] * g[1]), gy = num(g[1]);
    line("for (int kk_t0 = 0; kk_t0 < ", num(k.threads()), "; kk_t0 += KK_W) {");
    ++depth;
    open_loops = 1;
    line("const int kk_c = kk_t0 / KK_W;");
    line("const kk_wi kk_wt = kk_t0 + kk_iota;");
    if (g[1] * g[2] == 1) {
      line("const kk_wi kk_wtx = kk_wt, kk_wty = kk_wi{}, kk_wtz = kk_wi{};");
      line("const int kk_tx0 = kk_t0, kk_ty0 = 0, kk_tz0 = 0;");
    } else {
      line("const kk_wi kk_wtx = kk_wt % ", gx, ", kk_wty = kk_wt / ", gx, " % ", gy, ", kk_wtz = kk_wt / ", gxy, ";");
      line("const int kk_tx0 = kk_t0 % ", gx, ", kk_ty0 = kk_t0 / ", gx, " % ", gy, ", kk_tz0 = kk_t0 / ", gxy, ";");
    }
    line("(void)kk_c; (void)kk_wtx; (void)kk_wty; (void)kk_wtz; (void)kk_tx0; (void)kk_ty0; (void)kk_tz0;");
    in_threads = true;
    mask_ = Text();
  }

  /// A loop over the lanes (the active ones under a mask) around `body`.
  template <class F>
  void lane_loop(const F& body) {
    line("for (int kk_l = 0; kk_l < KK_W; ++kk_l) {");
    ++depth;
    if (!mask_.empty()) {
      line("if (!", mask_, "[kk_l]) continue;");
    }
    Text saved = lane_;
    lane_ = "kk_l";
    body();
    lane_ = saved;
    --depth;
    line("}");
  }
  /// Runs `body` only if some lane is active.
  template <class F>
  void if_any(const F& body) {
    if (mask_.empty()) {
      body();
      return;
    }
    line("if (kk_any(", mask_, ")) {");
    ++depth;
    body();
    --depth;
    line("}");
  }

  void vstatement(uint32_t id) {
    const ir::Op& op = k.ops[id];
    if (!in_threads) {
      CLike::statement(id);
      return;
    }
    switch (op.kind) {
      case Kind::Load:
        vload(id);
        return;
      case Kind::Store:
      case Kind::StoreVec:
        vstore(id);
        return;
      case Kind::Atomic: {
        Text t = temp("kk_r");
        line(wty(op.type), " ", t, " = {};");
        lane_loop([&] { line(t, "[kk_l] = ", atomic(op, ref(op.in[0]), ref(op.in[1])), ";"); });
        define(id, t);
        return;
      }
      case Kind::LocalStore:
        if (vlocal[op.obj]) {
          Text dst = local(op.obj), v = bc(op.in[0]);
          line(dst, " = ", (mask_.empty() ? v : mask_for(k.locals[op.obj], mask_) + " ? " + v + " : " + dst), ";");
        } else {
          CLike::statement(id);
        }
        return;
      case Kind::If:
        if (divergent[id])
          vif(id);
        else
          CLike::statement(id);
        return;
      case Kind::For:
      case Kind::While:
        if (divergent[id])
          vloop(id);
        else
          CLike::statement(id);
        return;
      case Kind::Yield:
        if (divergent[op.in[0]]) {  // the lanes whose condition fails leave the loop
          line(mask_, " &= ", bc(op.in[0]), ";");
          line("if (!kk_any(", mask_, ")) break;");
        } else {
          CLike::statement(id);
        }
        return;
      case Kind::LoadVec:
        if (!mask_.empty()) {
          define(id, cat("(kk_any(", mask_, ") ? ", expr(id), " : ", ty(op.type, op.lanes), "())"));
          return;
        }
        break;
      default:
        if (divergent[id] && op.has_value()) {
          define(id, vexpr(id));
          return;
        }
    }
    CLike::statement(id);
  }

  void vload(uint32_t id) {
    const ir::Op& op = k.ops[id];
    const uint32_t idx = op.in[0];
    if (!divergent[id]) {
      Text e = load(op, ref(idx));
      define(id, mask_.empty() ? e : cat("(kk_any(", mask_, ") ? ", e, " : ", ty(op.type, 1), "())"));
      return;
    }
    const bool plain = elem(op) == op.type && op.type != Type::Bool;
    if (mask_.empty() && plain && (contiguous(idx) || stride[idx] == 0)) {  // every lane loads
      const Text at = cat("&", mem(op), "[", first_lane(idx), "]");
      define(id, contiguous(idx) ? cat("kk_wld<", wty(op.type), ">(", at, ")")
                                 : cat("((*", at, ") - ", wty(op.type), "{})"));  // one element, broadcast
      return;
    }
    if (contiguous(idx) && plain) {  // under a mask: a whole vector when every lane is active
      define(id, cat("kk_wldm<", wty(op.type), ">(", mem(op), ", ", first_lane(idx), ", ", mask_, ")"));
      return;
    }
    Text t = temp("kk_r");
    line(wty(op.type), " ", t, " = {};");
    lane_loop([&] {
      Text v = load(op, ref(idx));
      line(t, "[kk_l] = ", (op.type == Type::Bool ? "(" + v + ") ? -1 : 0" : v), ";");
    });
    define(id, t);
  }

  void vstore(uint32_t id) {
    const ir::Op& op = k.ops[id];
    const uint32_t idx = op.in[0], val = op.in[1];
    if (op.kind == Kind::StoreVec || (!divergent[idx] && !divergent[val])) {
      if_any([&] { CLike::statement(id); });
      return;
    }
    const Type vt = k.ops[val].type;
    if (divergent[idx] && contiguous(idx) && elem(op) == vt && vt != Type::Bool) {
      // An output-only buffer's whole vectors may bypass the cache (the launcher says when).
      const Text s = !op.shared && streams(op.obj) ? cat("kk_s", num(op.obj)) : Text();
      if (mask_.empty() && s.empty())
        line("kk_wst(&", mem(op), "[", first_lane(idx), "], ", bc(val), ");");
      else if (mask_.empty())
        line("kk_wsts(&", mem(op), "[", first_lane(idx), "], ", bc(val), ", ", s, ");");
      else
        line("kk_wstm(", mem(op), ", ", first_lane(idx), ", ", bc(val), ", ", mask_, s.empty() ? "" : ", ", s, ");");
    } else {
      lane_loop([&] { store(op, ref(idx), {ref(val)}); });
    }
  }

  /// A varying if: the then-block under (mask & c), the else-block under (mask & ~c).
  void vif(uint32_t id) {
    const ir::Op& op = k.ops[id];
    const Text c = temp("kk_c"), saved = mask_;
    line("const kk_wi ", c, " = ", bc(op.in[0]), ";");
    for (int branch = 0; branch < 2; ++branch) {
      const uint32_t r = op.region[static_cast<size_t>(branch)];
      if (r == kNone || k.regions[r].ops.empty()) continue;
      // The then-block of an if under no mask runs under the condition itself.
      Text m = c;
      if (branch || !saved.empty()) {
        const Text cond = branch ? "~" + c : c;
        m = temp("kk_m");
        line("const kk_wi ", m, " = ", (saved.empty() ? cond : "(" + saved + " & " + cond + ")"), ";");
      }
      line("if (kk_any(", m, ")) {");
      ++depth;
      mask_ = m;
      region(r);
      mask_ = saved;
      --depth;
      line("}");
    }
  }

  /// A loop whose bounds (or condition) differ between lanes: it runs while some lane is in it,
  /// under a mask of those lanes (a lane that leaves stays out).
  void vloop(uint32_t id) {
    const ir::Op& op = k.ops[id];
    const Text lm = temp("kk_m"), saved = mask_;
    Text iv;
    if (op.kind == Kind::For) {
      iv = name(id);
      line(wty(op.type), " ", iv, " = ", bc(op.in[0]), ";");
    }
    line("kk_wi ", lm, " = ", (saved.empty() ? "~kk_wi{}" : saved), ";");
    line("for (;;) {");
    ++depth;
    if (op.kind == Kind::For) {
      line(lm, " &= ", as_mask(op.type, "(" + iv + " < " + bc(op.in[1]) + ")"), ";");
      line("if (!kk_any(", lm, ")) break;");
    }
    mask_ = lm;
    region(op.region[0]);
    if (op.kind == Kind::While) region(op.region[1]);
    mask_ = saved;
    if (op.kind == Kind::For) line(iv, " += ", bc(op.in[2]), ";");
    --depth;
    line("}");
  }

  /// The vector expression of a varying pure op.
  Text vexpr(uint32_t id) {
    const ir::Op& op = k.ops[id];
    auto in = [&](int i) { return bc(op.in[static_cast<size_t>(i)]); };
    const char* w = wty(op.type);
    const bool f32 = op.type == Type::F32, fl = is_float(op.type);
    // f64 math, and f32 math without a vector instruction, runs lane by lane
    const char* lane_fn = f32 ? "[](float kk_x" : "[](double kk_x";
    switch (op.kind) {
      case Kind::Unary: {
        using U = ir::UnaryFn;
        auto f = static_cast<U>(op.attr);
        const Text x = in(0);
        if (f == U::Neg) return cat("(-", x, ")");
        if (f == U::Not) return cat("(~", x, ")");
        if (f == U::Abs) return fl ? cat("kk_wfabs(", x, ")") : cat("(", x, " < 0 ? -", x, " : ", x, ")");
        if (f32 && f == U::Sqrt) return cat("kk_wsqrt(", x, ")");
        if (f32 && f == U::Floor) return cat("kk_wfloor(", x, ")");
        if (f32 && f == U::Ceil) return cat("kk_wceil(", x, ")");
        if (f32 && f == U::Rsqrt) return cat("(1.0f / kk_wsqrt(", x, "))");
        return cat("kk_wmap(", x, ", ", lane_fn, ") { return ", math(f, op.type, "kk_x"), "; })");
      }
      case Kind::Binary: {
        using B = ir::BinaryFn;
        auto f = static_cast<B>(op.attr);
        const Text a = in(0), b = in(1);
        if (f == B::Min) return fl ? cat("kk_wfmin(", a, ", ", b, ")") : cat("(", b, " < ", a, " ? ", b, " : ", a, ")");
        if (f == B::Max) return fl ? cat("kk_wfmax(", a, ", ", b, ")") : cat("(", a, " < ", b, " ? ", b, " : ", a, ")");
        if (f == B::Pow)
          return cat("kk_wmap2(", a, ", ", b, ", ", lane_fn, ", ", f32 ? "float" : "double", " kk_y) { return ",
                     binary_fn(f, op.type, "kk_x", "kk_y"), "; })");
        if ((f == B::Div || f == B::Mod) && !fl && !mask_.empty())  // masked-off lanes divide by 1
          return cat("(", a, f == B::Mod ? " % " : " / ", "(", mask_for(op.type, mask_), " ? ", b, " : ", w,
                     "{} + 1))");
        const char* o = op.type == Type::Bool ? (f == B::And ? "&" : f == B::Or ? "|" : "^") : ir::binary_name(f);
        return cat("(", a, " ", o, " ", b, ")");
      }
      case Kind::Compare: {
        auto f = static_cast<ir::CmpFn>(op.attr);
        const Type t = k.ops[op.in[0]].type;
        const bool order = t == Type::Bool && f != ir::CmpFn::Eq && f != ir::CmpFn::Ne;
        const Text a = in(0), b = in(1);
        const char* neg = order ? "(-" : "";
        const char* close = order ? ")" : "";
        return as_mask(t, cat("(", neg, a, close, " ", ir::cmp_name(f), " ", neg, b, close, ")"));
      }
      case Kind::Select:
        return cat("(", mask_for(op.type, in(0)), " ? ", in(1), " : ", in(2), ")");
      case Kind::Fma:
        return cat(f32 ? "kk_wfma(" : "kk_wfma_lanes(", in(0), ", ", in(1), ", ", in(2), ")");
      case Kind::Cast: {
        const Type from = k.ops[op.in[0]].type;
        const Text x = in(0);
        if (op.attr) return cat("((", w, ")", x, ")");
        if (from == op.type) return x;
        if (op.type == Type::Bool) return as_mask(from, cat("(", x, " != ", wty(from), "{})"));
        if (from == Type::Bool)
          return op.type == Type::I32 ? cat("(-", x, ")") : cat("__builtin_convertvector(-", x, ", ", w, ")");
        return cat("__builtin_convertvector(", x, ", ", w, ")");
      }
      case Kind::LocalLoad:
        return local(op.obj);
      case Kind::Call: {
        Text r = cat(vector_name(*k.functions[op.obj]), "(");
        for (int i = 0; i < op.nin; ++i) append(r, i ? ", " : "", in(i));
        return r + ")";
      }
      default:
        unsupported("this varying operation in vector mode");
    }
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
          line("if (", ref(op.in[0]), ") {");
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
          line("if (!", ref(op.in[0]), ") { break; }");
          break;
        default:
          break;
      }
    }
    close_threads();
  }
};
thread_local std::vector<Cpp::Kept> Cpp::kept_;
thread_local uint32_t Cpp::memo_generation = 0;
thread_local int Cpp::live_renderers = 0;

}  // namespace

std::string render_cpp(const ir::Kernel& k, bool debug) { return Cpp(k, debug).text(); }

}  // namespace kiln::kernel::gen
