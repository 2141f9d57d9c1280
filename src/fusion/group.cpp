// SPDX-License-Identifier: MIT OR Apache-2.0
// Running a fused group over its tiles: the plan (signature, elementwise program) and the tile
// loop, alone or as a product's epilogue per row block (Note [Fusion design] in fusion.cpp).
#include "fusion/backend.h"

namespace kiln::fusion {

/// Compiles the steps of g into prog: loads at first use, one register per live value (freed
/// after its last reader), stores right after the step that makes a stored value.
void build_program(const std::vector<Rec>& s, const Group& g, int tail_in, GroupScratch& w) {
  using cpu::vec::PInstr;
  const std::vector<Load>& loads = w.loads;
  const std::vector<std::vector<Src>>& src = w.src;
  const std::vector<char>& store = w.store;
  ProgramCode& prog = w.prog;
  prog.ok = false;
  prog.tail_slot = -1;
  const size_t ns = g.steps.size(), nl = loads.size();
  std::vector<PInstr>& ops = w.ops;
  ops.assign(ns, PInstr{});
  for (size_t k = 0; k < ns; ++k)
    if (!cpu::vec::program_supports(s[g.steps[k]].op, &ops[k])) return;
  for (const Load& L : loads)
    if (L.desc.dtype != DType::F32 && L.desc.dtype != DType::Bool) return;
  // value ids: loads 0..nl-1, steps nl..nl+ns-1; last reader of each
  std::vector<int64_t>& last = w.last;
  last.assign(nl + ns, -1);
  auto vid = [&](const Src& sr) {
    return sr.step >= 0 ? nl + static_cast<size_t>(sr.step) : static_cast<size_t>(sr.load);
  };
  for (size_t k = 0; k < ns; ++k)
    for (const Src& sr : src[k]) last[vid(sr)] = static_cast<int64_t>(k);
  std::vector<int16_t>&reg = w.reg, &free_regs = w.free_regs;
  reg.assign(nl + ns, -1);
  free_regs.clear();
  int nregs = 0;
  auto alloc = [&]() -> int16_t {
    if (!free_regs.empty()) {
      int16_t r = free_regs.back();
      free_regs.pop_back();
      return r;
    }
    return static_cast<int16_t>(nregs++);
  };
  size_t nstored = 0;
  for (size_t k = 0; k < ns; ++k) nstored += store[k] ? 1 : 0;
  // Loads and stores may use the memory directly when no buffer is both read and written.
  auto stored_buf = [&](const Buf* b) {
    for (size_t k = 0; k < ns; ++k)
      if (store[k] && s[g.steps[k]].out[0] == b) return true;
    return false;
  };
  auto loaded_buf = [&](const Buf* b) {
    for (const Load& L : loads)
      if (L.buf == b) return true;
    return false;
  };
  auto is_splat = [&](size_t v) { return v < nl && loads[v].kind == LoadKind::Scalar; };
  // Step k as the post step of the Op just emitted (PInstr::Post): an f32 +, -, * or / of that
  // Op's result, which nothing else reads, and a scalar. Returns the post code (kNoPost: no)
  // and in *scalar_v the scalar's value id.
  auto post_of = [&](size_t k, size_t* scalar_v) {
    const ir::Op& o = s[g.steps[k]].op;
    if (k == 0 || prog.code.empty() || prog.code.back().code != PInstr::Op || prog.code.back().post != PInstr::kNoPost)
      return PInstr::kNoPost;
    const ir::Op& prev = s[g.steps[k - 1]].op;
    if (prev.outputs[0].dtype != DType::F32 || o.outputs[0].dtype != DType::F32 || src[k].size() != 2 ||
        !o.attrs.ints.empty() || !o.attrs.reals.empty() || last[nl + k - 1] != static_cast<int64_t>(k))
      return PInstr::kNoPost;
    for (const auto& t : o.inputs)
      if (t.dtype != DType::F32) return PInstr::kNoPost;
    const bool first = src[k][0].step == static_cast<int>(k - 1);
    const Src& other = src[k][first ? 1 : 0];
    if (src[k][first ? 0 : 1].step != static_cast<int>(k - 1) || other.step >= 0 || !is_splat(vid(other)))
      return PInstr::kNoPost;
    *scalar_v = vid(other);
    switch (o.kind) {
      case OpKind::Add:
        return PInstr::kAdd;
      case OpKind::Sub:
        return first ? PInstr::kSub : PInstr::kRSub;
      case OpKind::Mul:
        return PInstr::kMul;
      case OpKind::Div:
        return first ? PInstr::kDiv : PInstr::kRDiv;
      default:
        return PInstr::kNoPost;
    }
  };
  // After the Op of step k (op, the last instruction so far): its result goes straight to
  // memory when it is stored, then its Store, the tail's copy, and its register is freed when
  // nothing reads it.
  auto finish_step = [&](size_t k, PInstr& op) {
    const bool bool_out = s[g.steps[k]].op.outputs[0].dtype == DType::Bool;
    if (store[k] && !bool_out && !loaded_buf(s[g.steps[k]].out[0])) {
      op.flags = PInstr::kDirect;
      op.slot = static_cast<int32_t>(nl + prog.stored.size());
    }
    const PInstr done = op;  // op is in prog.code, which grows below
    if (store[k]) {
      PInstr st;
      st.code = bool_out ? PInstr::StoreBool : PInstr::Store;
      st.flags = done.flags;
      st.a = done.dst;
      st.slot = static_cast<int32_t>(nl + prog.stored.size());
      prog.stored.push_back(k);
      prog.code.push_back(st);
    }
    if (static_cast<int>(k) == tail_in) {
      PInstr st;
      st.code = bool_out ? PInstr::StoreBool : PInstr::Store;
      st.a = done.dst;
      st.slot = static_cast<int32_t>(nl + nstored);
      prog.tail_slot = st.slot;
      prog.code.push_back(st);
    }
    if (last[nl + k] < 0) free_regs.push_back(done.dst);  // never read again in the group
  };
  prog.stored.clear();
  prog.code.clear();
  for (size_t k = 0; k < ns; ++k) {
    size_t sv = 0;
    if (const PInstr::Post post = post_of(k, &sv); post != PInstr::kNoPost) {
      if (reg[sv] < 0) {  // the scalar's splat, ahead of the Op
        PInstr ld;
        ld.code = PInstr::Splat;
        ld.slot = static_cast<int32_t>(sv);
        ld.dst = reg[sv] = static_cast<int16_t>(nregs++);
        prog.code.insert(prog.code.end() - 1, ld);
      }
      PInstr& op = prog.code.back();
      op.post = post;
      op.p = reg[sv];
      reg[nl + k] = op.dst;  // step k's value is the Op's register now
      reg[nl + k - 1] = -2;
      finish_step(k, op);
      continue;
    }
    PInstr op = ops[k];
    int16_t* operand[3] = {&op.a, &op.b, &op.c};
    for (size_t q = 0; q < src[k].size(); ++q) {
      const size_t v = vid(src[k][q]);
      if (reg[v] < 0) {  // a load, at its first use
        const Load& L = loads[v];
        PInstr ld;
        const bool b = L.desc.dtype == DType::Bool;
        ld.code = L.kind == LoadKind::Scalar ? (b ? PInstr::SplatBool : PInstr::Splat)
                                             : (b ? PInstr::LoadBool : PInstr::Load);
        ld.slot = static_cast<int32_t>(v);
        if (ld.code == PInstr::Load && (L.kind == LoadKind::Gather || !stored_buf(L.buf))) ld.flags = PInstr::kDirect;
        // A splat's register is its alone (run_program fills it at the first chunk only).
        ld.dst = reg[v] =
            ld.code == PInstr::Splat || ld.code == PInstr::SplatBool ? static_cast<int16_t>(nregs++) : alloc();
        prog.code.push_back(ld);
      }
      *operand[q] = reg[v];
    }
    op.dst = reg[nl + k] = alloc();
    prog.code.push_back(op);
    for (size_t q = 0; q < src[k].size(); ++q) {  // inputs read for the last time
      const size_t v = vid(src[k][q]);
      if (last[v] == static_cast<int64_t>(k) && reg[v] >= 0 && !is_splat(v)) {
        free_regs.push_back(reg[v]);
        reg[v] = -2;  // freed (a value read twice by this step is freed once)
      }
    }
    finish_step(k, prog.code.back());
  }
  prog.nregs = nregs;
  prog.nslots = nl + nstored + 1;
  prog.ok = true;
}

/// broadcast pattern, dataflow and store flags (no sizes).
void signature(const std::vector<Rec>& s, const Group& g, const std::vector<char>& store, std::string& os) {
  os.clear();
  auto put = [&](auto v) { os.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(static_cast<uint8_t>(g.S.size()));
  auto put_op = [&](const ir::Op& op) {
    put(static_cast<uint16_t>(op.kind));
    put(static_cast<uint8_t>(op.attrs.dtype));
    put(static_cast<uint8_t>(op.attrs.ints.size()));
    for (auto v : op.attrs.ints) put(v);
    put(static_cast<uint8_t>(op.attrs.reals.size()));
    for (auto v : op.attrs.reals) put(v);
    put(static_cast<uint8_t>(op.inputs.size()));
    for (auto& d : op.inputs) {
      put(static_cast<uint8_t>(d.dtype));
      put(static_cast<uint8_t>(d.shape.size()));
      for (size_t k = 0; k < d.shape.size(); ++k) os.push_back(d.shape[k] == 1 ? 'b' : d.strides[k] == 0 ? 'z' : 'n');
      os.push_back(d.is_contiguous() ? 'c' : 's');
    }
    for (auto& d : op.outputs) {
      put(static_cast<uint8_t>(d.dtype));
      put(static_cast<uint8_t>(d.shape.size()));
    }
  };
  for (size_t i = 0; i < g.steps.size(); ++i) {
    put_op(s[g.steps[i]].op);
    os.push_back(store[i] ? 'S' : '-');
    for (Buf* b : s[g.steps[i]].in) {  // the dataflow: which inputs are earlier steps
      put(gr(b).sig_writer);
    }
    gr(s[g.steps[i]].out[0]).sig_writer = static_cast<int32_t>(i);
  }
  if (g.tail >= 0) {
    os.push_back('T');
    put_op(s[static_cast<size_t>(g.tail)].op);
  }
}

void rows_op(ir::Op& op, const ir::Op& orig, const Shape& S, int64_t k, int64_t rows) {
  const size_t r = S.size();
  Shape in_shape{rows};
  for (size_t q = r - static_cast<size_t>(k); q < r; ++q) in_shape.push_back(S[q]);
  op.inputs[0] = ir::contiguous_desc(in_shape, orig.inputs[0].dtype);
  if (orig.kind != OpKind::Softmax && orig.kind != OpKind::LogSoftmax && orig.kind != OpKind::LayerNorm) {
    op.attrs.ints.clear();
    op.attrs.ints.push_back(ir::ReduceAttrs::decode(orig).keepdim ? 1 : 0);
    for (int64_t q = 1; q <= k; ++q) op.attrs.ints.push_back(q);
  } else if (orig.kind != OpKind::LayerNorm) {
    op.attrs.ints[0] = 1;
  }
  for (size_t q = 0; q < orig.outputs.size(); ++q) {
    const ir::TensorDesc& od = orig.outputs[q];
    Shape os{rows};
    if (od.shape.size() == r)
      for (size_t z = r - static_cast<size_t>(k); z < r; ++z) os.push_back(od.shape[z]);
    op.outputs[q] = ir::contiguous_desc(os, od.dtype);
  }
}

/// One run_group call: the group's stores, plan, loads and program, set up once in this order
/// (KILN_FUSION_DEBUG lines come out in it), then its tiles, run over ranges of elements alone,
/// as a product's epilogue per row block, or as a stage of a row pipeline.
struct FusionBackend::GroupRun {
  FusionBackend& fb;
  const std::vector<Rec>& s;
  const Group& g;
  const Rec* matmul;
  GroupScratch& w;
  const size_t ns;
  const Shape& S;
  const size_t gend;  ///< the stream index of the group's last record
  int tail_in = -1;   ///< the step the tail reads (-1: no tail)
  int64_t rowlen = 1, k_dims = 0;
  Buf* in_scratch = nullptr;  ///< a product result kept in per-thread blocks, never materialised
  int64_t N = 0, tile = 0, ntiles = 0, grain = 1, total_rows = 0;
  /// A long tail's leaf partials (Group::long_tail), written by the tiles, one leaf each.
  mutable std::vector<float> partials;
  int ngather = 0;
  bool streaming = false;
  cpu::vec::ProgramFn kernel = nullptr;

  GroupRun(FusionBackend& fb, const std::vector<Rec>& s, const Group& g, const Rec* matmul, GroupScratch& w)
      : fb(fb),
        s(s),
        g(g),
        matmul(matmul),
        w(w),
        ns(g.steps.size()),
        S(g.S),
        gend(g.tail >= 0 ? static_cast<size_t>(g.tail) : g.steps.back()) {}

  /// Is buffer b read by a (live or not: conservative) op after the group?
  bool read_after(Buf* b) const { return fl(b).last_reader > static_cast<int64_t>(gend); }
  /// Which step values go to memory (w.store, w.tail_store): the last in-group writer of a
  /// buffer that is held by a live tensor or read after the group (or by the tail through
  /// memory, never: the tail reads values). Returns the number of intermediates elided.
  int64_t mark_stores();
  /// The group's plan (cached by signature), its stats and its KILN_FUSION_DEBUG line.
  void find_plan(int64_t elided);
  /// The load of view d of b (one load, one gather per tile, per view); returns its index.
  int add_load(Buf* b, const ir::TensorDesc& d);
  /// Sources and loads of the steps for this run (sizes known now), and the tail's input step.
  void collect_sources();
  /// Materialises everything touched in memory before going parallel.
  void materialise_all();
  /// The tile size and count, thread grain, gather slots, f32 steps and streaming stores.
  void size_tiles(bool last);
  /// Builds the elementwise program when every step has a vector form, and takes its compiled
  /// kernel when one is loaded (large programs).
  void prepare_program();
  /// Runs tiles [tb, te) of the elements [range0, range1); `block`: where element range0 of the
  /// in_scratch product is.
  void tiles(int64_t range0, int64_t range1, int64_t tb, int64_t te, const char* block) const;
  /// Row blocks of the product spread over the threads, each followed by the group's tiles.
  void run_epilogue() const;

  /// Per-thread pointers of one chunk of tiles: step values, loads and program slots.
  struct TileState {
    char* scratch;
    size_t slot;
    std::vector<char*>& val;
    std::vector<char*>& lp;
    std::vector<void*>& prog_ptrs;
    SmallVec<void*, 4> in_p, out_p;
  };
  /// Points lp at the loads of the tile at s0 (gathered into scratch where they must be).
  void load_tile(TileState& ts, int64_t s0, int64_t len, int64_t range0, const char* block) const;
  /// Runs the program (compiled or interpreted) over the tile.
  void program_tile(TileState& ts, int64_t s0, int64_t len) const;
  /// Runs the steps one by one over the tile (ops: per-chunk copies, descriptors rewritten).
  void steps_tile(TileState& ts, std::vector<ir::Op>& ops, int64_t s0, int64_t len) const;
  /// Runs the tail (a row op) over the tile's whole rows, or adds its leaves' partials (a
  /// long tail).
  void tail_tile(TileState& ts, ir::Op& tail_op, int64_t s0, int64_t len) const;
  /// A long tail's result from the partials of every tile, written where the tail stores it.
  void finish_long_tail() const;
};

int64_t FusionBackend::GroupRun::mark_stores() {
  std::vector<char>& store = w.store;
  store.assign(ns, 0);
  int64_t elided = 0;
  for (size_t k = 0; k < ns; ++k) gr(s[g.steps[k]].out[0]).last_step = static_cast<int32_t>(k);
  for (size_t k = 0; k < ns; ++k) {
    Buf* b = s[g.steps[k]].out[0];
    const bool last = gr(b).last_step == static_cast<int32_t>(k);
    if (last && (b->alive || read_after(b)))
      store[k] = 1;
    else
      ++elided;
  }
  std::vector<char>& tail_store = w.tail_store;
  tail_store.clear();
  if (g.tail >= 0)
    for (Buf* b : s[static_cast<size_t>(g.tail)].out) tail_store.push_back(b->alive || read_after(b));
  return elided;
}

void FusionBackend::GroupRun::find_plan(int64_t elided) {
  const std::vector<char>& store = w.store;
  signature(s, g, store, w.sig);
  const std::string& sig = w.sig;
  std::shared_ptr<Plan> plan;
  auto pit = fb.plans_.find(sig);
  if (pit != fb.plans_.end()) {
    plan = pit->second;
    bump(&Stats::plan_hits);
  } else {
    plan = std::make_shared<Plan>();
    plan->id = static_cast<int64_t>(fb.plans_.size()) + 1;
    std::ostringstream text;
    text << "fused " << ns + (g.tail >= 0 ? 1 : 0) << " ops:";
    for (size_t k = 0; k < ns; ++k) {
      text << " " << ir::op_name(s[g.steps[k]].op.kind) << (store[k] ? "*" : "");
    }
    if (g.tail >= 0) text << " | row op " << ir::op_name(s[static_cast<size_t>(g.tail)].op.kind);
    text << "  (* = stored; others stay in tiles)";
    plan->text = text.str();
    fb.plans_.emplace(sig, plan);
    bump(&Stats::plans_built);
  }
  bump(&Stats::fused_groups);
  bump(&Stats::fused_ops, static_cast<int64_t>(ns) + (g.tail >= 0 ? 1 : 0));
  bump(&Stats::intermediates_elided, elided);
  if (debug_on()) {
    std::ostringstream os;
    os << "  plan #" << plan->id << (pit != fb.plans_.end() ? " (cached)" : " (built)") << " over "
       << desc_str(s[g.steps[0]].op.outputs[0]) << ": " << plan->text;
    dbg(os.str());
  }
}

int FusionBackend::GroupRun::add_load(Buf* b, const ir::TensorDesc& d) {
  std::vector<Load>& loads = w.loads;
  const size_t r = S.size();
  for (size_t q = 0; q < loads.size(); ++q)  // one load (one gather per tile) per view
    if (loads[q].buf == b && loads[q].desc == d) return static_cast<int>(q);
  Load L;
  L.buf = b;
  L.desc = d;
  if (d.numel() == 1)
    L.kind = LoadKind::Scalar;
  else if (is_identity(d, S))
    L.kind = LoadKind::Identity;
  else {
    L.kind = LoadKind::Gather;
    L.bstrides = Strides(r, 0);
    const size_t rd = d.shape.size();
    for (size_t q = 0; q < r; ++q) {
      if (q + rd < r) continue;
      size_t jd = q + rd - r;
      L.bstrides[q] = (d.shape[jd] == 1 && S[q] != 1) ? 0 : d.strides[jd];
    }
    // Merge dim q into q+1 where one stride walks both (broadcast runs become long runs).
    Shape gs;
    Strides gb;
    for (size_t q = 0; q < r; ++q) {
      if (!gs.empty() && gb.back() == L.bstrides[q] * S[q]) {
        gs.back() *= S[q];
        gb.back() = L.bstrides[q];
      } else {
        gs.push_back(S[q]);
        gb.push_back(L.bstrides[q]);
      }
    }
    L.gshape = std::move(gs);
    L.bstrides = std::move(gb);
  }
  loads.push_back(std::move(L));
  return static_cast<int>(loads.size() - 1);
}

void FusionBackend::GroupRun::collect_sources() {
  w.loads.clear();
  std::vector<std::vector<Src>>& src = w.src;
  if (src.size() < ns) src.resize(ns);
  for (size_t k = 0; k < ns; ++k) src[k].clear();
  for (size_t k = 0; k < ns; ++k) {
    const Rec& rec = s[g.steps[k]];
    for (size_t q = 0; q < rec.in.size(); ++q) {
      Src sr;
      if (gr(rec.in[q]).step >= 0)
        sr.step = rec.in[q]->step;
      else
        sr.load = add_load(rec.in[q], rec.op.inputs[q]);
      src[k].push_back(sr);
    }
    gr(rec.out[0]).step = static_cast<int32_t>(k);
  }
  if (g.tail >= 0) {
    const size_t r = S.size();
    const Rec& t = s[static_cast<size_t>(g.tail)];
    tail_in = gr(t.in[0]).step;
    k_dims = row_dims(t.op);
    for (size_t q = r - static_cast<size_t>(k_dims); q < r; ++q) rowlen *= S[q];
  }
}

void FusionBackend::GroupRun::materialise_all() {
  // A product's result that nothing reads after the group (and no tensor holds) is never
  // materialised: each block is computed into a thread's scratch and the group reads it there.
  in_scratch = matmul && !matmul->out[0]->alive && !read_after(matmul->out[0]) ? matmul->out[0] : nullptr;
  for (auto& L : w.loads)
    if (L.buf != in_scratch) fb.materialise_unless_internal(L.buf);
  if (matmul) {
    for (Buf* b : matmul->in) fb.materialise(b);
    if (!in_scratch) fb.materialise(matmul->out[0]);
  }
  for (size_t k = 0; k < ns; ++k)
    if (w.store[k]) fb.materialise_unless_internal(s[g.steps[k]].out[0]);
  if (g.tail >= 0) {
    const Rec& t = s[static_cast<size_t>(g.tail)];
    for (size_t q = 1; q < t.in.size(); ++q) fb.materialise(t.in[q]);
    for (size_t q = 0; q < t.out.size(); ++q)
      if (w.tail_store[q]) fb.materialise_unless_internal(t.out[q]);
  }
}

void FusionBackend::GroupRun::size_tiles(bool last) {
  N = shape_numel(S);
  const int64_t rows_per_tile = g.tail >= 0 ? std::max<int64_t>(1, tile_elems() / rowlen) : 0;
  tile = g.tail >= 0 ? std::min(rows_per_tile, N / rowlen) * rowlen : std::min(tile_elems(), N);
  if (g.long_tail) {  // whole leaves per tile; one partial per leaf
    const int64_t leaf = cpu::full::leaf_elems();
    tile = std::max<int64_t>(1, tile_elems() / leaf) * leaf;
    partials.assign(static_cast<size_t>((N + leaf - 1) / leaf), 0.0f);
  }
  ntiles = (N + tile - 1) / tile;
  // A thread takes at least kMinElemsPerThread elements of work per step: longer chains split
  // smaller groups (each element costs a pass of every step).
  grain = std::max<int64_t>(1, kMinElemsPerThread / static_cast<int64_t>(ns + (g.tail >= 0 ? 1 : 0)) / tile);
  total_rows = g.tail >= 0 ? N / rowlen : 0;

  const std::vector<Load>& loads = w.loads;
  std::vector<int>& gather_slot = w.gather_slot;
  gather_slot.assign(loads.size(), -1);
  for (size_t q = 0; q < loads.size(); ++q)
    if (loads[q].kind == LoadKind::Gather) gather_slot[q] = ngather++;
  std::vector<char>& f32_step = w.f32_step;
  f32_step.assign(ns, 0);
  for (size_t k = 0; k < ns; ++k) {
    const ir::Op& op = s[g.steps[k]].op;
    bool all = op.outputs[0].dtype == DType::F32 && op.inputs.size() <= 2 && op.kind != OpKind::Copy &&
               op.kind != OpKind::Cast;
    for (auto& d : op.inputs) all &= d.dtype == DType::F32;
    f32_step[k] = all;
  }
  // Large stored results bypass the caches (non-temporal stores, no read-for-ownership): the
  // tile is computed in scratch and streamed out. Full tiles only (they are 64-byte aligned).
  // Not before a later stage of a row pipeline: it reads the results while they are in the cache.
  streaming = last && tiles::has_stream_stores() && g.tail < 0 && N * 4 >= tiles::kStreamBytes && tile % 16 == 0;
}

void FusionBackend::GroupRun::prepare_program() {
  // When every step has a vector form, the group runs as one elementwise program per tile
  // (cpu::vec::run_program); pointer slots: the loads, then the stored steps, then the tail's
  // input in scratch.
  ProgramCode& prog = w.prog;
  prog.ok = false;
  if (program_enabled()) build_program(s, g, tail_in, w);
  if (prog.ok) {
    bump(&Stats::program_groups);
    int64_t posts = 0;
    for (const cpu::vec::PInstr& in : prog.code) posts += in.post != cpu::vec::PInstr::kNoPost ? 1 : 0;
    if (posts) bump(&Stats::post_steps, posts);
    if (debug_on() && posts)
      dbg("    " + std::to_string(posts) + " scalar op(s) run inside the op before (post steps)");
  }
  if (debug_on() && !prog.ok) dbg("    (runs op by op: a step or load has no program form)");
  // Large programs run as compiled kernels once built (cpu::vec::compiled_program).
  if (prog.ok && N >= jit_min_elements()) {
    kernel = cpu::vec::compiled_program(prog.code.data(), prog.code.size());
    if (kernel) bump(&Stats::compiled_groups);
    if (debug_on()) {
      const std::string why = cpu::vec::jit_unavailable_reason();
      dbg(kernel                                            ? "    runs as a compiled kernel"
          : cpu::vec::jit_mode() == cpu::vec::JitMode::kOff ? "    interpreted (KILN_FUSION_JIT=0)"
          : why.empty() ? "    interpreted (its kernel is compiling, or failed: see the .log in the cache folder)"
                        : "    interpreted (no compiled kernels: " + why + ")");
    }
  }
}

void FusionBackend::GroupRun::load_tile(TileState& ts, int64_t s0, int64_t len, int64_t range0,
                                        const char* block) const {
  const std::vector<Load>& loads = w.loads;
  for (size_t q = 0; q < loads.size(); ++q) {
    const Load& L = loads[q];
    const size_t esz = dtype_size(L.desc.dtype);
    char* base = fb.base_of(L.buf);
    switch (L.kind) {
      case LoadKind::Scalar:
        ts.lp[q] = base + static_cast<size_t>(L.desc.offset) * esz;
        break;
      case LoadKind::Identity:
        ts.lp[q] = L.buf == in_scratch ? const_cast<char*>(block) + static_cast<size_t>(s0 - range0) * esz
                                       : base + static_cast<size_t>(L.desc.offset + s0) * esz;
        break;
      case LoadKind::Gather:
        ts.lp[q] = ts.scratch + ts.slot * (ns + static_cast<size_t>(w.gather_slot[q]));
        tiles::gather(base, esz, L.gshape, L.bstrides, L.desc.offset, s0, len, ts.lp[q]);
        break;
    }
  }
}

void FusionBackend::GroupRun::program_tile(TileState& ts, int64_t s0, int64_t len) const {
  const ProgramCode& prog = w.prog;
  const size_t nloads = w.loads.size();
  std::vector<void*>& ptrs = ts.prog_ptrs;
  for (size_t q = 0; q < nloads; ++q) ptrs[q] = ts.lp[q];
  bool aligned_out = true;
  for (size_t q = 0; q < prog.stored.size(); ++q) {
    const size_t k = prog.stored[q];
    const size_t esz = dtype_size(s[g.steps[k]].op.outputs[0].dtype);
    char* dst = fb.base_of(s[g.steps[k]].out[0]) + static_cast<size_t>(s0) * esz;
    ptrs[nloads + q] = dst;
    ts.val[k] = dst;
    aligned_out &= (reinterpret_cast<uintptr_t>(dst) & 63) == 0 && esz == 4;
  }
  if (prog.tail_slot >= 0) {
    char* tmp = ts.scratch + ts.slot * static_cast<size_t>(tail_in);
    ptrs[static_cast<size_t>(prog.tail_slot)] = tmp;
    ts.val[static_cast<size_t>(tail_in)] = tmp;
  }
  const bool stream = streaming && len == tile && aligned_out;
  if (kernel)
    kernel(ptrs.data(), len, stream ? 1 : 0);
  else
    cpu::vec::run_program(prog.code.data(), prog.code.size(), prog.nregs, ptrs.data(), len, stream);
}

void FusionBackend::GroupRun::steps_tile(TileState& ts, std::vector<ir::Op>& ops, int64_t s0, int64_t len) const {
  const std::vector<Load>& loads = w.loads;
  const std::vector<char>& store = w.store;
  for (size_t k = 0; k < ns; ++k) {
    ir::Op& op = ops[k];
    ts.in_p.clear();
    ts.out_p.clear();
    for (size_t q = 0; q < w.src[k].size(); ++q) {
      ir::TensorDesc& d = op.inputs[q];
      const Src& sr = w.src[k][q];
      bool scalar = sr.load >= 0 && loads[static_cast<size_t>(sr.load)].kind == LoadKind::Scalar;
      d.shape = Shape{scalar ? 1 : len};
      d.strides = Strides{1};
      d.offset = 0;
      ts.in_p.push_back(sr.step >= 0 ? ts.val[static_cast<size_t>(sr.step)] : ts.lp[static_cast<size_t>(sr.load)]);
    }
    ir::TensorDesc& od = op.outputs[0];
    od.shape = Shape{len};
    od.strides = Strides{1};
    od.offset = 0;
    const size_t esz = dtype_size(od.dtype);
    char* dst = store[k] ? fb.base_of(s[g.steps[k]].out[0]) + static_cast<size_t>(s0) * esz : nullptr;
    const bool nt = store[k] && streaming && len == tile;
    ts.val[k] = store[k] && !nt ? dst : ts.scratch + ts.slot * k;
    ts.out_p.push_back(ts.val[k]);
    // f32 rows: the vectorised row functions the CPU kernels call for contiguous f32 runs
    // (same results), without building the kernel's loop for every tile.
    bool done = false;
    if (w.f32_step[k]) {
      const auto* a = static_cast<const float*>(ts.in_p[0]);
      auto* o = reinterpret_cast<float*>(ts.val[k]);
      if (ts.in_p.size() == 1)
        done = cpu::vec::unary_f32(op, a, o, len);
      else if (ts.in_p.size() == 2)
        done = cpu::vec::binary_f32(op.kind, a, op.inputs[0].shape[0] == 1 ? 0 : 1,
                                    static_cast<const float*>(ts.in_p[1]), op.inputs[1].shape[0] == 1 ? 0 : 1, o, len);
    }
    if (!done) kKernels[static_cast<int>(op.kind)](op, ts.in_p.data(), ts.out_p.data());
    if (nt) tiles::stream_copy(dst, ts.val[k], static_cast<size_t>(len) * esz);
  }
}

void FusionBackend::GroupRun::tail_tile(TileState& ts, ir::Op& tail_op, int64_t s0, int64_t len) const {
  if (g.long_tail) {
    cpu::full::leaves(reinterpret_cast<const float*>(ts.val[static_cast<size_t>(tail_in)]), s0, s0 + len,
                      partials.data());
    return;
  }
  const Rec& tr = s[static_cast<size_t>(g.tail)];
  const ir::Op& orig = tr.op;
  const int64_t rows = len / rowlen, row0 = s0 / rowlen;
  rows_op(tail_op, orig, S, k_dims, rows);
  ts.in_p.clear();
  ts.out_p.clear();
  ts.in_p.push_back(ts.val[static_cast<size_t>(tail_in)]);
  for (size_t q = 1; q < tr.in.size(); ++q) ts.in_p.push_back(tr.in[q]->real);
  for (size_t q = 0; q < tr.out.size(); ++q) {
    const ir::TensorDesc& od = orig.outputs[q];
    const int64_t per_row = total_rows ? od.numel() / total_rows : 0;
    const size_t esz = dtype_size(od.dtype);
    ts.out_p.push_back(w.tail_store[q]
                           ? fb.base_of(tr.out[q]) + static_cast<size_t>(row0 * per_row) * esz
                           : ts.scratch + ts.slot * (ns + static_cast<size_t>(ngather) + std::min<size_t>(q, 3)));
  }
  kKernels[static_cast<int>(tail_op.kind)](tail_op, ts.in_p.data(), ts.out_p.data());
}

void FusionBackend::GroupRun::finish_long_tail() const {
  const Rec& tr = s[static_cast<size_t>(g.tail)];
  const float v = cpu::full::finish(tr.op.kind == OpKind::Mean, N, partials.data());
  bump(&Stats::long_reductions);
  if (w.tail_store[0]) std::memcpy(fb.base_of(tr.out[0]), &v, sizeof v);
}

void FusionBackend::GroupRun::tiles(int64_t range0, int64_t range1, int64_t tb, int64_t te, const char* block) const {
  const ProgramCode& prog = w.prog;
  thread_local std::vector<char> scratch_v;
  const size_t slot = static_cast<size_t>(tile) * 8;
  const size_t nslots = ns + static_cast<size_t>(ngather) + 4;
  char* scratch = tiles::aligned(scratch_v, slot * nslots);
  // per-chunk copies of the ops (descriptors rewritten per tile); a program needs none
  std::vector<ir::Op> ops(prog.ok ? 0 : ns);
  for (size_t k = 0; k < ops.size(); ++k) {
    ops[k].kind = s[g.steps[k]].op.kind;
    ops[k].attrs = s[g.steps[k]].op.attrs;
    ops[k].inputs = s[g.steps[k]].op.inputs;
    ops[k].outputs = s[g.steps[k]].op.outputs;
  }
  ir::Op tail_op;
  if (g.tail >= 0) tail_op = s[static_cast<size_t>(g.tail)].op;
  thread_local std::vector<char*> val, lp;
  thread_local std::vector<void*> prog_ptrs;
  val.assign(ns, nullptr);
  lp.assign(w.loads.size(), nullptr);
  prog_ptrs.assign(prog.ok ? prog.nslots : 0, nullptr);
  TileState ts{scratch, slot, val, lp, prog_ptrs, {}, {}};
  for (int64_t t = tb; t < te; ++t) {
    const int64_t s0 = range0 + t * tile, len = std::min(tile, range1 - s0);
    load_tile(ts, s0, len, range0, block);  // loads gathered once per tile
    if (prog.ok)
      program_tile(ts, s0, len);
    else
      steps_tile(ts, ops, s0, len);
    if (g.tail >= 0) tail_tile(ts, tail_op, s0, len);
  }
  tiles::stream_fence();
}

void FusionBackend::GroupRun::run_epilogue() const {
  // Row blocks of the product ([B, M, Ncols], rows counted over B * M, within one batch each),
  // spread over the threads: a thread computes a block's rows (the GEMM runs single-threaded
  // inside the parallel region) and runs the group's tiles over them while they are in its cache.
  const ir::TensorDesc& c = matmul->op.outputs[0];
  const int64_t M = c.shape[1], ncols = c.shape[2];
  const int64_t block_rows = std::min(M, std::max<int64_t>(8, kEpilogueBlock / std::max<int64_t>(ncols, 1)));
  const int64_t per_batch = (M + block_rows - 1) / block_rows;
  parallel_for(c.shape[0] * per_batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t row = (blk / per_batch) * M + (blk % per_batch) * block_rows;
      const int64_t row_end = std::min(row + block_rows, (blk / per_batch + 1) * M);
      char* dst = nullptr;
      if (in_scratch) {
        thread_local std::vector<char> block_v;
        dst = tiles::aligned(block_v, static_cast<size_t>((row_end - row) * ncols) * dtype_size(c.dtype));
      }
      fb.run_matmul_rows(*matmul, row, row_end, dst);
      tiles(row * ncols, row_end * ncols, 0, ((row_end - row) * ncols + tile - 1) / tile, dst);
    }
  });
}

