// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace kiln {

/// The one exception type thrown for bad user input. The message starts with "[op] " and names
/// the shapes, dtypes and devices involved.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
/// Builds a message from pieces (strings, numbers, shapes, dtypes, devices); defined out of line.
class MsgBuilder {
 public:
  MsgBuilder& operator<<(const std::string& s) {
    s_ += s;
    return *this;
  }
  MsgBuilder& operator<<(std::string_view s) {
    s_ += s;
    return *this;
  }
  MsgBuilder& operator<<(const char* s) {
    s_ += s;
    return *this;
  }
  MsgBuilder& operator<<(char c) {
    s_ += c;
    return *this;
  }
  MsgBuilder& operator<<(long long v) {
    s_ += std::to_string(v);
    return *this;
  }
  MsgBuilder& operator<<(long v) { return *this << static_cast<long long>(v); }
  MsgBuilder& operator<<(int v) { return *this << static_cast<long long>(v); }
  MsgBuilder& operator<<(unsigned long v) { return *this << static_cast<long long>(v); }
  // uint64_t is unsigned long long on wasm32 (unsigned long elsewhere).
  MsgBuilder& operator<<(unsigned long long v) {
    s_ += std::to_string(v);
    return *this;
  }
  MsgBuilder& operator<<(unsigned v) { return *this << static_cast<long long>(v); }
  MsgBuilder& operator<<(double v);
  template <class T>
  auto operator<<(const T& v) -> decltype(to_string(v), *this) {
    s_ += to_string(v);
    return *this;
  }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};
[[noreturn]] void throw_error(const std::string& msg);
}  // namespace detail

}  // namespace kiln

/// KILN_CHECK(cond, "op", pieces...): throws kiln::Error("[op] pieces...") when cond is false.
#define KILN_CHECK(cond, op, ...)                      \
  do {                                                 \
    if (!(cond)) [[unlikely]] {                        \
      ::kiln::detail::MsgBuilder kiln_msg_;            \
      kiln_msg_ << "[" << (op) << "] " << __VA_ARGS__; \
      ::kiln::detail::throw_error(kiln_msg_.str());    \
    }                                                  \
  } while (0)

/// Internal invariant (a library bug, not user input); still throws rather than aborting.
#define KILN_ASSERT(cond)                                                                                          \
  do {                                                                                                             \
    if (!(cond)) [[unlikely]]                                                                                      \
      ::kiln::detail::throw_error(std::string("[internal] assertion failed: ") + #cond + " at " + __FILE__ + ":" + \
                                  std::to_string(__LINE__));                                                       \
  } while (0)
