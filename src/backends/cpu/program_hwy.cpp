// SPDX-License-Identifier: MIT OR Apache-2.0
// The elementwise program interpreter (vec.h: PInstr, run_program). A program is the fused
// kernel of a chain of elementwise ops: it runs chunk by chunk (kProgramChunk elements), every
// instruction over the whole chunk before the next, so values stay in L1 registers of one chunk
// and only the program's loads and stores touch memory. Loads prefetch ahead, so memory streams
// while the arithmetic of a chunk runs. Unary ops take their vector functions from VisitUnary
// (vec_math-inl.h), the table the row kernels use: results are bitwise the unfused ones.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/vec.h"
#include "kiln/error.h"

#if KILN_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/program_hwy.cpp"
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif
// clang-format off
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "backends/cpu/vec_math-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::vec::HWY_NAMESPACE {

bool UnaryHasVector(ir::OpKind kind, const double* r) {
  return VisitUnary(
      kind, r, [](const auto&) {}, [](float, float, const auto&, const auto&) {});
}

namespace {
constexpr int64_t kC = kProgramChunk;

// std::max / std::min as the scalar kernels write them: (a < b ? b : a), (b < a ? b : a).
HWY_INLINE V StdMax(V a, V b) { return hn::IfThenElse(hn::Lt(a, b), b, a); }
HWY_INLINE V StdMin(V a, V b) { return hn::IfThenElse(hn::Lt(b, a), b, a); }
HWY_INLINE V Bool01(D d, hn::Mask<D> m) { return hn::IfThenElseZero(m, hn::Set(d, 1.0f)); }
/// x, opaque to the optimiser: a product passed through it is not contracted into an FMA (the
/// scalar kernels, built without FMA, round the product and the sum separately).
HWY_INLINE V NoContract(V x) {
#if HWY_ARCH_X86
  asm("" : "+v"(x.raw));
#endif
  return x;
}
/// An Op's post step (PInstr::Post) on a vector; K = kNoPost is the identity. The result is
/// opaque first, so that a product and the sum after it are not contracted into an FMA.
template <int K>
struct PostStep {
  V v;
  HWY_INLINE V operator()(V x) const {
    if constexpr (K == PInstr::kNoPost) {
      return x;
    } else {
      x = NoContract(x);
      if constexpr (K == PInstr::kAdd) return hn::Add(x, v);
      if constexpr (K == PInstr::kSub) return hn::Sub(x, v);
      if constexpr (K == PInstr::kRSub) return hn::Sub(v, x);
      if constexpr (K == PInstr::kMul) return hn::Mul(x, v);
      if constexpr (K == PInstr::kDiv) return hn::Div(x, v);
      if constexpr (K == PInstr::kRDiv) return hn::Div(v, x);
    }
  }
};

HWY_INLINE hn::Mask<D> NonZero(D d, V x) { return hn::Not(hn::Eq(x, hn::Zero(d))); }  // NaN: true

/// The ops without a VisitUnary entry: returns false when kind is not one of them.
template <class M1, class M2, class M3>
HWY_INLINE bool OtherOp(D d, const PInstr& in, const M1& map1, const M2& map2, const M3& map3) {
  using ir::OpKind;
  switch (in.kind) {
    case OpKind::Rsqrt:
      map1([d](V x) { return hn::Div(hn::Set(d, 1.0f), hn::Sqrt(x)); });
      return true;
    case OpKind::Sign:
      map1([d](V x) {
        return hn::IfThenElse(hn::Gt(x, hn::Zero(d)), hn::Set(d, 1.0f),
                              hn::IfThenElseZero(hn::Lt(x, hn::Zero(d)), hn::Set(d, -1.0f)));
      });
      return true;
    case OpKind::Hardsigmoid:
      map1([d](V x) {
        const V t = hn::Add(hn::Div(x, hn::Set(d, 6.0f)), hn::Set(d, 0.5f));
        return StdMin(StdMax(t, hn::Zero(d)), hn::Set(d, 1.0f));
      });
      return true;
    case OpKind::Clamp: {
      const V lo = hn::Set(d, static_cast<float>(in.r[0])), hi = hn::Set(d, static_cast<float>(in.r[1]));
      map1([lo, hi](V x) { return StdMin(StdMax(x, lo), hi); });
      return true;
    }
    case OpKind::IsNan:
      map1([d](V x) { return Bool01(d, hn::Not(hn::Eq(x, x))); });
      return true;
    case OpKind::IsFinite:
      map1([d](V x) { return Bool01(d, hn::Lt(hn::Abs(x), hn::Set(d, HUGE_VALF))); });
      return true;
    case OpKind::LogicalNot:
      map1([d](V x) { return Bool01(d, hn::Eq(x, hn::Zero(d))); });
      return true;
    case OpKind::Cast:  // f32/bool -> f32/bool; r[0] != 0: the target is bool
      if (in.r[0] != 0)
        map1([d](V x) { return Bool01(d, NonZero(d, x)); });
      else
        map1([](V x) { return x; });
      return true;
    case OpKind::Copy:
      map1([](V x) { return x; });
      return true;
    case OpKind::Add:
      map2([](V x, V y) { return hn::Add(x, y); });
      return true;
    case OpKind::Sub:
      map2([](V x, V y) { return hn::Sub(x, y); });
      return true;
    case OpKind::Mul:
      map2([](V x, V y) { return hn::Mul(x, y); });
      return true;
    case OpKind::Div:
      map2([](V x, V y) { return hn::Div(x, y); });
      return true;
    case OpKind::Maximum:
    case OpKind::Minimum: {
      const bool mx = in.kind == OpKind::Maximum;
      map2([mx](V x, V y) {  // NaN in either: x + y (a NaN), as the scalar kernel
        const V r = mx ? hn::IfThenElse(hn::Gt(x, y), x, y) : hn::IfThenElse(hn::Lt(x, y), x, y);
        return hn::IfThenElse(hn::And(hn::Eq(x, x), hn::Eq(y, y)), r, hn::Add(x, y));
      });
      return true;
    }
    case OpKind::Eq:
      map2([d](V x, V y) { return Bool01(d, hn::Eq(x, y)); });
      return true;
    case OpKind::Ne:
      map2([d](V x, V y) { return Bool01(d, hn::Not(hn::Eq(x, y))); });
      return true;
    case OpKind::Lt:
      map2([d](V x, V y) { return Bool01(d, hn::Lt(x, y)); });
      return true;
    case OpKind::Le:
      map2([d](V x, V y) { return Bool01(d, hn::Le(x, y)); });
      return true;
    case OpKind::Gt:
      map2([d](V x, V y) { return Bool01(d, hn::Gt(x, y)); });
      return true;
    case OpKind::Ge:
      map2([d](V x, V y) { return Bool01(d, hn::Ge(x, y)); });
      return true;
    case OpKind::LogicalAnd:
      map2([d](V x, V y) { return Bool01(d, hn::And(NonZero(d, x), NonZero(d, y))); });
      return true;
    case OpKind::LogicalOr:
      map2([d](V x, V y) { return Bool01(d, hn::Or(NonZero(d, x), NonZero(d, y))); });
      return true;
    case OpKind::LogicalXor:
      map2([d](V x, V y) { return Bool01(d, hn::Xor(NonZero(d, x), NonZero(d, y))); });
      return true;
    case OpKind::Where:
      map3([d](V c, V x, V y) { return hn::IfThenElse(NonZero(d, c), x, y); });
      return true;
    case OpKind::Lerp:  // the kernel's formula, exact at both ends; products never fused into FMAs
      map3([d](V a, V b, V t) {
        const V diff = hn::Sub(b, a);
        const V lo = hn::Add(a, NoContract(hn::Mul(t, diff)));
        const V hi = hn::Sub(b, NoContract(hn::Mul(diff, hn::Sub(hn::Set(d, 1.0f), t))));
        return hn::IfThenElse(hn::Lt(hn::Abs(t), hn::Set(d, 0.5f)), lo, hi);
      });
      return true;
    default:
      return false;
  }
}
}  // namespace

