// SPDX-License-Identifier: MIT OR Apache-2.0
// Number formatting over board_puts (board.h), shared by the boards and the hosted build.
#include "board.h"

extern "C" void board_put_int(long long v) {
  char buf[24];
  char* p = buf + sizeof buf;
  *--p = '\0';
  const bool neg = v < 0;
  unsigned long long u = neg ? 0ull - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
  do {
    *--p = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u);
  if (neg) *--p = '-';
  board_puts(p);
}

extern "C" void board_put_float(float v, int digits) {
  if (v != v) return board_puts("nan");
  if (v < 0) {
    board_puts("-");
    v = -v;
  }
  if (v >= 1e9f) return board_puts("inf");
  long long scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  const long long whole = static_cast<long long>(v);
  long long frac = static_cast<long long>((v - static_cast<float>(whole)) * static_cast<float>(scale) + 0.5f);
  long long w = whole;
  if (frac >= scale) {
    frac -= scale;
    ++w;
  }
  board_put_int(w);
  if (digits <= 0) return;
  char buf[24];
  buf[digits + 1] = '\0';
  buf[0] = '.';
  for (int i = digits; i > 0; --i) {
    buf[i] = static_cast<char>('0' + frac % 10);
    frac /= 10;
  }
  board_puts(buf);
}
