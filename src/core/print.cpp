// SPDX-License-Identifier: MIT OR Apache-2.0
// STUB: minimal printing; to be replaced by PyTorch-style formatting.
#include <ostream>
#include <sstream>

#include "kiln/ops.h"

namespace kiln {

std::string Tensor::str() const {
  std::ostringstream os;
  os << "tensor(shape=" << to_string(shape()) << ", dtype=" << dtype_name(dtype()) << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace kiln
