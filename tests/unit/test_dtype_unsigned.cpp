// SPDX-License-Identifier: MIT OR Apache-2.0
// The unsigned dtypes u16, u32 and u64: Kiln's promotion rule (where PyTorch refuses), values
// past the signed range through creation, host copies and casts, and the errors of a refused
// promotion. Op results are checked against PyTorch in the conformance suite
// (scripts/golden_cases/wide_unsigned.py); files in tests/unit/test_store_*.cpp.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cstdint>
#include <limits>

#include "test_util.h"

using namespace kiln;

namespace {
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
}

TEST(Unsigned, NamesSizesAndCategories) {
  EXPECT_EQ(dtype_name(u16), "u16");
  EXPECT_EQ(dtype_name(u32), "u32");
  EXPECT_EQ(dtype_name(u64), "u64");
  EXPECT_EQ(dtype_size(u16), 2u);
  EXPECT_EQ(dtype_size(u32), 4u);
  EXPECT_EQ(dtype_size(u64), 8u);
  for (DType t : {u16, u32, u64}) {
    EXPECT_TRUE(is_integral(t));
    EXPECT_FALSE(is_signed(t));
    EXPECT_FALSE(is_floating(t));
    EXPECT_TRUE(is_wide_unsigned(t));
  }
  EXPECT_FALSE(is_wide_unsigned(u8));
  static_assert(dtype_of_v<uint16_t> == u16 && dtype_of_v<uint32_t> == u32 && dtype_of_v<uint64_t> == u64);
}

TEST(Unsigned, PromotionKeepsTheWiderUnsignedOrWidensToSigned) {
  EXPECT_EQ(promote_types(u16, bool_), u16);
  EXPECT_EQ(promote_types(u16, u8), u16);
  EXPECT_EQ(promote_types(u32, u16), u32);
  EXPECT_EQ(promote_types(u64, u32), u64);
  EXPECT_EQ(promote_types(u16, i8), i32);
  EXPECT_EQ(promote_types(u16, i16), i32);
  EXPECT_EQ(promote_types(u16, i32), i32);
  EXPECT_EQ(promote_types(u16, i64), i64);
  EXPECT_EQ(promote_types(u32, i8), i64);
  EXPECT_EQ(promote_types(u32, i32), i64);
  EXPECT_EQ(promote_types(u64, f16), f16);
  EXPECT_EQ(promote_types(u32, bf16), bf16);
  EXPECT_EQ(promote_types(u64, f64), f64);
  for (DType s : {i8, i16, i32, i64}) {
    EXPECT_TRUE(promotion_refused(u64, s));
    EXPECT_ERROR(promote_types(u64, s), "no integer dtype holds both u64 and " + std::string(dtype_name(s)));
    EXPECT_ERROR(promote_types(s, u64), "cast one of them explicitly");
  }
}

TEST(Unsigned, RefusedPromotionNamesTheOpAndShapes) {
  Tensor a = full({3}, 5, {.dtype = u64});
  Tensor b = full({2, 3}, 1, {.dtype = i32});
  EXPECT_ERROR(add(a, b), "[add]");
  EXPECT_ERROR(add(a, b), "u64[3]");
  EXPECT_ERROR(add(a, b), "i32[2, 3]");
  EXPECT_ERROR(lt(b, a), "[lt]");
  EXPECT_ERROR(where(full({3}, true, {.dtype = bool_}), a, full({3}, 1, {.dtype = i64})), "[where]");
  EXPECT_ERROR(cat({a, full({2}, 1, {.dtype = i8})}), "[cat]");
  // An explicit cast resolves it, and a Python-style int scalar keeps the tensor's type.
  EXPECT_EQ(add(a.to(i64), b).dtype(), i64);
  EXPECT_EQ((a + 1).dtype(), u64);
  EXPECT_EQ((a * 2.5).dtype(), f32);
}

TEST(Unsigned, ValuesPastTheSignedRangeSurviveCreationAndHostCopies) {
  Tensor m = full({2}, kU64Max, {.dtype = u64});
  EXPECT_EQ(m.to_vector<uint64_t>(), (std::vector<uint64_t>{kU64Max, kU64Max}));
  // A u64 scalar past INT64_MAX keeps its value in a float tensor too.
  EXPECT_EQ(full({1}, kU64Max, {.dtype = f64}).item<double>(), 18446744073709551616.0);
  Tensor t = tensor(std::vector<uint64_t>{0, uint64_t{1} << 63, kU64Max}, {3});
  EXPECT_EQ(t.dtype(), u64);
  EXPECT_EQ(t.select(0, 2).item<uint64_t>(), kU64Max);
  EXPECT_EQ(t.to(f64).to_vector<double>(), (std::vector<double>{0.0, 9223372036854775808.0, 18446744073709551616.0}));
  EXPECT_EQ(t.to(u32).to_vector<uint32_t>(), (std::vector<uint32_t>{0, 0, 0xFFFFFFFFu}));
  EXPECT_EQ(t.to(i64).to_vector<int64_t>()[2], -1);  // two's complement, as in PyTorch
  Tensor w = tensor(std::vector<uint32_t>{4000000000u, 1u}, {2});
  EXPECT_EQ((w + w).to_vector<uint32_t>(), (std::vector<uint32_t>{3705032704u, 2u}));  // wraps modulo 2^32
  EXPECT_EQ((w - 2u).to_vector<uint32_t>()[1], 0xFFFFFFFFu);
  EXPECT_EQ(max(t).item<uint64_t>(), kU64Max);  // compares unsigned, not as i64
  EXPECT_EQ(argmax(t).item<int64_t>(), 2);
  EXPECT_TRUE(lt(t.select(0, 1), t.select(0, 2)).item<bool>());
  EXPECT_EQ(sort(t, 0, true).first.to_vector<uint64_t>()[0], kU64Max);
}

TEST(Unsigned, WorkOnEveryDeviceOfTheSuite) {
  for (const Device& d : {Device::cpu(), Device::cpu().without_fusion(), Device::cpu().autodiff()}) {
    Tensor x = arange(0, 6, 1, u16, d).reshape({2, 3});
    EXPECT_EQ(x.dtype(), u16);
    EXPECT_EQ(sum(x).item<int64_t>(), 15);
    EXPECT_EQ((x * x).to_vector<uint16_t>(), (std::vector<uint16_t>{0, 1, 4, 9, 16, 25}));
    EXPECT_EQ(x.t().contiguous().to_vector<uint16_t>(), (std::vector<uint16_t>{0, 3, 1, 4, 2, 5}));
  }
}
