// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The backend-neutral description of a fused elementwise kernel: straight-line code over
// registers, one instruction per load, op or store. The fusion planner writes it (fusion/plan.cpp);
// a backend's executor runs it (the CPU: an interpreter over chunks of a tile and compiled
// machine code, src/backends/cpu/program_*.cpp). Bool values are held as 0.0f / 1.0f.
#include <cstdint>

#include "ir/op.h"

namespace kiln::fusion {

/// One instruction of a fused program. Pointer slots index the launch's pointer array: element
/// i of a Load/Store slot is at offset i; a Splat slot holds one value.
struct PInstr {
  enum Code : uint8_t {
    Load,       ///< reg dst <- f32 elements of ptrs[slot]
    LoadBool,   ///< reg dst <- bool bytes of ptrs[slot], as 0/1
    Splat,      ///< reg dst <- the one f32 at ptrs[slot]
    SplatBool,  ///< reg dst <- the one bool at ptrs[slot]
    Op,         ///< reg dst <- kind(a[, b[, c]])
    Store,      ///< f32 elements of ptrs[slot] <- reg a
    StoreBool,  ///< bool bytes of ptrs[slot] <- reg a != 0
  };
  /// Flags: kDirect on a Load, the register may point at the memory itself (nothing in the
  /// program writes that buffer); on an Op, the result goes straight to the memory of the
  /// Store that follows it (ptrs[slot]), which then has nothing to do (full chunks, no stream).
  static constexpr uint8_t kDirect = 1;
  /// An Op's post step: an f32 add, subtract, multiply or divide with the splat register p,
  /// applied to each vector of the result before it is written (kRSub: p - r, kRDiv: p / r).
  /// It stands for the next op of a chain that reads the result alone with a scalar, which then
  /// costs no pass over the chunk of its own; the bits are those of the two ops run apart.
  enum Post : uint8_t { kNoPost, kAdd, kSub, kRSub, kMul, kDiv, kRDiv };
  Code code = Op;
  uint8_t flags = 0;
  Post post = kNoPost;
  ir::OpKind kind{};
  int16_t dst = 0, a = 0, b = 0, c = 0, p = 0;  ///< registers
  int32_t slot = 0;  ///< Load/Splat/Store (and a kDirect Op): index into run_program's pointers
  double r[3] = {};  ///< Op: the op's real attributes (Clamp: lo, hi)
};

}  // namespace kiln::fusion
