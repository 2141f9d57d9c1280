// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kernel/args.h"

#include <string>

#include "kiln/error.h"

namespace kiln::kernel::detail {

void check_launch(const ir::Kernel& k, Dim3 groups, const std::vector<Arg>& args, int64_t max_yz) {
  const size_t nb = k.buffers.size(), ns = k.scalars.size();
  if (args.size() != nb + ns)
    throw Error(k.prefix() + "takes " + std::to_string(nb) + " buffers and " + std::to_string(ns) + " scalars, got " +
                std::to_string(args.size()) + " arguments");
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    const bool want_buf = i < nb;
    const Type want = want_buf ? k.buffers[i].type : k.scalars[i - nb].type;
    const std::string what =
        want_buf ? "buffer '" + k.buffers[i].name + "'" : "scalar '" + k.scalars[i - nb].name + "'";
    if (a.is_buffer != want_buf || a.type != want)
      throw Error(k.prefix() + "argument " + std::to_string(i) + " (" + what + ") must be " +
                  (want_buf ? "a buffer of " : "a scalar of ") + std::string(type_name(want)) + ", got " +
                  (a.is_buffer ? "a buffer of " : "a scalar of ") + std::string(type_name(a.type)));
    if (want_buf && a.count < 0) throw Error(k.prefix() + what + " has a negative element count");
    if (want_buf && !a.ptr && a.count > 0) throw Error(k.prefix() + what + " is null");
  }
  const int64_t limit[3] = {INT32_MAX, max_yz, max_yz};
  const int64_t g[3] = {groups.x, groups.y, groups.z};
  for (int d = 0; d < 3; ++d)
    if (g[d] < 0 || g[d] > limit[d])
      throw Error(k.prefix() + "a grid of " + std::to_string(groups.x) + "x" + std::to_string(groups.y) + "x" +
                  std::to_string(groups.z) + " groups is out of range");
}

}  // namespace kiln::kernel::detail