void FusionBackend::run_group(const std::vector<Rec>& s, const Group& g, const Rec* matmul,
                              const std::function<void(const RangeFn&)>* then, bool last) {
  ++g_gepoch;  // fresh per-buffer group scratch (hoisted groups may have run since g was cut)
  while (gs_.size() <= depth_) gs_.emplace_back();
  GroupRun run(*this, s, g, matmul, gs_[depth_]);
  const int64_t elided = run.mark_stores();
  run.find_plan(elided);
  run.collect_sources();
  run.materialise_all();
  run.size_tiles(last);
  run.prepare_program();
  if (debug_on() && matmul)
    dbg("    the epilogue of MatMul " + desc_str(matmul->op.outputs[0]) + ", run per row block of the product");
  if (then) {  // a stage of a row pipeline: the caller runs the tiles per block of rows
    ++depth_;
    struct Depth {
      size_t& d;
      ~Depth() { --d; }
    } restore{depth_};
    const int64_t tile = run.tile;
    (*then)([&](int64_t e0, int64_t e1) { run.tiles(e0, e1, 0, (e1 - e0 + tile - 1) / tile, nullptr); });
    return;
  }
  if (!matmul) {
    parallel_for(run.ntiles, run.grain, [&](int64_t tb, int64_t te) { run.tiles(0, run.N, tb, te, nullptr); });
    if (g.long_tail) run.finish_long_tail();
    return;
  }
  run.run_epilogue();
}

}  // namespace kiln::fusion
