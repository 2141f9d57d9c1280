// SPDX-License-Identifier: MIT OR Apache-2.0
// The oneDNN convolution entry points of a build without oneDNN: none applies, so the portable
// kernels run (conv_onednn.cpp is the build with it).
#include "backends/cpu/conv_impl.h"
#include "backends/cpu/onednn.h"

#if !KILN_WITH_ONEDNN

namespace kiln::cpu::conv {
bool onednn_forward(const Geom&, const float*, const float*, const float*, float*, const PostOp&, const Stamps&) {
  return false;
}
bool onednn_maxpool_kept(const float*, uint64_t, const int64_t (&)[4], const PoolAfter&, float*, uint64_t) {
  return false;
}
void set_keep_blocked(bool) {}
int64_t kept_reads() { return 0; }
int64_t one_image_splits() { return 0; }
bool onednn_forward_maxpool(const Geom&, const float*, const float*, const float*, const PostOp&, const PoolAfter&,
                            float*, const Stamps&) {
  return false;
}
bool onednn_forward_pair(const Geom&, const float*, const float*, const float*, const PostOp&, const Geom&,
                         const float*, const float*, const PostOp&, float*) {
  return false;
}
bool onednn_backward_data(const Geom&, const float*, const float*, const float*, float*, uint64_t) { return false; }
bool onednn_backward_weights(const Geom&, const float*, const float*, float*) { return false; }
void register_constant(const void*, size_t) {}
void unregister_constant(const void*) {}
uint64_t registered_constant_id(const void*) { return 0; }
}  // namespace kiln::cpu::conv

#endif
