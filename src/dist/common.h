// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// What every backend of kiln::dist shares: the host memory a collective works on, the
// description of a call that the ranks compare, and the elementwise loops on host memory that
// finish a reduction (the division of Mean; the reductions of f16 and bf16).
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dist.h"

namespace kiln::dist::detail {

/// The collectives, as the ranks compare them.
enum class Kind : uint8_t { AllReduce, Broadcast, AllGather, ReduceScatter, Barrier };
const char* kind_name(Kind k);  ///< "all_reduce", ...

/// Host memory holding a tensor's elements for a collective: the tensor's own memory when it is a
/// contiguous tensor in host memory (CPU, plain, fused or with autodiff), else a host copy that
/// finish() writes back. Created on the calling thread; a backend's thread only touches data().
class HostBuffer {
 public:
  HostBuffer() = default;
  /// `read`: the collective reads t's values (a copy is filled; unused for pure outputs).
  HostBuffer(const Tensor& t, bool read);
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const Tensor& tensor() const { return t_; }
  /// After the collective wrote the memory (on the calling thread): a copy goes to the tensor;
  /// the tensor's own memory gets a new version (saved tensors, caches keyed on its contents).
  void finish();

 private:
  Tensor t_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::vector<uint8_t> staging_;
  bool staged_ = false;
};

/// One call as the ranks compare it: op, dtype, reduction, root and shape (the first dims, and a
/// hash of all of them).
struct CallDesc {
  static constexpr int kInts = 16;
  static constexpr int kDims = 8;
  int64_t v[kInts] = {};
  static CallDesc of(Kind kind, const Tensor* t, ReduceOp op, int root);
  Kind kind() const { return static_cast<Kind>(v[0]); }
  /// "all_reduce(sum) of f32 [4, 3]", "broadcast(root 0) of i64 []", "barrier".
  std::string str() const;
  bool operator==(const CallDesc& o) const;
};
/// The error when the ranks' calls differ (descs: one per rank, in rank order); "" when they agree.
std::string mismatch(const std::vector<CallDesc>& descs, int my_rank);

/// Checks that don't depend on other ranks (run once the ranks agree on the call): Mean of a
/// non-floating dtype, Sum of bool is fine, reduce_scatter's first dim, the root. "" when fine.
std::string invalid_call(Kind kind, const Tensor* t, ReduceOp op, int root, int size);

/// In place on host memory: x /= divisor, elementwise, for floating dtypes (Mean after Sum).
void divide(void* data, int64_t n, DType dtype, double divisor);
/// In place: x *= factor (floating dtypes).
void scale(void* data, int64_t n, DType dtype, double factor);
/// inout[i] = op(in[i], inout[i]) for 16-bit floats (f16 or bf16), rounded once per element.
void reduce16(const uint16_t* in, uint16_t* inout, int64_t n, bool bf16, ReduceOp op);

/// KILN_DIST_TIMEOUT (seconds), else 300; as milliseconds.
std::chrono::milliseconds default_timeout(double seconds);
/// "dist.all_reduce": the op name of a collective's messages.
std::string op_label(Kind k);
/// A message without its leading "[op] " (to throw it again under a label).
std::string strip_label(const std::string& msg);

}  // namespace kiln::dist::detail

namespace kiln::dist::detail {
/// The MPI backend (mpi_group.cpp).
std::unique_ptr<ProcessGroup> make_mpi_group(const InitOptions& options);
/// The size a launcher gave this job (mpirun, srun, hydra), read from the environment; 0 when no
/// launcher started this process.
int launcher_size();
}  // namespace kiln::dist::detail
