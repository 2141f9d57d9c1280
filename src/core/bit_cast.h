// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// kiln::detail::bit_cast: C++20's bit_cast for the standard libraries that lack it (libc++ 13, the
// WebAssembly build's), on the compiler builtin that the standard one is made of.
#include <type_traits>

namespace kiln::detail {

/// The bits of `from` as a To (same size, both trivially copyable).
template <class To, class From>
constexpr To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From) && std::is_trivially_copyable_v<To> && std::is_trivially_copyable_v<From>);
  return __builtin_bit_cast(To, from);
}

}  // namespace kiln::detail
