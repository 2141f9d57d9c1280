// SPDX-License-Identifier: MIT OR Apache-2.0
// board.h on a hosted system (the native and sanitizer builds of the micro tests): stdio.
#include <cstdio>
#include <cstdlib>

#include "board.h"

extern "C" void board_puts(const char* s) { std::fputs(s, stdout); }
extern "C" void board_exit(int code) {
  std::fflush(stdout);
  std::exit(code);
}
extern "C" uint64_t board_ticks(void) { return 0; }
extern "C" uint64_t board_instructions(uint64_t) { return 0; }
extern "C" size_t board_stack_used(void) { return 0; }
