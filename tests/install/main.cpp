// SPDX-License-Identifier: MIT OR Apache-2.0
// Uses an installed Kiln: creation, elementwise math, broadcasting, reading values back.
#include <kiln/kiln.h>
#ifdef KILN_INSTALL_TEST_TRAIN
#include <kiln/train.h>
#endif

#include <cmath>
#include <iostream>

int main() {
  using namespace kiln;
  Device cpu = Device::cpu();
  Tensor a = tensor({0.f, 1.f, 2.f, 3.f, 4.f, 5.f}, {2, 3}, cpu);
  Tensor b = tensor({10.f, 20.f, 30.f}, {3}, cpu);
  Tensor c = a.exp() * 2 + b;  // b broadcasts over the rows
  std::vector<float> v = c.to_vector<float>();
  const float bias[3] = {10.f, 20.f, 30.f};
  for (int i = 0; i < 6; ++i) {
    float want = 2 * std::exp(static_cast<float>(i)) + bias[i % 3];
    if (std::fabs(v[i] - want) > 1e-4f * std::fabs(want)) {
      std::cerr << "element " << i << ": got " << v[i] << ", want " << want << "\n";
      return 1;
    }
  }
  try {
    (void)(a + tensor({1.f, 2.f}, cpu));  // shapes [2, 3] and [2] do not broadcast
    std::cerr << "expected a kiln::Error\n";
    return 1;
  } catch (const Error& e) {
    std::cout << "caught: " << e.what() << "\n";
  }
#ifdef KILN_INSTALL_TEST_TRAIN
  // kiln::train (and through it kiln::data) links from the package too.
  auto acc = train::metrics::accuracy();
  acc->update(tensor({0.f, 1.f, 1.f, 0.f}, {2, 2}, cpu), tensor<int64_t>({1, 0}, {2}));
  if (acc->value() != 1.0) {
    std::cerr << "accuracy: got " << acc->value() << "\n";
    return 1;
  }
#endif
  std::cout << "installed Kiln works: " << to_string(c.shape()) << " " << to_string(c.dtype()) << "\n";
  return 0;
}
