// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Which primitives the gradient tests check. Each gradient test file lists the op names (as in
// ops.def) it runs gradcheck on:
//   KILN_GRAD_COVERED(elementwise, "Add", "Sub", ...);
// and the test Autodiff.EveryOpHasAGradientCheck fails for an op that is neither listed nor
// marked non-differentiable.
#include <set>
#include <string>

namespace kiln::test {

inline std::set<std::string>& grad_covered() {
  static std::set<std::string> s;
  return s;
}

struct GradCovered {
  template <class... S>
  explicit GradCovered(S... names) {
    (grad_covered().insert(names), ...);
  }
};

}  // namespace kiln::test

#define KILN_GRAD_COVERED(tag, ...) \
  static const ::kiln::test::GradCovered kiln_grad_covered_##tag { __VA_ARGS__ }
