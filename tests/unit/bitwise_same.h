// SPDX-License-Identifier: MIT OR Apache-2.0
// Bitwise comparison of two tensors on any devices, for tests whose reference is the same ops
// run another way (fused and unfused, another backend): NaNs match NaNs.
#pragma once
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <vector>

namespace kiln::test {

/// The plain CPU: one kernel per op, the reference of the fusion tests.
inline Device plain_cpu() { return Device::cpu().without_fusion(); }

/// Bitwise equal (NaNs where the other has NaNs).
inline ::testing::AssertionResult same(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << "shapes " << to_string(a.shape()) << " vs " << to_string(b.shape());
  const std::vector<double> va = a.to(plain_cpu()).to_vector<double>(), vb = b.to(plain_cpu()).to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i)
    if (!(va[i] == vb[i] || (std::isnan(va[i]) && std::isnan(vb[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << va[i] << " vs " << vb[i];
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::test
