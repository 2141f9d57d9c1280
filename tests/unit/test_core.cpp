#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>

using namespace kiln;

TEST(Core, ElementwiseSmoke) {
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  Tensor b = a.exp() + 1;
  auto v = b.to_vector<float>();
  ASSERT_EQ(v.size(), 6u);
  EXPECT_NEAR(v[2], std::exp(3.f) + 1, 1e-4);
}
