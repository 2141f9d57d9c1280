// SPDX-License-Identifier: MIT OR Apache-2.0
// The little a test or example program needs from a board: text output, an exit code, an
// instruction clock and the stack's high-water mark. Implemented for the QEMU boards
// (startup.cpp: semihosting, SysTick) and for a hosted build (board_host.cpp: stdio).
#ifndef KILN_BOARD_H
#define KILN_BOARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Writes a NUL-terminated string to the host console (semihosting SYS_WRITE0).
void board_puts(const char* s);
/// Ends the program with `code` (0 success); under QEMU the emulator exits with 0 or 1.
void board_exit(int code) __attribute__((noreturn));
/// A free-running 64-bit count of SysTick ticks (the core clock). 0 on the host.
uint64_t board_ticks(void);
/// Instructions executed in `ticks`: under `qemu -icount shift=0` each instruction is 1 ns of
/// the virtual time SysTick counts; the ratio is measured at reset on a loop of known length.
uint64_t board_instructions(uint64_t ticks);
/// Bytes of stack used so far: the deepest word below the stack top that is no longer the
/// paint pattern the reset handler wrote over the whole stack. 0 on the host.
size_t board_stack_used(void);

// Formatting helpers (no printf on the boards).
/// Writes v in decimal.
void board_put_int(long long v);
/// Writes v with `digits` decimals (|v| < 1e9), or "nan"/"inf".
void board_put_float(float v, int digits);

#ifdef __cplusplus
}
#endif

#endif
