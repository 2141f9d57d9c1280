// SPDX-License-Identifier: MIT OR Apache-2.0
// Fused elementwise kernels (kernel/library.h, fused_launch): a chain of elementwise ops in one
// kernel, each op computed by the function of its own kernel (elementwise_ops.cpp), values
// passed between them in registers as their storage would keep them.
#include <string>

#include "kernel/cache.h"
#include "kernel/library.h"

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

/// The parameter block: the count, then an offset per load and per stored step, then a shape
/// and strides (kMaxRank each) per gathered load.
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

/// Whether every value passed from a step or load to a step converts.
bool converts(const FusedSpec& f) {
  for (const FusedSpec::Step& s : f.steps)
    for (size_t q = 0; q < s.src.size(); ++q) {
      const int src = s.src[q];
      const Store from = src >= 0 ? f.steps[static_cast<size_t>(src)].e.output : f.load_store_of(-1 - src);
      if (!convertible(from, s.e.inputs[q])) return false;
    }
  return true;
}

Kernel trace_fused(const FusedSpec& f, const Limits& limits) {
  constexpr uint32_t kGroup = 256;
  return trace(
      f.name,
      [&](Builder& b) {
        b.group_size(kGroup);
        std::vector<Memory> outs, ins;
        int j = 0;
        for (const FusedSpec::Step& s : f.steps)
          if (s.stored) outs.push_back(declare_store(b, s.e.output, named("out", j++), true));
        for (size_t q = 0; q < f.loads.size(); ++q)
          ins.push_back(declare_store(b, f.load_store_of(static_cast<int>(q)), named("in", q), false));
        const Buffer<int32_t> meta = b.input<int32_t>("meta");
        std::vector<std::vector<Val>> reals(f.steps.size());
        for (size_t k = 0; k < f.steps.size(); ++k) {
          const Elementwise& e = f.steps[k].e;
          for (int r = 0; r < e.reals; ++r) reals[k].push_back(real_of(b, e, r, named("s", k, r)));
        }
        const Val i = (group_id(1) * num_groups(0) + group_id(0)) * static_cast<int>(kGroup) + thread_id(0);
        if_(i < meta[kFCount], [&] {
          std::vector<Val> loaded(f.loads.size());
          for (size_t q = 0; q < f.loads.size(); ++q) {
            const FusedSpec::In& L = f.loads[q];
            Val at = meta[kFOffsets + static_cast<int>(q)];
            if (L.kind == FusedLoad::Identity) at = at + i;
            if (L.kind == FusedLoad::Gather) {
              const int g = gather_at(f, static_cast<int>(q));
              Val rem = i;
              for (int d = L.rank - 1; d >= 0; --d) {
                const Val size = meta[g + d];
                at = at + (rem % size) * meta[g + kMaxRank + d];
                rem = rem / size;
              }
            }
            loaded[q] = load_store(ins[q], f.load_store_of(static_cast<int>(q)), at);
          }
          std::vector<Val> val(f.steps.size());
          int o = 0;
          for (size_t k = 0; k < f.steps.size(); ++k) {
            const FusedSpec::Step& s = f.steps[k];
            Val x[kMaxOperands];
            for (size_t q = 0; q < s.src.size(); ++q) {
              const int src = s.src[q];
              const Store from = src >= 0 ? f.steps[static_cast<size_t>(src)].e.output : f.load_store_of(-1 - src);
              const Val v = src >= 0 ? val[static_cast<size_t>(src)] : loaded[static_cast<size_t>(-1 - src)];
              x[q] = convert(v, from, s.e.inputs[q]);
            }
            // What the step's own kernel would store and the next one load.
            val[k] = round_trip(s.e.output, s.e.fn(x, reals[k].data()));
            if (s.stored) {
              const int at = kFOffsets + static_cast<int>(f.loads.size()) + o;
              store_store(outs[static_cast<size_t>(o)], s.e.output, meta[at] + i, val[k]);
              ++o;
            }
          }
        });
      },
      limits);
}

}  // namespace

std::optional<Launch> fused_launch(const std::vector<FusedLoad>& loads, const std::vector<FusedStep>& steps,
                                   int64_t count, bool float64) {
  if (steps.empty() || count > INT32_MAX) return std::nullopt;
  FusedSpec f;
  std::string desc;
  for (const FusedLoad& L : loads) {
    if (!fits_i32(L.desc) || L.shape.size() > static_cast<size_t>(kMaxRank)) return std::nullopt;
    for (size_t d = 0; d < L.shape.size(); ++d)
      if (L.strides[d] < INT32_MIN || L.strides[d] > INT32_MAX || L.shape[d] > INT32_MAX) return std::nullopt;
    f.loads.push_back({L.kind, static_cast<int>(L.shape.size())});
    desc += named("L", L.kind);
    desc += named(".", L.shape.size());
    desc += ';';
  }
  for (const FusedStep& s : steps) {
    std::optional<Elementwise> e = elementwise_of(*s.op);
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
  if (!converts(f)) return std::nullopt;
  f.name = "fused_" + cache::hash128(desc).substr(0, 16);

  Launch l;
  l.name = f.name;
  l.outputs = f.nstored;
  l.inputs = static_cast<int>(loads.size());
  l.meta.assign(static_cast<size_t>(gather_at(f, static_cast<int>(loads.size()))), 0);
  l.meta[kFCount] = static_cast<int32_t>(count);
  for (size_t q = 0; q < loads.size(); ++q) {
    l.meta[kFOffsets + q] = static_cast<int32_t>(loads[q].desc.offset);
    if (loads[q].kind != FusedLoad::Gather) continue;
    const int g = gather_at(f, static_cast<int>(q));
    for (size_t d = 0; d < loads[q].shape.size(); ++d) {
      l.meta[static_cast<size_t>(g) + d] = static_cast<int32_t>(loads[q].shape[d]);
      l.meta[static_cast<size_t>(g + kMaxRank) + d] = static_cast<int32_t>(loads[q].strides[d]);
    }
  }
  int o = 0;
  for (const FusedStep& s : steps)
    if (s.stored)
      l.meta[kFOffsets + loads.size() + static_cast<size_t>(o++)] = static_cast<int32_t>(s.op->outputs[0].offset);
  for (const FusedSpec::Step& s : f.steps) l.push.insert(l.push.end(), s.e.push.begin(), s.e.push.end());
  l.trace = [f](const Limits& limits) { return trace_fused(f, limits); };
  l.groups = count == 0 ? std::array<uint32_t, 3>{0, 0, 0} : elementwise_groups(count);
  return l;
}

}  // namespace kiln::kernel::lib
