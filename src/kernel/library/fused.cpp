// SPDX-License-Identifier: MIT OR Apache-2.0
// Fused kernels (kernel/library.h): a chain of elementwise ops in one kernel, each op computed
// by the function of its own kernel (elementwise_ops.cpp), values passed between them in
// registers as their storage would keep them. The chain runs alone (fused_launch), as the
// input of a row op's own kernel (fused_tail_launch) or as a product's epilogue (MatMul, Conv:
// fused_product_launch): a Source those kernels read through.
#include <memory>
#include <optional>
#include <string>

#include "kernel/cache.h"
#include "kernel/library.h"
#include "kiln/error.h"
#include "kiln/shape.h"

namespace kiln::kernel::lib {

namespace {

/// prefix followed by the numbers (built by appending: GCC 12 warns, -Wrestrict, on
/// "literal" + std::string here).
std::string named(const char* prefix, size_t a, int b = -1) {
  std::string s = prefix;
  s += std::to_string(a);
  if (b >= 0) {
    s += 'r';
    s += std::to_string(b);
  }
  return s;
}

/// A fused kernel's structure: what its trace needs, owned (the launch outlives the ops).
struct FusedSpec {
  std::string name;
  struct In {
    FusedLoad::Kind kind;
    int rank = 0;  ///< Gather
  };
  std::vector<In> loads;
  struct Step {
    Elementwise e;
    std::vector<int> src;
    bool stored = false;
  };
  std::vector<Step> steps;
  int nstored = 0;
  /// The load's storage as step `k` reads it: from the step's own kernel.
  Store load_store_of(int load) const {
    for (const Step& s : steps)
      for (size_t q = 0; q < s.src.size(); ++q)
        if (s.src[q] == -1 - load) return s.e.inputs[q];
    return Store::F32;
  }
};

/// The chain's parameter block (at `base` in the kernel's): the count, then an offset per load
/// and per stored step, then a shape and strides (kMaxRank each) per gathered load.
enum : int { kFCount = 0, kFOffsets = 1 };
int gather_at(const FusedSpec& f, int load) {
  int at = kFOffsets + static_cast<int>(f.loads.size()) + f.nstored;
  for (int q = 0; q < load; ++q)
    if (f.loads[static_cast<size_t>(q)].kind == FusedLoad::Gather) at += 2 * kMaxRank;
  return at;
}

/// Whether a value of storage `from` converts to one of storage `to` (convert): both hold the
/// same dtype, as 8-byte integers (i64, or f64 moved as its bits) or bool as a byte or a truth
/// value. (f64 bits and values do not convert: the language has no 64-bit bitcast.)
bool convertible(Store from, Store to) {
  auto int64 = [](Store s) { return s == Store::X64 || s == Store::I64; };
  auto byte = [](Store s) { return s == Store::U8 || s == Store::B8; };
  return from == to || (int64(from) && int64(to)) || (byte(from) && byte(to));
}

/// Value v of storage `from` as storage `to` holds it (convertible).
Val convert(Val v, Store from, Store to) {
  if (from == to) return v;
  if (to == Store::B8) return v != 0u;
  if (to == Store::U8) return select(v, Val(1u), Val(0u));
  return v;  // X64 and I64: both I64 values
}

/// Whether every value passed from a step or load to a step converts (`given`: the storage of
/// Given loads' value).
bool converts(const FusedSpec& f, std::optional<Store> given) {
  for (const FusedSpec::Step& s : f.steps)
    for (size_t q = 0; q < s.src.size(); ++q) {
      const int src = s.src[q];
      const Store from = src >= 0 ? f.steps[static_cast<size_t>(src)].e.output : f.load_store_of(-1 - src);
      if (!convertible(from, s.e.inputs[q])) return false;
      if (src < 0 && f.loads[static_cast<size_t>(-1 - src)].kind == FusedLoad::Given &&
          (!given || !convertible(*given, from)))
        return false;
    }
  return true;
}

/// The chain of a fused kernel, computed where the kernel reads its input (Source).
class Chain final : public Source {
 public:
  /// The chain f with its parameter block at meta[base]; at() gives step `result`'s value.
  Chain(const FusedSpec& f, int base, int result) : f_(f), base_(base), result_(result) {}

