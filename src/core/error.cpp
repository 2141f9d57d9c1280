// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/error.h"

#include <cstdio>

namespace kiln::detail {

MsgBuilder& MsgBuilder::operator<<(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  s_ += buf;
  return *this;
}

void throw_error(const std::string& msg) { throw Error(msg); }

}  // namespace kiln::detail
