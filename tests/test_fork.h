// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Tests of forked children: waiting for one with a deadline.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kiln::test {

/// Waits up to `seconds` for child `pid` to exit and returns its wait status; a child still
/// running then is killed, and -1 is returned.
inline int wait_child(pid_t pid, int seconds) {
  int status = -1;
  for (int i = 0; i < seconds * 10 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) ::usleep(100000);
  if (::waitpid(pid, &status, WNOHANG) == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
  }
  return status;
}

}  // namespace kiln::test