/// One Op instruction over a chunk: np elements (nv in full vectors, len real ones) of its
/// operands a, b, c into dst, each result through post.
template <class P>
HWY_INLINE void RunOpWith(D d, const PInstr& in, const P& post, const float* a, const float* b, const float* c,
                          float* dst, int64_t np, int64_t nv, int64_t len) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto map1 = [&](const auto& f) {
    for (int64_t j = 0; j < np; j += N) hn::StoreU(post(f(hn::LoadU(d, a + j))), d, dst + j);
  };
  auto map2 = [&](const auto& f) {
    for (int64_t j = 0; j < np; j += N) hn::StoreU(post(f(hn::LoadU(d, a + j), hn::LoadU(d, b + j))), d, dst + j);
  };
  auto map3 = [&](const auto& f) {
    for (int64_t j = 0; j < np; j += N)
      hn::StoreU(post(f(hn::LoadU(d, a + j), hn::LoadU(d, b + j), hn::LoadU(d, c + j))), d, dst + j);
  };
  const bool unary = VisitUnary(
      in.kind, in.r,
      [&](const auto& f) {
        for (int64_t j = 0; j < np; j += N) hn::StoreU(post(f(d, hn::LoadU(d, a + j))), d, dst + j);
      },
      [&](float lo, float hi, const auto& f, const auto& scalar) {  // as MapGuarded
        // Lanes outside [lo, hi] (and the partial last vector) take the scalar function first;
        // the post step then runs on the whole vector.
        const V vlo = hn::Set(d, lo), vhi = hn::Set(d, hi);
        for (int64_t j = 0; j < np; j += N) {
          const V x = hn::LoadU(d, a + j);
          V y = f(d, x);
          if (j >= nv || !hn::AllTrue(d, hn::And(hn::Ge(x, vlo), hn::Le(x, vhi)))) {
            hn::StoreU(y, d, dst + j);
            for (int64_t q = j; q < std::min(j + N, len); ++q) dst[q] = scalar(a[q]);
            y = hn::LoadU(d, dst + j);
          }
          hn::StoreU(post(y), d, dst + j);
        }
      });
  if (!unary) OtherOp(d, in, map1, map2, map3);
}

