// SPDX-License-Identifier: MIT OR Apache-2.0
// core/charconv.h: the portable double <-> text conversions (printf/strtod) that stand in for
// <charconv> where the standard library lacks them (libc++ 13: the WebAssembly build) write and
// read exactly what std::to_chars / std::from_chars do. Where those exist (native builds), the
// two implementations are compared on random bit patterns; everywhere, text reads back bit for
// bit and a few fixed cases give the standard's text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "core/charconv.h"

namespace {

using kiln::detail::from_chars_portable;
using kiln::detail::to_chars_portable;

std::string text(double v) {
  char buf[64];
  auto r = to_chars_portable(buf, buf + sizeof buf, v);
  EXPECT_EQ(r.ec, std::errc());
  return std::string(buf, r.ptr);
}

uint64_t bits(double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  return u;
}

/// Random doubles: raw bit patterns (every exponent, NaNs, subnormals) and everyday values.
std::vector<double> samples(int n) {
  std::mt19937_64 g(7);
  std::uniform_real_distribution<double> u(-1e6, 1e6);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    uint64_t b = g();
    double d;
    std::memcpy(&d, &b, 8);
    v.push_back(d);
    v.push_back(u(g));
    v.push_back(static_cast<float>(u(g)));
    v.push_back(std::round(u(g)) * 1e9);
    v.push_back(u(g) * 1e-9);
  }
  return v;
}

TEST(Charconv, FixedCasesGiveTheStandardText) {
  EXPECT_EQ(text(0.0), "0");
  EXPECT_EQ(text(-0.0), "-0");
  EXPECT_EQ(text(0.1), "0.1");
  EXPECT_EQ(text(1.0), "1");
  EXPECT_EQ(text(123456.0), "123456");
  EXPECT_EQ(text(1e22), "1e+22");
  EXPECT_EQ(text(1e-5), "1e-05");
  EXPECT_EQ(text(0.001), "0.001");
  EXPECT_EQ(text(123456789012345678.0), "123456789012345680");
  EXPECT_EQ(text(5e-324), "5e-324");
  EXPECT_EQ(text(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(text(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(text(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(text(std::nan("")), "nan");
  char small[3];
  EXPECT_EQ(to_chars_portable(small, small + 3, 0.125).ec, std::errc::value_too_large);
}

TEST(Charconv, TextReadsBackBitForBit) {
  for (double v : samples(3000)) {
    const std::string s = text(v);
    double back = 0;
    auto r = from_chars_portable(s.data(), s.data() + s.size(), back);
    ASSERT_EQ(r.ec, std::errc()) << s;
    ASSERT_EQ(r.ptr, s.data() + s.size()) << s;
    if (std::isnan(v))
      ASSERT_TRUE(std::isnan(back)) << s;
    else
      ASSERT_EQ(bits(back), bits(v)) << s;
  }
}

TEST(Charconv, ReadingFollowsFromChars) {
  struct Case {
    const char* in;
    std::errc ec;
    int used;
    double v;
  };
  const double keep = 7;
  const Case cases[] = {{"1.5e3", std::errc(), 5, 1500},
                        {"-.5x", std::errc(), 3, -0.5},
                        {"0x10", std::errc(), 1, 0},
                        {"1e400", std::errc::result_out_of_range, 5, keep},
                        {"+1", std::errc::invalid_argument, 0, keep},
                        {" 1", std::errc::invalid_argument, 0, keep},
                        {"", std::errc::invalid_argument, 0, keep},
                        {"-", std::errc::invalid_argument, 0, keep},
                        {"1.5e", std::errc(), 3, 1.5},
                        {"-Infinity", std::errc(), 9, -HUGE_VAL}};
  for (const Case& c : cases) {
    double v = keep;
    auto r = from_chars_portable(c.in, c.in + std::strlen(c.in), v);
    EXPECT_EQ(r.ec, c.ec) << c.in;
    EXPECT_EQ(r.ptr - c.in, c.used) << c.in;
    EXPECT_EQ(v, c.v) << c.in;
  }
}

#if KILN_FLOAT_CHARCONV
// The second implementation: the standard library's.
TEST(Charconv, PortableEqualsTheStandardLibrary) {
  for (double v : samples(8000)) {
    char a[64], b[64];
    auto ra = std::to_chars(a, a + sizeof a, v);
    auto rb = to_chars_portable(b, b + sizeof b, v);
    const std::string sa(a, ra.ptr), sb(b, rb.ptr);
    ASSERT_EQ(sa, sb);
    double x = 0, y = 0;
    auto fa = std::from_chars(sa.data(), sa.data() + sa.size(), x);
    auto fb = from_chars_portable(sa.data(), sa.data() + sa.size(), y);
    ASSERT_EQ(fa.ec, fb.ec) << sa;
    ASSERT_EQ(fa.ptr, fb.ptr) << sa;
    ASSERT_EQ(bits(x), bits(y)) << sa;
  }
}
#endif

}  // namespace