  void outputs(Builder& b) override {
    int j = 0;
    for (const FusedSpec::Step& s : f_.steps)
      if (s.stored) outs_.push_back(declare_store(b, s.e.output, named("out", j++), true));
  }
  void inputs(Builder& b, Store s, const std::string&) override {
    want_ = s;
    for (size_t q = 0; q < f_.loads.size(); ++q) {
      ins_.emplace_back();
      if (f_.loads[q].kind != FusedLoad::Given)
        ins_.back() = declare_store(b, f_.load_store_of(static_cast<int>(q)), named("in", q), false);
    }
  }
  void scalars(Builder& b, const Buffer<int32_t>& meta) override {
    meta_.emplace(meta);
    reals_.resize(f_.steps.size());
    for (size_t k = 0; k < f_.steps.size(); ++k) {
      const Elementwise& e = f_.steps[k].e;
      for (int r = 0; r < e.reals; ++r) reals_[k].push_back(real_of(b, e, r, named("s", k, r)));
    }
  }
  Val at(Val e, const Val* store_if) override {
    const Val v = run(e, store_if != nullptr, store_if, nullptr);
    const Store from = f_.steps[static_cast<size_t>(result_)].e.output;
    KILN_CHECK(convertible(from, want_), "kernel", "a fused row op reads a value of another storage");
    return convert(v, from, want_);
  }
  void epilogue(Val e, Val given) override { run(e, true, nullptr, &given); }

  /// The steps at element i: stores the stored steps' values when `store` (under *cond when
  /// given); returns step result_'s value (invalid when result_ < 0).
  Val run(Val i, bool store, const Val* cond, const Val* given) {
    const Buffer<int32_t>& meta = *meta_;
    std::vector<Val> loaded(f_.loads.size());
    for (size_t q = 0; q < f_.loads.size(); ++q) {
      const FusedSpec::In& L = f_.loads[q];
      if (L.kind == FusedLoad::Given) {
        loaded[q] = *given;
        continue;
      }
      Val at = meta[base_ + kFOffsets + static_cast<int>(q)];
      if (L.kind == FusedLoad::Identity) at = at + i;
      if (L.kind == FusedLoad::Gather) {
        const int g = base_ + gather_at(f_, static_cast<int>(q));
        Val rem = i;
        for (int d = L.rank - 1; d >= 0; --d) {
          const Val size = meta[g + d];
          at = at + (rem % size) * meta[g + kMaxRank + d];
          rem = rem / size;
        }
      }
      loaded[q] = load_store(*ins_[q], f_.load_store_of(static_cast<int>(q)), at);
    }
    std::vector<Val> val(f_.steps.size());
    int o = 0;
    for (size_t k = 0; k < f_.steps.size(); ++k) {
      const FusedSpec::Step& s = f_.steps[k];
      Val x[kMaxOperands];
      for (size_t q = 0; q < s.src.size(); ++q) {
        const int src = s.src[q];
        const Store from = src >= 0 ? f_.steps[static_cast<size_t>(src)].e.output : f_.load_store_of(-1 - src);
        const Val v = src >= 0 ? val[static_cast<size_t>(src)] : loaded[static_cast<size_t>(-1 - src)];
        x[q] = convert(v, from, s.e.inputs[q]);
      }
      // What the step's own kernel would store and the next one load.
      val[k] = round_trip(s.e.output, s.e.fn(x, reals_[k].data()));
      if (!s.stored) continue;
      const int at = base_ + kFOffsets + static_cast<int>(f_.loads.size()) + o;
      const Memory& out = outs_[static_cast<size_t>(o++)];
      const auto put = [&] { store_store(out, s.e.output, meta[at] + i, val[k]); };
      if (!store) continue;
      if (cond)
        if_(*cond, put);
      else
        put();
    }
    return result_ >= 0 ? val[static_cast<size_t>(result_)] : Val();
  }

 private:
  const FusedSpec& f_;
  const int base_, result_;
  Store want_ = Store::F32;
  std::vector<Memory> outs_;
  std::vector<std::optional<Memory>> ins_;
  std::optional<Buffer<int32_t>> meta_;
  std::vector<std::vector<Val>> reals_;
};

/// The Source of a buffer: element e loaded from it.
class BufferSource final : public Source {
 public:
  explicit BufferSource(bool declares) : declares_(declares) {}
  void outputs(Builder&) override {}
  void inputs(Builder& b, Store s, const std::string& name) override {
    if (!declares_) return;
    store_ = s;
    in_.emplace(declare_store(b, s, name, false));
  }
  void scalars(Builder&, const Buffer<int32_t>&) override {}
  Val at(Val e, const Val*) override { return load_store(*in_, store_, e); }
  void epilogue(Val, Val) override {}