/// RunOpWith out of line, for the Ops with a post step: inlined six more times, the op
/// table made the interpreter's common loops slower (registers spilled across one function).
template <class P>
HWY_NOINLINE void RunOpOutOfLine(D d, const PInstr& in, const P& post, const float* a, const float* b, const float* c,
                                 float* dst, int64_t np, int64_t nv, int64_t len) {
  RunOpWith(d, in, post, a, b, c, dst, np, nv, len);
}

/// Runs the Op instruction in with its post step (s: the post's splat register).
HWY_INLINE void RunOp(D d, const PInstr& in, const float* s, const float* a, const float* b, const float* c, float* dst,
                      int64_t np, int64_t nv, int64_t len) {
  if (in.post == PInstr::kNoPost) {
    RunOpWith(d, in, PostStep<PInstr::kNoPost>{}, a, b, c, dst, np, nv, len);
    return;
  }
  const V v = hn::Set(d, *s);
  auto run = [&](const auto& post) { RunOpOutOfLine(d, in, post, a, b, c, dst, np, nv, len); };
  switch (in.post) {
    case PInstr::kAdd:
      return run(PostStep<PInstr::kAdd>{v});
    case PInstr::kSub:
      return run(PostStep<PInstr::kSub>{v});
    case PInstr::kRSub:
      return run(PostStep<PInstr::kRSub>{v});
    case PInstr::kMul:
      return run(PostStep<PInstr::kMul>{v});
    case PInstr::kDiv:
      return run(PostStep<PInstr::kDiv>{v});
    case PInstr::kRDiv:
      return run(PostStep<PInstr::kRDiv>{v});
    case PInstr::kNoPost:
      break;
  }
}

