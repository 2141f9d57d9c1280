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
    op.attrs.ints.push_back(orig.attrs.ints[0]);
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

void FusionBackend::run_group(const std::vector<Rec>& s, const Group& g, const Rec* matmul,
                              const std::function<void(const RangeFn&)>* then, bool last) {
  ++g_gepoch;  // fresh per-buffer group scratch (hoisted groups may have run since g was cut)
  const size_t ns = g.steps.size();
  const size_t gend = g.tail >= 0 ? static_cast<size_t>(g.tail) : g.steps.back();
  // Is buffer b read by a (live or not: conservative) op after the group?
  auto read_after = [&](Buf* b) { return fl(b).last_reader > static_cast<int64_t>(gend); };
  // Which step values go to memory: the last in-group writer of a buffer that is held by a live
  // tensor or read after the group (or by the tail through memory, never: the tail reads values).
  while (gs_.size() <= depth_) gs_.emplace_back();
  GroupScratch& w = gs_[depth_];
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

  // The plan (cached by signature).
  signature(s, g, store, w.sig);
  const std::string& sig = w.sig;
  std::shared_ptr<Plan> plan;
  auto pit = plans_.find(sig);
  if (pit != plans_.end()) {
    plan = pit->second;
    bump(&Stats::plan_hits);
  } else {
    plan = std::make_shared<Plan>();
    plan->id = static_cast<int64_t>(plans_.size()) + 1;
    std::ostringstream text;
    text << "fused " << ns + (g.tail >= 0 ? 1 : 0) << " ops:";
    for (size_t k = 0; k < ns; ++k) {
      text << " " << ir::op_name(s[g.steps[k]].op.kind) << (store[k] ? "*" : "");
    }
    if (g.tail >= 0) text << " | row op " << ir::op_name(s[static_cast<size_t>(g.tail)].op.kind);
    text << "  (* = stored; others stay in tiles)";
    plan->text = text.str();
    plans_.emplace(sig, plan);
    bump(&Stats::plans_built);
  }
  bump(&Stats::fused_groups);
  bump(&Stats::fused_ops, static_cast<int64_t>(ns) + (g.tail >= 0 ? 1 : 0));
  bump(&Stats::intermediates_elided, elided);
  if (debug_on()) {
    std::ostringstream os;
    os << "  plan #" << plan->id << (pit != plans_.end() ? " (cached)" : " (built)") << " over "
       << desc_str(s[g.steps[0]].op.outputs[0]) << ": " << plan->text;
    dbg(os.str());
  }

  // Sources and loads for this run (sizes known now).
  std::vector<Load>& loads = w.loads;
  loads.clear();
  std::vector<std::vector<Src>>& src = w.src;
  if (src.size() < ns) src.resize(ns);
  for (size_t k = 0; k < ns; ++k) src[k].clear();
  const Shape& S = g.S;
  const size_t r = S.size();
  auto add_load = [&](Buf* b, const ir::TensorDesc& d) {
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
  };
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
  int tail_in = -1;
  int64_t rowlen = 1, k_dims = 0;
  if (g.tail >= 0) {
    const Rec& t = s[static_cast<size_t>(g.tail)];
    tail_in = gr(t.in[0]).step;
    k_dims = row_dims(t.op);
    for (size_t q = r - static_cast<size_t>(k_dims); q < r; ++q) rowlen *= S[q];
  }
  // Materialise everything touched in memory before going parallel.

  // A product's result that nothing reads after the group (and no tensor holds) is never
  // materialised: each block is computed into a thread's scratch and the group reads it there.
  Buf* const in_scratch = matmul && !matmul->out[0]->alive && !read_after(matmul->out[0]) ? matmul->out[0] : nullptr;
  for (auto& L : loads)
    if (L.buf != in_scratch) materialise_unless_internal(L.buf);
  if (matmul) {
    for (Buf* b : matmul->in) materialise(b);
    if (!in_scratch) materialise(matmul->out[0]);
  }
  for (size_t k = 0; k < ns; ++k)
    if (store[k]) materialise_unless_internal(s[g.steps[k]].out[0]);
  if (g.tail >= 0) {
    const Rec& t = s[static_cast<size_t>(g.tail)];
    for (size_t q = 1; q < t.in.size(); ++q) materialise(t.in[q]);
    for (size_t q = 0; q < t.out.size(); ++q)
      if (tail_store[q]) materialise_unless_internal(t.out[q]);
  }

  const int64_t N = shape_numel(S);
  const int64_t rows_per_tile = g.tail >= 0 ? std::max<int64_t>(1, tile_elems() / rowlen) : 0;
  const int64_t tile = g.tail >= 0 ? std::min(rows_per_tile, N / rowlen) * rowlen : std::min(tile_elems(), N);
  const int64_t ntiles = (N + tile - 1) / tile;
  // A thread takes at least kMinElemsPerThread elements of work per step: longer chains split
  // smaller groups (each element costs a pass of every step).
  const int64_t grain =
      std::max<int64_t>(1, kMinElemsPerThread / static_cast<int64_t>(ns + (g.tail >= 0 ? 1 : 0)) / tile);
  const int64_t total_rows = g.tail >= 0 ? N / rowlen : 0;

  std::vector<int>& gather_slot = w.gather_slot;
  gather_slot.assign(loads.size(), -1);
  int ngather = 0;
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
  const bool streaming =
      last && tiles::has_stream_stores() && g.tail < 0 && N * 4 >= tiles::kStreamBytes && tile % 16 == 0;
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
  cpu::vec::ProgramFn kernel = nullptr;
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

  if (debug_on() && matmul)
    dbg("    the epilogue of MatMul " + desc_str(matmul->op.outputs[0]) + ", run per row block of the product");
  // Tiles [tb, te) of the elements [range0, range1); `block`: where element range0 of the
  // in_scratch product is.
  auto tiles_of = [&](int64_t range0, int64_t range1, int64_t tb, int64_t te, const char* block) {
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
    lp.assign(loads.size(), nullptr);
    prog_ptrs.assign(prog.ok ? prog.nslots : 0, nullptr);
    SmallVec<void*, 4> in_p, out_p;
    for (int64_t t = tb; t < te; ++t) {
      const int64_t s0 = range0 + t * tile, len = std::min(tile, range1 - s0);
      // loads gathered once per tile
      for (size_t q = 0; q < loads.size(); ++q) {
        const Load& L = loads[q];
        const size_t esz = dtype_size(L.desc.dtype);
        char* base = base_of(L.buf);
        switch (L.kind) {
          case LoadKind::Scalar:
            lp[q] = base + static_cast<size_t>(L.desc.offset) * esz;
            break;
          case LoadKind::Identity:
            lp[q] = L.buf == in_scratch ? const_cast<char*>(block) + static_cast<size_t>(s0 - range0) * esz
                                        : base + static_cast<size_t>(L.desc.offset + s0) * esz;
            break;
          case LoadKind::Gather:
            lp[q] = scratch + slot * (ns + static_cast<size_t>(gather_slot[q]));
            tiles::gather(base, esz, L.gshape, L.bstrides, L.desc.offset, s0, len, lp[q]);
            break;
        }
      }
      if (prog.ok) {
        std::vector<void*>& ptrs = prog_ptrs;
        for (size_t q = 0; q < loads.size(); ++q) ptrs[q] = lp[q];
        bool aligned_out = true;
        for (size_t q = 0; q < prog.stored.size(); ++q) {
          const size_t k = prog.stored[q];
          const size_t esz = dtype_size(s[g.steps[k]].op.outputs[0].dtype);
          char* dst = base_of(s[g.steps[k]].out[0]) + static_cast<size_t>(s0) * esz;
          ptrs[loads.size() + q] = dst;
          val[k] = dst;
          aligned_out &= (reinterpret_cast<uintptr_t>(dst) & 63) == 0 && esz == 4;
        }
        if (prog.tail_slot >= 0) {
          char* tmp = scratch + slot * static_cast<size_t>(tail_in);
          ptrs[static_cast<size_t>(prog.tail_slot)] = tmp;
          val[static_cast<size_t>(tail_in)] = tmp;
        }
        const bool stream = streaming && len == tile && aligned_out;
        if (kernel)
          kernel(ptrs.data(), len, stream ? 1 : 0);
        else
          cpu::vec::run_program(prog.code.data(), prog.code.size(), prog.nregs, ptrs.data(), len, stream);
      }
      for (size_t k = 0; k < ns && !prog.ok; ++k) {
        ir::Op& op = ops[k];
        in_p.clear();
        out_p.clear();
        for (size_t q = 0; q < src[k].size(); ++q) {
          ir::TensorDesc& d = op.inputs[q];
          const Src& sr = src[k][q];
          bool scalar = sr.load >= 0 && loads[static_cast<size_t>(sr.load)].kind == LoadKind::Scalar;
          d.shape = Shape{scalar ? 1 : len};
          d.strides = Strides{1};
          d.offset = 0;
          in_p.push_back(sr.step >= 0 ? val[static_cast<size_t>(sr.step)] : lp[static_cast<size_t>(sr.load)]);
        }
        ir::TensorDesc& od = op.outputs[0];
        od.shape = Shape{len};
        od.strides = Strides{1};
        od.offset = 0;
        const size_t esz = dtype_size(od.dtype);
        char* dst = store[k] ? base_of(s[g.steps[k]].out[0]) + static_cast<size_t>(s0) * esz : nullptr;
        const bool nt = store[k] && streaming && len == tile;
        val[k] = store[k] && !nt ? dst : scratch + slot * k;
        out_p.push_back(val[k]);
        // f32 rows: the vectorised row functions the CPU kernels call for contiguous f32 runs
        // (same results), without building the kernel's loop for every tile.
        bool done = false;
        if (f32_step[k]) {
          const auto* a = static_cast<const float*>(in_p[0]);
          auto* o = reinterpret_cast<float*>(val[k]);
          if (in_p.size() == 1)
            done = cpu::vec::unary_f32(op, a, o, len);
          else if (in_p.size() == 2)
            done = cpu::vec::binary_f32(op.kind, a, op.inputs[0].shape[0] == 1 ? 0 : 1,
                                        static_cast<const float*>(in_p[1]), op.inputs[1].shape[0] == 1 ? 0 : 1, o, len);
        }
        if (!done) kKernels[static_cast<int>(op.kind)](op, in_p.data(), out_p.data());
        if (nt) tiles::stream_copy(dst, val[k], static_cast<size_t>(len) * esz);
      }
      if (g.tail >= 0) {
        const Rec& tr = s[static_cast<size_t>(g.tail)];
        const ir::Op& orig = tr.op;
        const int64_t rows = len / rowlen, row0 = s0 / rowlen;
        rows_op(tail_op, orig, S, k_dims, rows);
        in_p.clear();
        out_p.clear();
        in_p.push_back(val[static_cast<size_t>(tail_in)]);
        for (size_t q = 1; q < tr.in.size(); ++q) in_p.push_back(tr.in[q]->real);
        for (size_t q = 0; q < tr.out.size(); ++q) {
          const ir::TensorDesc& od = orig.outputs[q];
          const int64_t per_row = total_rows ? od.numel() / total_rows : 0;
          const size_t esz = dtype_size(od.dtype);
          out_p.push_back(tail_store[q]
                              ? base_of(tr.out[q]) + static_cast<size_t>(row0 * per_row) * esz
                              : scratch + slot * (ns + static_cast<size_t>(ngather) + std::min<size_t>(q, 3)));
        }
        kKernels[static_cast<int>(tail_op.kind)](tail_op, in_p.data(), out_p.data());
      }
    }
    tiles::stream_fence();
  };
  if (then) {  // a stage of a row pipeline: the caller runs the tiles per block of rows
    ++depth_;
    struct Depth {
      size_t& d;
      ~Depth() { --d; }
    } restore{depth_};
    (*then)([&](int64_t e0, int64_t e1) { tiles_of(e0, e1, 0, (e1 - e0 + tile - 1) / tile, nullptr); });
    return;
  }
  if (!matmul) {
    parallel_for(ntiles, grain, [&](int64_t tb, int64_t te) { tiles_of(0, N, tb, te, nullptr); });
    return;
  }
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
      run_matmul_rows(*matmul, row, row_end, dst);
      tiles_of(row * ncols, row_end * ncols, 0, ((row_end - row) * ncols + tile - 1) / tile, dst);
    }
  });
}

}  // namespace kiln::fusion
