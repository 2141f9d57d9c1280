// SPDX-License-Identifier: MIT OR Apache-2.0
// Bare-metal startup for the QEMU Cortex-M boards (mps2_an385.ld: Cortex-M3; mps3_an547.ld:
// Cortex-M55 with FPU and Helium): the vector table, a reset handler that enables the FPU/MVE
// (CPACR), copies .data, clears .bss, paints the stack and calls main, and board.h over ARM
// semihosting (`bkpt 0xAB`) and SysTick. Also memcpy/memset, the only C library functions the
// micro kernels need.
#include "board.h"

extern "C" {
extern uint32_t __data_start, __data_end, __data_load, __bss_start, __bss_end, __stack_limit, __stack_top;
extern void (*__init_array_start[])(void);
extern void (*__init_array_end[])(void);
int main(void);
void Reset_Handler(void);
void Fault_Handler(void);
void SysTick_Handler(void);
}

namespace {

constexpr uint32_t kPaint = 0xC0DEC0DEu;
volatile uint32_t g_wraps = 0;

// One semihosting call: r0 = operation, r1 = its argument; returns r0.
int semihost(int op, const void* arg) {
  register int r0 __asm__("r0") = op;
  register const void* r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

volatile uint32_t& reg(uint32_t addr) { return *reinterpret_cast<volatile uint32_t*>(addr); }

uint32_t g_instr_per_tick_q10 = 0;  // instructions per SysTick tick, times 1024

// Times a loop of a known instruction count (2 per iteration) to find instructions per tick:
// under `qemu -icount shift=0` one instruction is 1 ns of the virtual time SysTick counts.
void calibrate() {
  const uint32_t iterations = 1u << 16;
  while (reg(0xE000E018) == 0) {
  }  // the first tick loads the reload value
  const uint64_t t0 = board_ticks();
  uint32_t n = iterations;
  __asm__ volatile("1: subs %0, %0, #1\n bne 1b" : "+r"(n) : : "cc");
  const uint64_t ticks = board_ticks() - t0;
  g_instr_per_tick_q10 = ticks ? static_cast<uint32_t>((static_cast<uint64_t>(2 * iterations) << 10) / ticks) : 0;
}

}  // namespace

extern "C" {

__attribute__((section(".vectors"), used)) void (*const g_vectors[16])(void) = {
    reinterpret_cast<void (*)(void)>(&__stack_top),
    Reset_Handler,
    Fault_Handler,  // NMI
    Fault_Handler,  // HardFault
    Fault_Handler,  // MemManage
    Fault_Handler,  // BusFault
    Fault_Handler,  // UsageFault
    Fault_Handler,  // SecureFault (v8-M)
    nullptr,
    nullptr,
    nullptr,
    Fault_Handler,  // SVCall
    Fault_Handler,  // DebugMonitor
    nullptr,
    Fault_Handler,  // PendSV
    SysTick_Handler,
};

// Runs before FP/MVE is enabled: no vectorisation, no library calls until CPACR is set.
__attribute__((optimize("no-tree-vectorize", "no-tree-loop-distribute-patterns"), noreturn)) void Reset_Handler(void) {
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
  reg(0xE000ED88) |= 0xFu << 20;  // CPACR: CP10 and CP11 (FPU, and MVE on v8.1-M) full access
  __asm__ volatile("dsb\n isb" ::: "memory");
#endif
  for (uint32_t *s = &__data_load, *d = &__data_start; d < &__data_end;) *d++ = *s++;
  for (uint32_t* d = &__bss_start; d < &__bss_end;) *d++ = 0;
  // Paint the stack below this frame (with a margin) for board_stack_used().
  uintptr_t sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  for (volatile uint32_t* p = &__stack_limit; reinterpret_cast<uintptr_t>(p) + 256 < sp;) *p++ = kPaint;
  // SysTick on the core clock, full 24-bit reload, interrupt on wrap (counted in g_wraps).
  reg(0xE000E014) = 0x00FFFFFFu;
  reg(0xE000E018) = 0;
  reg(0xE000E010) = 0x7u;
  calibrate();
  for (void (**f)(void) = __init_array_start; f < __init_array_end; ++f) (*f)();
  board_exit(main());
}

void SysTick_Handler(void) { g_wraps = g_wraps + 1; }

void Fault_Handler(void) {
  board_puts("kiln board: fault\n");
  board_exit(3);
}

void board_puts(const char* s) { semihost(0x04, s); }  // SYS_WRITE0

void board_exit(int code) {
  // SYS_EXIT with ADP_Stopped_ApplicationExit (QEMU exits 0) or RunTimeErrorUnknown (exits 1).
  semihost(0x18, reinterpret_cast<const void*>(code == 0 ? 0x20026u : 0x20023u));
  for (;;) {
  }
}

uint64_t board_ticks(void) {
  uint32_t w, v;
  do {
    w = g_wraps;
    v = reg(0xE000E018);
    // A wrap between the two reads pends the interrupt (COUNTFLAG); read again after it ran.
  } while (w != g_wraps);
  return static_cast<uint64_t>(w) * 0x1000000u + (0xFFFFFFu - v);
}

uint64_t board_instructions(uint64_t ticks) { return (ticks * g_instr_per_tick_q10) >> 10; }

size_t board_stack_used(void) {
  const uint32_t* p = &__stack_limit;
  while (p < &__stack_top && *p == kPaint) ++p;
  return static_cast<size_t>(reinterpret_cast<const char*>(&__stack_top) - reinterpret_cast<const char*>(p));
}

// The C library functions the compiler may call (loops it turns into calls, struct copies).
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void* memcpy(void* d, const void* s, size_t n) {
  unsigned char* dp = static_cast<unsigned char*>(d);
  const unsigned char* sp = static_cast<const unsigned char*>(s);
  if (((reinterpret_cast<uintptr_t>(dp) | reinterpret_cast<uintptr_t>(sp) | n) & 3u) == 0) {
    uint32_t* dw = reinterpret_cast<uint32_t*>(dp);
    const uint32_t* sw = reinterpret_cast<const uint32_t*>(sp);
    for (size_t i = 0; i < n / 4; ++i) dw[i] = sw[i];
    return d;
  }
  for (size_t i = 0; i < n; ++i) dp[i] = sp[i];
  return d;
}

__attribute__((optimize("no-tree-loop-distribute-patterns"))) void* memset(void* d, int c, size_t n) {
  unsigned char* dp = static_cast<unsigned char*>(d);
  for (size_t i = 0; i < n; ++i) dp[i] = static_cast<unsigned char>(c);
  return d;
}

}  // extern "C"