 private:
  bool declares_;
  Store store_ = Store::F32;
  std::optional<Memory> in_;
};

Kernel trace_fused(const FusedSpec& f, const Limits& limits) {
  constexpr uint32_t kGroup = 256;
  return trace(
      f.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        Chain c(f, 0, -1);
        c.outputs(b);
        c.inputs(b, Store::F32, "in");
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        c.scalars(b, meta);
        const Val i = (group_id(1) * num_groups(0) + group_id(0)) * static_cast<int>(kGroup) + thread_id(0);
        if_(i < meta[kFCount], [&] { c.run(i, true, nullptr, nullptr); });
      },
      limits);
}

/// The chain of loads and steps (nothing when a step has no fused form on the device);
/// desc gets its description (a part of the kernel's name).
std::optional<FusedSpec> spec_of(const std::vector<FusedLoad>& loads, const std::vector<FusedStep>& steps, bool float64,
                                 std::optional<Store> given, std::string& desc) {
  if (steps.empty()) return std::nullopt;
  FusedSpec f;
  for (const FusedLoad& L : loads) {
    if (L.kind != FusedLoad::Given && !fits_i32(L.desc)) return std::nullopt;
    if (L.shape.size() > static_cast<size_t>(kMaxRank)) return std::nullopt;
    for (size_t d = 0; d < L.shape.size(); ++d)
      if (L.strides[d] < INT32_MIN || L.strides[d] > INT32_MAX || L.shape[d] > INT32_MAX) return std::nullopt;
    f.loads.push_back({L.kind, static_cast<int>(L.shape.size())});
    desc += named("L", L.kind);
    desc += named(".", L.shape.size());
    desc += ';';
  }
  for (const FusedStep& s : steps) {
    std::optional<Elementwise> e = elementwise_of(*s.op, float64);
    if (!e || e->with_index || (e->needs_f64 && !float64) || e->push.size() != static_cast<size_t>(e->reals) ||
        e->inputs.size() != s.src.size() || (s.stored && !fits_i32(s.op->outputs[0])))
      return std::nullopt;
    for (Store st : e->inputs)
      if (st == Store::F64 && !float64) return std::nullopt;
    if (e->output == Store::F64 && !float64) return std::nullopt;
    desc += e->name + e->tag + (s.stored ? "!" : "");
    for (int q : s.src) {
      desc += ',';
      desc += std::to_string(q);
    }
    desc += ";";
    f.nstored += s.stored;
    f.steps.push_back({std::move(*e), s.src, s.stored});
  }
  if (!converts(f, given)) return std::nullopt;
  return f;
}

/// Appends the chain's parameter block over `count` elements to meta.
void append_meta(const FusedSpec& f, const std::vector<FusedLoad>& loads, const std::vector<FusedStep>& steps,
                 int64_t count, std::vector<int32_t>& meta) {
  const size_t base = meta.size();
  meta.resize(base + static_cast<size_t>(gather_at(f, static_cast<int>(loads.size()))), 0);
  int32_t* m = meta.data() + base;
  m[kFCount] = static_cast<int32_t>(count);
  for (size_t q = 0; q < loads.size(); ++q) {
    m[kFOffsets + q] = static_cast<int32_t>(loads[q].desc.offset);
    if (loads[q].kind != FusedLoad::Gather) continue;
    const int g = gather_at(f, static_cast<int>(q));
    for (size_t d = 0; d < loads[q].shape.size(); ++d) {
      m[static_cast<size_t>(g) + d] = static_cast<int32_t>(loads[q].shape[d]);
      m[static_cast<size_t>(g + kMaxRank) + d] = static_cast<int32_t>(loads[q].strides[d]);
    }
  }
  int o = 0;
  for (const FusedStep& s : steps)
    if (s.stored)
      m[kFOffsets + loads.size() + static_cast<size_t>(o++)] = static_cast<int32_t>(s.op->outputs[0].offset);
}

/// The push constants of the chain's steps, in order.
std::vector<Arg> chain_push(const FusedSpec& f) {
  std::vector<Arg> push;
  for (const FusedSpec::Step& s : f.steps) push.insert(push.end(), s.e.push.begin(), s.e.push.end());
  return push;
}

/// The loads the kernel binds (all but the Given ones).
int bound_loads(const FusedSpec& f) {
  int n = 0;
  for (const FusedSpec::In& L : f.loads) n += L.kind != FusedLoad::Given;
  return n;
}

}  // namespace

std::unique_ptr<Source> buffer_source() { return std::make_unique<BufferSource>(true); }
std::unique_ptr<Source> no_source() { return std::make_unique<BufferSource>(false); }

std::optional<Launch> fused_launch(const std::vector<FusedLoad>& loads, const std::vector<FusedStep>& steps,
                                   int64_t count, bool float64) {
  std::string desc;
  std::optional<FusedSpec> f = count > INT32_MAX ? std::nullopt : spec_of(loads, steps, float64, std::nullopt, desc);
  if (!f) return std::nullopt;
  f->name = "fused_" + cache::hash128(desc).substr(0, 16);
  Launch l;
  l.name = f->name;
  l.outputs = f->nstored;
  l.inputs = static_cast<int>(loads.size());
  append_meta(*f, loads, steps, count, l.meta);
  l.push = chain_push(*f);
  l.trace = [f = *f](const Limits& limits) { return trace_fused(f, limits); };
  l.groups = count == 0 ? std::array<uint32_t, 3>{0, 0, 0} : elementwise_groups(count);
  return l;
}