void RunProgram(const PInstr* prog, size_t count, int nregs, void* const* ptrs, int64_t n, bool stream) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  thread_local std::vector<float> regs_v;
  thread_local std::vector<float*> rp_v;
  const size_t need = static_cast<size_t>(nregs) * kC + 64;
  if (regs_v.size() < need) regs_v.resize(need);
  if (rp_v.size() < static_cast<size_t>(nregs)) rp_v.resize(static_cast<size_t>(nregs));
  float* regs = regs_v.data();
  regs += (64 - (reinterpret_cast<uintptr_t>(regs) / sizeof(float)) % 16) % 16;  // 64-byte aligned
  auto reg = [&](int16_t r) { return regs + static_cast<int64_t>(r) * kC; };
  // Where each register's chunk is: its own storage, or (kDirect) the loaded or stored memory.
  float** rp = rp_v.data();

  for (int64_t i0 = 0; i0 < n; i0 += kC) {
    const int64_t len = std::min(kC, n - i0);
    const int64_t nv = len / N * N;            // full vectors
    const int64_t np = (len + N - 1) / N * N;  // vectors, the last one padded
    const bool full = len == kC;
    const bool direct_ok = full && !stream;
    for (size_t k = 0; k < count; ++k) {
      const PInstr& in = prog[k];
      const float* a = rp[in.a];
      switch (in.code) {
        case PInstr::Load: {
          float* p = static_cast<float*>(ptrs[in.slot]) + i0;
          if (full) {
            for (int64_t j = 0; j < kC; j += 16) __builtin_prefetch(p + j + kPrefetch);
            if (in.flags & PInstr::kDirect) {
              rp[in.dst] = p;
              break;
            }
          }
          float* dst = rp[in.dst] = reg(in.dst);
          std::memcpy(dst, p, static_cast<size_t>(len) * 4);
          std::memset(dst + len, 0, static_cast<size_t>(np - len) * 4);
          break;
        }
        case PInstr::LoadBool: {
          const uint8_t* p = static_cast<const uint8_t*>(ptrs[in.slot]) + i0;
          if (full) __builtin_prefetch(p + kPrefetch);
          float* dst = rp[in.dst] = reg(in.dst);
          for (int64_t j = 0; j < len; ++j) dst[j] = p[j] ? 1.0f : 0.0f;
          for (int64_t j = len; j < np; ++j) dst[j] = 0.0f;
          break;
        }
        case PInstr::Splat:
        case PInstr::SplatBool: {
          const float v = in.code == PInstr::Splat ? *static_cast<const float*>(ptrs[in.slot])
                                                   : (*static_cast<const uint8_t*>(ptrs[in.slot]) ? 1.0f : 0.0f);
          const V vv = hn::Set(d, v);
          float* dst = rp[in.dst] = reg(in.dst);
          if (i0 > 0) break;  // the register is the splat's alone: filled at the first chunk
          for (int64_t j = 0; j < kC; j += N) hn::Store(vv, d, dst + j);
          break;
        }
        case PInstr::Store: {
          if ((in.flags & PInstr::kDirect) && direct_ok) break;  // the op wrote it
          float* p = static_cast<float*>(ptrs[in.slot]) + i0;
          if (full && stream) {
            for (int64_t j = 0; j < kC; j += N) hn::Stream(hn::LoadU(d, a + j), d, p + j);
          } else {
            std::memcpy(p, a, static_cast<size_t>(len) * 4);
          }
          break;
        }
        case PInstr::StoreBool: {
          uint8_t* p = static_cast<uint8_t*>(ptrs[in.slot]) + i0;
          for (int64_t j = 0; j < len; ++j) p[j] = a[j] != 0.0f;
          break;
        }
        case PInstr::Op: {
          const float* b = rp[in.b];
          const float* c = rp[in.c];
          float* dst = reg(in.dst);
          if ((in.flags & PInstr::kDirect) && direct_ok) {  // straight to memory, owned ahead
            dst = static_cast<float*>(ptrs[in.slot]) + i0;
            for (int64_t j = 0; j < kC; j += 16) __builtin_prefetch(dst + j + kPrefetch, 1);
          }
          rp[in.dst] = dst;
          RunOp(d, in, in.post ? rp[in.p] : nullptr, a, b, c, dst, np, nv, len);
          break;
        }
      }
    }
  }
}

}  // namespace kiln::cpu::vec::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::vec {
HWY_EXPORT(UnaryHasVector);
HWY_EXPORT(RunProgram);

