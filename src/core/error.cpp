// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/error.h"

#include <cstdio>
#include <string>

#include "core/checked.h"

namespace kiln::detail {

MsgBuilder& MsgBuilder::operator<<(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  s_ += buf;
  return *this;
}

void throw_error(const std::string& msg) { throw Error(msg); }

void rethrow_as(const char* api, const Error& e) {
  const std::string msg = e.what(), want = std::string("[") + api + "]";
  const size_t close = msg.find("] ");
  if (msg.rfind(want, 0) == 0 || msg.empty() || msg[0] != '[' || close == std::string::npos) throw e;
  throw Error(want + msg.substr(close + 1));
}

}  // namespace kiln::detail
