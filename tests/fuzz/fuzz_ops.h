// SPDX-License-Identifier: MIT OR Apache-2.0
// The body of the fuzz_ops libFuzzer target, shared with the unit test that runs its seeds
// (tests/unit/test_store_corpus.cpp). The input picks a device (null, plain CPU, fused CPU),
// a base tensor (dtype, shape), then a program of up to 16 ops on it with shapes, strides,
// offsets, dims and values read from the bytes, hostile ones (negative, 2^31, 2^62,
// INT64_MAX, INT64_MIN) included. Every op must either work or throw kiln::Error; anything
// else (a crash, another exception, a sanitizer report) is a bug.
//
// The null device only computes shapes, so huge shapes cost nothing there; on the CPU the base
// tensor has at most 4096 elements and a step runs only when the current tensor and the step's
// result (found first on a null-device twin) have at most 2^16 elements.
#pragma once
#include <kiln/kiln.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace kiln::fuzz {

/// Reads values from the fuzz input; past its end every read gives 0.
class Bytes {
 public:
  Bytes(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool done() const { return i_ >= n_; }
  uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
  /// A size-like value: mostly small, sometimes hostile.
  int64_t size() {
    static const int64_t kHostile[] = {-1,
                                       -2,
                                       int64_t{1} << 31,
                                       int64_t{1} << 32,
                                       int64_t{1} << 62,
                                       std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max() - 5};
    uint8_t b = u8();
    if (b < 0xF8) return b % 9;  // 0..8
    return kHostile[b - 0xF8];
  }
  /// A dim index, sometimes out of range.
  int64_t dim() { return static_cast<int64_t>(static_cast<int8_t>(u8())) % 6; }
  Shape shape(int max_rank = 4) {
    Shape s;
    int r = u8() % (max_rank + 1);
    for (int k = 0; k < r; ++k) s.push_back(size());
    return s;
  }

 private:
  const uint8_t* d_;
  size_t n_, i_ = 0;
};

/// numel of s, or -1 when it is negative or overflows.
inline int64_t checked_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  return n;
}

/// One op of the program on x (and a second operand made from x); returns the new current tensor.
inline Tensor fuzz_step(Bytes& in, const Tensor& x) {
  const uint8_t op = in.u8() % 28;
  switch (op) {
    case 0:
      return x.reshape(in.shape());
    case 1:
      return x.permute([&] {
        Dims d;
        for (int64_t k = 0; k < x.dim(); ++k) d.push_back(in.dim());
        return d;
      }());
    case 2:
      return x.transpose(in.dim(), in.dim());
    case 3: {
      int64_t d = in.dim(), s = in.size();
      return x.narrow(d, s, in.size());
    }
    case 4: {
      int64_t d = in.dim();
      return x.select(d, in.size());
    }
    case 5: {
      int64_t d = in.dim(), a = in.size(), b = in.size();
      return x.slice(d, a, b, in.size());
    }
    case 6:
      return x.expand(in.shape());
    case 7: {
      Shape s = in.shape();
      Strides st;
      for (size_t k = 0; k < s.size(); ++k) st.push_back(in.size());
      return x.as_strided(s, st, in.size());
    }
    case 8:
      return x.unsqueeze(in.dim()).squeeze({in.dim()});
    case 9:
      return repeat(x, in.shape());
    case 10:
      return cat({x, x}, in.dim());
    case 11:
      return flip(x, {in.dim()});
    case 12:
      return roll(x, {in.size()}, {in.dim()});
    case 13:
      return x.contiguous();
    case 14:
      return exp(x) + x;
    case 15:
      return x * x - x;
    case 16: {
      std::string m = (in.u8() & 1) ? "floor" : "trunc";
      return div(x, x, m);
    }
    case 17:
      return remainder(x, static_cast<int64_t>(in.size()));
    case 18:
      return sum(x, {in.dim()}, in.u8() & 1);
    case 19:
      return amax(x, {in.dim()});
    case 20:
      return softmax(x, in.dim());
    case 21:
      return cumsum(x, in.dim());
    case 22:
      return index_select(x, in.dim(), full({2}, in.size(), {.dtype = i64, .device = x.device()}));
    case 23:
      return gather(x, in.dim(), zeros(x.shape(), {.dtype = i64, .device = x.device()}));
    case 24:
      return matmul(x, x.transpose(-1, -2));
    case 25:
      return pad(x, in.shape(2));
    case 26: {
      Tensor y = x.clone();
      y.fill_(1);
      return y;
    }
    default:
      return x.to(in.u8() & 1 ? i64 : f32);
  }
}

/// Runs one fuzz input; never throws (a kiln::Error ends that op, the program goes on).
inline void run_ops(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const uint8_t dev = in.u8() % 3;
  const Device d = dev == 0 ? Device::null() : dev == 1 ? Device::cpu().without_fusion() : Device::cpu();
  static const DType kTypes[] = {f32, i64, i32, DType::U8, DType::Bool, f64};
  const DType dt = kTypes[in.u8() % 6];
  Shape s = in.shape();
  const int64_t n = checked_numel(s);
  if (n < 0 || (!d.is_null() && n > 4096)) return;
  Tensor x;
  try {
    x = arange(0, n, 1, dt == DType::Bool ? i64 : dt, d).reshape(s).to(dt);
  } catch (const Error&) {
    return;
  }
  constexpr int64_t kLimit = int64_t{1} << 16;
  for (int k = 0; k < 16 && !in.done(); ++k) {
    const int64_t m = checked_numel(x.shape());
    if (!d.is_null() && (m < 0 || m > kLimit)) break;
    if (!d.is_null()) {
      // The step first runs on a null-device twin: a result too big for a fuzzing run (a
      // legitimate [2^31, 1] from empty operands) is skipped instead of allocated.
      Bytes probe = in;
      try {
        Tensor y = fuzz_step(probe, empty(x.shape(), {.dtype = x.dtype(), .device = Device::null()}));
        const int64_t r = checked_numel(y.shape());
        if (r < 0 || r > kLimit) {
          in = probe;
          continue;
        }
      } catch (const Error&) {
      }
    }
    try {
      x = fuzz_step(in, x);
    } catch (const Error&) {
    }
  }
  try {
    const int64_t m = checked_numel(x.shape());
    if (!d.is_null() && m >= 0 && m <= kLimit) (void)x.to(f64).to_vector<double>();
    if (!d.is_null()) sync(d);
  } catch (const Error&) {
  }
}

}  // namespace kiln::fuzz
