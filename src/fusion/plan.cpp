// SPDX-License-Identifier: MIT OR Apache-2.0
// Planning a fused group: which values are stored, its plan (cached by a shape-relative
// signature), the sources of its steps and its elementwise program; then the launch on the inner
// backend's executor (Note [Fusion design] in fusion.cpp).
#include "fusion/backend.h"

namespace kiln::fusion {

/// Compiles the steps of g into prog: loads at first use, one register per live value (freed
/// after its last reader), stores right after the step that makes a stored value.
void build_program(const Executor& ex, const std::vector<Rec>& s, const Group& g, int tail_in, GroupScratch& w) {
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
    if (!ex.program_step(s[g.steps[k]].op, &ops[k])) return;
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
    ir::ReduceAttrs r = ir::ReduceAttrs::decode(orig);  // over dims 1..k of [rows, row dims...]
    r.dims.clear();
    for (int64_t q = 1; q <= k; ++q) r.dims.push_back(q);
    r.encode(op);
  } else if (orig.kind != OpKind::LayerNorm) {
    ir::ScanAttrs a = ir::ScanAttrs::decode(orig);
    a.dim = 1;
    a.encode(op);
  }
  for (size_t q = 0; q < orig.outputs.size(); ++q) {
    const ir::TensorDesc& od = orig.outputs[q];
    Shape os{rows};
    if (od.shape.size() == r)
      for (size_t z = r - static_cast<size_t>(k); z < r; ++z) os.push_back(od.shape[z]);
    op.outputs[q] = ir::contiguous_desc(os, od.dtype);
  }
}

namespace {

/// Plans one group into w: stores, plan, sources, program.
struct GroupPlan {
  const std::vector<Rec>& s;
  const Group& g;
  GroupScratch& w;
  const size_t ns;

  GroupPlan(const std::vector<Rec>& s, const Group& g, GroupScratch& w) : s(s), g(g), w(w), ns(g.steps.size()) {}

  /// Which step values go to memory (w.store, w.tail_store): the last in-group writer of a
  /// buffer that is held by a live tensor or read after the group (or by the tail through
  /// memory, never: the tail reads values). Returns the number of intermediates elided.
  int64_t mark_stores() {
    std::vector<char>& store = w.store;
    store.assign(ns, 0);
    int64_t elided = 0;
    for (size_t k = 0; k < ns; ++k) gr(s[g.steps[k]].out[0]).last_step = static_cast<int32_t>(k);
    for (size_t k = 0; k < ns; ++k) {
      Buf* b = s[g.steps[k]].out[0];
      const bool last = gr(b).last_step == static_cast<int32_t>(k);
      if (last && needed_after(b, g))
        store[k] = 1;
      else
        ++elided;
    }
    std::vector<char>& tail_store = w.tail_store;
    tail_store.clear();
    if (g.tail >= 0)
      for (Buf* b : s[static_cast<size_t>(g.tail)].out) tail_store.push_back(needed_after(b, g));
    return elided;
  }

  /// The group's plan (cached by signature in plans), its stats and its KILN_FUSION_DEBUG line.
  void find_plan(std::unordered_map<std::string, std::shared_ptr<Plan>>& plans, int64_t elided) {
    const std::vector<char>& store = w.store;
    signature(s, g, store, w.sig);
    const std::string& sig = w.sig;
    std::shared_ptr<Plan> plan;
    auto pit = plans.find(sig);
    if (pit != plans.end()) {
      plan = pit->second;
      bump(&Stats::plan_hits);
    } else {
      plan = std::make_shared<Plan>();
      plan->id = static_cast<int64_t>(plans.size()) + 1;
      std::ostringstream text;
      text << "fused " << ns + (g.tail >= 0 ? 1 : 0) << " ops:";
      for (size_t k = 0; k < ns; ++k) {
        text << " " << ir::op_name(s[g.steps[k]].op.kind) << (store[k] ? "*" : "");
      }
      if (g.tail >= 0) text << " | row op " << ir::op_name(s[static_cast<size_t>(g.tail)].op.kind);
      text << "  (* = stored; others stay in tiles)";
      plan->text = text.str();
      plans.emplace(sig, plan);
      bump(&Stats::plans_built);
    }
    bump(&Stats::fused_groups);
    bump(&Stats::fused_ops, static_cast<int64_t>(ns) + (g.tail >= 0 ? 1 : 0));
    bump(&Stats::intermediates_elided, elided);
    if (debug_on()) {
      std::ostringstream os;
      os << "  plan #" << plan->id << (pit != plans.end() ? " (cached)" : " (built)") << " over "
         << desc_str(s[g.steps[0]].op.outputs[0]) << ": " << plan->text;
      dbg(os.str());
    }
  }

  /// The load of view d of b (one load, one gather per tile, per view); returns its index.
  int add_load(Buf* b, const ir::TensorDesc& d) {
    std::vector<Load>& loads = w.loads;
    const Shape& S = g.S;
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

  /// Sources and loads of the steps (sizes known now), and the tail's input step and rows.
  void collect_sources() {
    w.loads.clear();
    w.tail_in = -1;
    w.rowlen = 1;
    w.k_dims = 0;
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
      const size_t r = g.S.size();
      const Rec& t = s[static_cast<size_t>(g.tail)];
      w.tail_in = gr(t.in[0]).step;
      w.k_dims = row_dims(t.op);
      for (size_t q = r - static_cast<size_t>(w.k_dims); q < r; ++q) w.rowlen *= g.S[q];
    }
  }

  /// The elementwise program when every step has a vector form on ex (w.prog.ok), its stats.
  void program(const Executor& ex) {
    ProgramCode& prog = w.prog;
    prog.ok = false;
    if (program_enabled()) build_program(ex, s, g, w.tail_in, w);
    if (prog.ok) {
      bump(&Stats::program_groups);
      int64_t posts = 0;
      for (const PInstr& in : prog.code) posts += in.post != PInstr::kNoPost ? 1 : 0;
      if (posts) bump(&Stats::post_steps, posts);
      if (debug_on() && posts)
        dbg("    " + std::to_string(posts) + " scalar op(s) run inside the op before (post steps)");
    }
    if (debug_on() && !prog.ok) dbg("    (no program form: the executor runs the steps its own way)");
  }
};

}  // namespace

GroupScratch& FusionBackend::plan_group(const std::vector<Rec>& s, const Group& g, size_t slot) {
  ++g_gepoch;  // fresh per-buffer group scratch (hoisted groups may have run since g was cut)
  while (gs_.size() <= slot) gs_.emplace_back();
  GroupPlan p(s, g, gs_[slot]);
  const int64_t elided = p.mark_stores();
  p.find_plan(plans_, elided);
  p.collect_sources();
  p.program(*exec_);
  return gs_[slot];
}

void FusionBackend::run_group(const std::vector<Rec>& s, const Group& g, const Rec* matmul) {
  GroupScratch& w = plan_group(s, g, 0);
  exec_->run_group(*this, GroupLaunch{s, g, w, matmul});
}

}  // namespace kiln::fusion
