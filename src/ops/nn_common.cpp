// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/error.h"
#include "kiln/nn/functional/common.h"

namespace kiln::nn::functional {

Dims IntList::expand(int64_t n, const char* op, const char* what) const {
  if (static_cast<int64_t>(v_.size()) == n) return v_;
  KILN_CHECK(v_.size() == 1, op, what << " must have 1 or " << static_cast<long long>(n) << " values, got " << v_);
  return Dims(static_cast<size_t>(n), v_[0]);
}

}  // namespace kiln::nn::functional
