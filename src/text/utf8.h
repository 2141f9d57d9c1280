// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// UTF-8 decoding and encoding for the tokenizers.
#include <string>
#include <string_view>
#include <vector>

namespace kiln::text::detail {

/// Stands for a byte that does not start a valid UTF-8 sequence (one per such byte).
inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;

/// The code points of `s`; an invalid, overlong, surrogate or truncated sequence gives one
/// kInvalidCodePoint per byte skipped.
inline std::vector<char32_t> decode_utf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
    char32_t c = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      ok = (b & 0xC0) == 0x80;
      c = (c << 6) | (b & 0x3F);
    }
    static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && c >= kMin[len] && c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF);
    if (ok) {
      out.push_back(c);
      i += static_cast<size_t>(len);
    } else {
      out.push_back(kInvalidCodePoint);
      ++i;
    }
  }
  return out;
}

/// Appends the UTF-8 bytes of code point c.
inline void append_utf8(std::string& s, char32_t c) {
  if (c < 0x80) {
    s.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (c >> 6)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (c >> 12)));
    s.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (c >> 18)));
    s.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace kiln::text::detail
