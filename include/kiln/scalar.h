// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
#include <cstdint>
#include <type_traits>

#include "kiln/dtype.h"

namespace kiln {

/// A number passed where a tensor may stand (`x + 1`, `clamp(x, 0.f, 6.f)`). Like a Python
/// number in PyTorch, it takes part in type promotion by category only: an int scalar keeps an
/// integer tensor's dtype, a float scalar turns an integer tensor into the default float dtype.
class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar() : kind_(Kind::Int), i_(0) {}
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Scalar(T v) {  // NOLINT: implicit on purpose
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::Bool;
      i_ = v;
    } else if constexpr (std::is_integral_v<T>) {
      kind_ = Kind::Int;
      i_ = static_cast<int64_t>(v);  // a u64 past INT64_MAX keeps its bits (see big_unsigned_)
      if constexpr (std::is_unsigned_v<T> && sizeof(T) == 8) big_unsigned_ = i_ < 0;
    } else {
      kind_ = Kind::Float;
      d_ = static_cast<double>(v);
    }
  }
  Scalar(Half v) : kind_(Kind::Float), d_(float(v)) {}      // NOLINT
  Scalar(BFloat16 v) : kind_(Kind::Float), d_(float(v)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  double to_double() const {
    return kind_ == Kind::Float ? d_
           : big_unsigned_      ? static_cast<double>(static_cast<uint64_t>(i_))
                                : static_cast<double>(i_);
  }
  int64_t to_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_; }
  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>)
      return kind_ == Kind::Float ? d_ != 0 : i_ != 0;
    else if constexpr (std::is_integral_v<T>)
      return static_cast<T>(to_int());
    else
      return static_cast<T>(to_double());
  }
  /// dtype this scalar has when it stands alone (bool, i64 or the default float).
  DType natural_dtype() const {
    return kind_ == Kind::Bool ? DType::Bool : kind_ == Kind::Int ? DType::I64 : kDefaultFloat;
  }

 private:
  Kind kind_;
  bool big_unsigned_ = false;  ///< an unsigned 64-bit value above INT64_MAX, held in i_'s bits
  union {
    int64_t i_;
    double d_;
  };
};

}  // namespace kiln
