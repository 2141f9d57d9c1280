// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Memory helpers of the CPU fusion executor's tiles (fusion_group.cpp): gathering a broadcast or
// strided operand into a contiguous tile, and streaming stores of large results past the caches.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/shape.h"

namespace kiln::cpu::tiles {

/// Copies elements [s, s + len) (in row-major order over shape S) of an operand whose element
/// at index i is at base + (offset + sum_d i_d * bst[d]) * esz into dst, contiguous.
void gather(const char* base, size_t esz, const Shape& S, const Strides& bst, int64_t offset, int64_t s, int64_t len,
            char* dst);

/// Whether this build has non-temporal stores (stream_copy bypasses the caches).
bool has_stream_stores();
/// Copies n bytes with non-temporal stores when dst, src and n are 16-byte aligned (else memcpy).
void stream_copy(char* dst, const char* src, size_t n);
/// Orders the stream_copy stores of this thread before its later stores.
void stream_fence();
/// Results of at least this many bytes are streamed past the caches.
constexpr int64_t kStreamBytes = int64_t{16} << 20;

/// A 64-byte aligned pointer to at least n bytes of v (grown as needed).
char* aligned(std::vector<char>& v, size_t n);

}  // namespace kiln::cpu::tiles