bool program_supports(const ir::Op& op, PInstr* ins) {
  using ir::OpKind;
  auto fb = [](DType t) { return t == DType::F32 || t == DType::Bool; };
  if (op.outputs.size() != 1 || op.inputs.empty() || op.inputs.size() > 3) return false;
  for (const auto& t : op.inputs)
    if (!fb(t.dtype)) return false;
  const DType o = op.outputs[0].dtype;
  if (!fb(o)) return false;
  bool all_f32 = o == DType::F32;
  for (const auto& t : op.inputs) all_f32 &= t.dtype == DType::F32;
  PInstr p;
  p.kind = op.kind;
  for (size_t i = 0; i < op.attrs.reals.size() && i < 3; ++i) p.r[i] = op.attrs.reals[i];
  bool ok = false;
  switch (op.kind) {
    case OpKind::Rsqrt:
    case OpKind::Sign:
    case OpKind::Hardsigmoid:
      ok = all_f32;
      break;
    case OpKind::Clamp: {
      ok = all_f32 && op.attrs.ints.size() >= 2 && op.attrs.reals.size() >= 2;
      if (ok) {  // the bounds as the f32 kernel rounds them; a missing bound is infinite
        p.r[0] = op.attrs.ints[0] ? static_cast<double>(static_cast<float>(op.attrs.reals[0])) : -HUGE_VAL;
        p.r[1] = op.attrs.ints[1] ? static_cast<double>(static_cast<float>(op.attrs.reals[1])) : HUGE_VAL;
      }
      break;
    }
    case OpKind::IsNan:
    case OpKind::IsFinite:
      ok = op.inputs[0].dtype == DType::F32 && o == DType::Bool;
      break;
    case OpKind::LogicalNot:
      ok = o == DType::Bool;
      break;
    case OpKind::Cast:
      p.r[0] = o == DType::Bool ? 1.0 : 0.0;
      ok = true;
      break;
    case OpKind::Copy:
      ok = op.inputs[0].dtype == o;
      break;
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Maximum:
    case OpKind::Minimum:
      ok = all_f32;
      break;
    case OpKind::Eq:
    case OpKind::Ne:
    case OpKind::Lt:
    case OpKind::Le:
    case OpKind::Gt:
    case OpKind::Ge:
      ok = op.inputs.size() == 2 && op.inputs[0].dtype == op.inputs[1].dtype && o == DType::Bool;
      break;
    case OpKind::LogicalAnd:
    case OpKind::LogicalOr:
    case OpKind::LogicalXor:
      ok = op.inputs.size() == 2 && o == DType::Bool;
      break;
    case OpKind::Lerp:
      ok = all_f32 && op.inputs.size() == 3;
      break;
    case OpKind::Where:
      ok = op.inputs.size() == 3 && op.inputs[0].dtype == DType::Bool && op.inputs[1].dtype == o &&
           op.inputs[2].dtype == o;
      break;
    default:
      ok = all_f32 && op.inputs.size() == 1 && HWY_DYNAMIC_DISPATCH(UnaryHasVector)(op.kind, p.r);
      break;
  }
  if (ok && ins) {
    ins->code = PInstr::Op;
    ins->kind = p.kind;
    std::memcpy(ins->r, p.r, sizeof p.r);
  }
  return ok;
}

void run_program(const PInstr* prog, size_t count, int nregs, void* const* ptrs, int64_t n, bool stream) {
  HWY_DYNAMIC_DISPATCH(RunProgram)(prog, count, nregs, ptrs, n, stream);
}
}  // namespace kiln::cpu::vec
#endif  // HWY_ONCE

#else  // !KILN_WITH_HWY: no programs; the fusion decorator runs each op's kernel per tile.
namespace kiln::cpu::vec {
bool program_supports(const ir::Op&, PInstr*) { return false; }
void run_program(const PInstr*, size_t, int, void* const*, int64_t, bool) {
  KILN_CHECK(false, "run_program", "built without Highway");
}
}  // namespace kiln::cpu::vec
#endif
