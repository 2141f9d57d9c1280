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
#include "ir/attrs.h"
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
#include "backends/cpu/program_ops-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::vec::HWY_NAMESPACE {

int64_t ProgramTarget() { return HWY_TARGET; }

bool UnaryHasVector(ir::OpKind kind, const double* r) {
  return VisitUnary(
      kind, r, [](const auto&) {}, [](float, float, const auto&, const auto&) {});
}

namespace {
constexpr int64_t kC = kProgramChunk;
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
      [&](float lo, float hi, const auto& f, const auto& scalar) {
        // Lanes outside [lo, hi] (and the partial last vector) take the scalar function first;
        // the post step then runs on the whole vector. dst may be a: GuardedVector reads x only.
        for (int64_t j = 0; j < np; j += N) {
          const V y = GuardedVector(d, hn::LoadU(d, a + j), lo, hi, f, scalar, j >= nv ? len - j : 0);
          hn::StoreU(post(y), d, dst + j);
        }
      });
  if (!unary) OtherOp(d, in.kind, in.r, map1, map2, map3);
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
#if HWY_HAVE_SCALABLE
  const float v = *s;  // PostStep's member (sizeless vectors cannot be)
#else
  const V v = hn::Set(d, *s);
#endif
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
HWY_EXPORT(ProgramTarget);

int64_t program_target() { return HWY_DYNAMIC_DISPATCH(ProgramTarget)(); }
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
        const ir::ClampAttrs c = ir::ClampAttrs::decode(op);
        p.r[0] = c.has_min ? static_cast<double>(static_cast<float>(c.min)) : -HUGE_VAL;
        p.r[1] = c.has_max ? static_cast<double>(static_cast<float>(c.max)) : HUGE_VAL;
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
int64_t program_target() { return 0; }
void run_program(const PInstr*, size_t, int, void* const*, int64_t, bool) {
  KILN_CHECK(false, "run_program", "built without Highway");
}
}  // namespace kiln::cpu::vec
#endif
