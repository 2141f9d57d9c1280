// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Floating-point <charconv> for the standard libraries without it (libc++ 13, the WebAssembly
// build's, has std::to_chars and std::from_chars for integers only). Where the standard
// functions exist these forward to them, so the text is the same, bit for bit.
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>

#if defined(_LIBCPP_VERSION) && _LIBCPP_VERSION < 14000
#define KILN_FLOAT_CHARCONV 0
#else
#define KILN_FLOAT_CHARCONV 1
#endif

namespace kiln::detail {

/// std::to_chars(first, last, v) written with printf and strtod: the shortest text that reads
/// back as exactly v, in fixed or scientific notation, whichever is shorter (fixed on a tie);
/// "inf", "-inf", "nan", "-nan".
inline std::to_chars_result to_chars_portable(char* first, char* last, double v) {
  std::string s = std::signbit(v) ? "-" : "";
  if (std::isnan(v) || std::isinf(v)) {
    s += std::isnan(v) ? "nan" : "inf";
  } else {
    // The fewest significant digits that read back as v (printf rounds correctly).
    char buf[40];
    for (int prec = 0; prec < 17; ++prec) {
      std::snprintf(buf, sizeof buf, "%.*e", prec, std::fabs(v));
      if (std::strtod(buf, nullptr) == std::fabs(v)) break;
    }
    const char* e = std::strchr(buf, 'e');
    std::string digits(1, buf[0]);
    if (buf[1] == '.') digits.append(buf + 2, static_cast<size_t>(e - (buf + 2)));
    const int exp = std::atoi(e + 1);
    const int nd = static_cast<int>(digits.size());
    std::string sci = digits.substr(0, 1);
    if (nd > 1) sci += "." + digits.substr(1);
    const int ae = exp < 0 ? -exp : exp;
    sci += std::string(exp < 0 ? "e-" : "e+") + (ae < 10 ? "0" : "") + std::to_string(ae);
    std::string fixed;
    if (exp < 0)
      fixed = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    else if (nd <= exp + 1)  // an integer: all its digits, exactly (as std::to_chars writes it)
      fixed = std::to_string(std::fabs(v)).substr(0, static_cast<size_t>(exp + 1));
    else
      fixed = digits.substr(0, static_cast<size_t>(exp + 1)) + "." + digits.substr(static_cast<size_t>(exp + 1));
    s += fixed.size() <= sci.size() ? fixed : sci;
  }
  if (static_cast<size_t>(last - first) < s.size()) return {last, std::errc::value_too_large};
  std::memcpy(first, s.data(), s.size());
  return {first + s.size(), std::errc()};
}

/// std::from_chars(first, last, v) for a double (chars_format::general) written with strtod: an
/// optional '-', then decimal digits with an optional point and exponent, or inf/infinity/nan
/// (any case). No leading '+' or space; result_out_of_range (v unchanged) when out of range.
inline std::from_chars_result from_chars_portable(const char* first, const char* last, double& v) {
  const char* p = first;
  if (p != last && *p == '-') ++p;
  auto lower = [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); };
  const bool number = p != last && ((*p >= '0' && *p <= '9') || *p == '.');
  const bool word = p != last && (lower(*p) == 'i' || lower(*p) == 'n');
  if (!number && !word) return {first, std::errc::invalid_argument};
  std::string text(first, last);
  // strtod reads hexadecimal after "0x"; from_chars (general) reads the 0 and stops at the x.
  const size_t zero = static_cast<size_t>(p - first);
  if (number && text.size() > zero + 1 && text[zero] == '0' && lower(text[zero + 1]) == 'x') text.resize(zero + 1);
  errno = 0;
  char* end = nullptr;
  const double r = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return {first, std::errc::invalid_argument};
  const char* stop = first + (end - text.c_str());
  if (errno == ERANGE && (std::isinf(r) || r == 0)) return {stop, std::errc::result_out_of_range};
  v = std::isnan(r) ? std::copysign(std::nan(""), r) : r;  // no payload, as std::from_chars
  return {stop, std::errc()};
}

/// std::to_chars(first, last, v) for a double, where the standard library has it.
inline std::to_chars_result to_chars(char* first, char* last, double v) {
#if KILN_FLOAT_CHARCONV
  return std::to_chars(first, last, v);
#else
  return to_chars_portable(first, last, v);
#endif
}

/// std::from_chars(first, last, v) for a double, where the standard library has it.
inline std::from_chars_result from_chars(const char* first, const char* last, double& v) {
#if KILN_FLOAT_CHARCONV
  return std::from_chars(first, last, v);
#else
  return from_chars_portable(first, last, v);
#endif
}

}  // namespace kiln::detail
