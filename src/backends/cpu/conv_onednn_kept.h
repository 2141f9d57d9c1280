// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The kept blocked forms of convolution outputs (Note [Kept blocked outputs] in
// conv_onednn_kept.cpp): oneDNN's 16-channel blocked layout of a plain tensor, kept by content
// stamp and address so that the next convolution or max pool reads it without a reorder.
#include "backends/cpu/conv_impl.h"
#include "backends/cpu/onednn.h"

#if KILN_WITH_ONEDNN
#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::cpu::conv {

/// The blocked 16-channel layout of activations of these dims (nCw16c, nChw16c, nCdhw16c).
dnnl::memory::desc blocked16(const dnnl::memory::dims& dims);

/// A blocked form of the plain tensor at `ptr` whose content stamp is `stamp`.
struct Kept {
  uint64_t stamp = 0;
  const float* ptr = nullptr;
  dnnl::memory::desc md;  // buf's layout
  onednn::Floats buf;     // md's size + 16 floats (as Operand::buf)
  dnnl::memory mem;       // md over buf (empty: not made yet)
};

constexpr size_t kKeptMax = 16;  // a few live activations, each split in up to a few batch chunks
constexpr size_t kKeptBytes = size_t{32} << 20;

/// Whether kept forms are made and read (KILN_CONV_KEEP=0 or set_keep_blocked(false): not).
bool keep_on();
/// The kept form of the tensor at ptr with this stamp, in layout md; null when there is none.
std::shared_ptr<const Kept> find_kept(uint64_t stamp, const float* ptr, const dnnl::memory::desc& md);
/// The kept forms that together hold x [N, C, H, W] (content stamp `stamp`), blocked by 16
/// channels: the whole tensor's, or one per chunk of images, in image order; empty when they do
/// not cover it.
std::vector<std::shared_ptr<const Kept>> find_kept_parts(uint64_t stamp, const float* x, int64_t N, int64_t C,
                                                         int64_t H, int64_t W);
/// A Kept whose buffer holds layout md (reused from a dropped one of that layout when there is
/// one), not in the store.
std::shared_ptr<Kept> spare_kept(const dnnl::memory::desc& md);
/// Adds e (stamp, ptr, md and buf set) to the store, dropping older forms of the same address
/// and the oldest past the bounds.
void keep(std::shared_ptr<Kept> e);
/// Keeps e as the blocked form of the plain tensor at ptr with content stamp `stamp` when the
/// stamp is known (not 0), keeping is on and e takes at most a quarter of the store's bytes;
/// else hands its buffer back for reuse.
void keep_form(std::shared_ptr<Kept> e, uint64_t stamp, const float* ptr);

}  // namespace kiln::cpu::conv
#endif