std::optional<Launch> fused_tail_launch(const std::vector<FusedLoad>& loads, const std::vector<FusedStep>& steps,
                                        int result, const kiln::ir::Op& tail, bool float64) {
  if (tail.inputs.empty() || result < 0 || static_cast<size_t>(result) >= steps.size()) return std::nullopt;
  // The row op reads the group's element i at offset i.
  kiln::ir::Op t = tail;
  kiln::ir::TensorDesc& x = t.inputs[0];
  if (x.strides != contiguous_strides(x.shape)) return std::nullopt;
  x.offset = 0;
  std::string desc;
  std::optional<FusedSpec> f = spec_of(loads, steps, float64, std::nullopt, desc);
  std::optional<Launch> row = launch_of(t, float64);
  if (!f || !row || row->host_check || !row->variants.empty()) return std::nullopt;
  const std::optional<Store> in = storage_of(x.dtype, false);
  if (!in || !convertible(f->steps[static_cast<size_t>(result)].e.output, *in)) return std::nullopt;
  desc += named("R", static_cast<size_t>(result));  // the step the row op reads
  desc += row->name;
  const std::string name = "tail_" + cache::hash128(desc).substr(0, 16);
  std::function<Kernel(const Limits&, Source&)> rt;
  if (std::optional<Reduce> r = reduce_of(t, float64)) {
    r->name = name;
    rt = [r = *r](const Limits& limits, Source& s) { return trace_reduce_from(r, limits, s); };
  } else if (std::optional<Softmax> m = softmax_of(t)) {
    m->name = name;
    rt = [m = *m](const Limits& limits, Source& s) { return trace_softmax_from(m, limits, s); };
  } else if (std::optional<Norm> n = norm_of(t)) {
    n->name = name;
    rt = [n = *n](const Limits& limits, Source& s) { return trace_norm_from(n, limits, s); };
  } else {
    return std::nullopt;
  }
  Launch l = std::move(*row);
  l.name = name;
  const int base = static_cast<int>(l.meta.size());
  append_meta(*f, loads, steps, x.numel(), l.meta);
  std::vector<Arg> push = chain_push(*f);
  push.insert(push.end(), l.push.begin(), l.push.end());
  l.push = std::move(push);
  l.outputs += f->nstored;
  l.inputs = bound_loads(*f) + static_cast<int>(tail.inputs.size()) - 1;
  l.trace = [f = *f, base, result, rt](const Limits& limits) {
    Chain c(f, base, result);
    return rt(limits, c);
  };
  return l;
}

std::optional<Launch> fused_product_launch(const kiln::ir::Op& product, bool keep, const std::vector<FusedLoad>& loads,
                                           const std::vector<FusedStep>& steps, bool float64) {
  if (product.outputs.size() != 1 || !product.outputs[0].is_contiguous()) return std::nullopt;
  std::optional<MatMul> m = matmul_of(product);
  std::optional<Conv> cv = m ? std::nullopt : conv_of(product);
  if (cv && cv->kind == kiln::ir::OpKind::ConvWeightGrad) cv.reset();  // a group per result there
  if (!m && !cv) return std::nullopt;
  std::string desc;
  std::optional<FusedSpec> f = spec_of(loads, steps, float64, m ? m->value : cv->value, desc);
  std::optional<Launch> row = launch_of(product, float64);
  if (!f || !row) return std::nullopt;
  desc += m ? m->name : cv->name;
  desc += keep ? "+" : "";
  const std::string name = "epi_" + cache::hash128(desc).substr(0, 16);
  Launch l = std::move(*row);
  l.name = name;
  l.variants.clear();  // one tile: the epilogue is traced with it
  l.tune_key.clear();
  const int base = static_cast<int>(l.meta.size());
  append_meta(*f, loads, steps, product.outputs[0].numel(), l.meta);
  std::vector<Arg> push = chain_push(*f);
  push.insert(push.end(), l.push.begin(), l.push.end());
  l.push = std::move(push);
  l.outputs = (keep ? 1 : 0) + f->nstored;
  l.inputs = static_cast<int>(product.inputs.size()) + bound_loads(*f);
  if (m) {
    m->name = name;
    l.trace = [f = *f, base, spec = *m, keep](const Limits& limits) {
      Chain c(f, base, -1);
      return trace_matmul_into(spec, limits, c, keep);
    };
  } else {
    cv->name = name;
    l.trace = [f = *f, base, spec = *cv, keep](const Limits& limits) {
      Chain c(f, base, -1);
      return trace_conv_into(spec, limits, c, keep);
    };
  }
  return l;
}

}  // namespace kiln::kernel::lib
