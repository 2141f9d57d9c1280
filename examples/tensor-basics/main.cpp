// A first look at Kiln tensors: creation, elementwise math, reductions, views, printing.
#include <kiln/kiln.h>

#include <iostream>

int main() {
  using namespace kiln;
  Device cpu = Device::cpu();
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}, cpu);
  Tensor b = (a.exp() + 1) * 2;
  std::vector<float> v = b.to_vector<float>();
  for (float x : v) std::cout << x << " ";
  std::cout << "\n" << a << "\n";
  return 0;
}
