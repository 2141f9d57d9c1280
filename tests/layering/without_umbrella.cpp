// SPDX-License-Identifier: MIT OR Apache-2.0
// A program that links layer libraries without the umbrella (kiln::cpu, kiln::fusion,
// kiln::core; the test without_umbrella): it links, since core refers to the umbrella's hook
// only weakly; it knows no CPU until it registers one, and says so; and it runs once it calls
// the register functions of the layers it links (src/core/registry.h).
#include <algorithm>
#include <cstdio>
#include <string>

#include "core/registry.h"
#include "kiln/kiln.h"

int main() {
  using namespace kiln;
  try {
    (void)Device::cpu();
    std::fprintf(stderr, "Device::cpu() without a registered CPU: expected a kiln::Error\n");
    return 1;
  } catch (const Error& e) {
    if (std::string(e.what()).find("no CPU backend") == std::string::npos) {
      std::fprintf(stderr, "unexpected message: %s\n", e.what());
      return 1;
    }
  }
  register_cpu();
  register_fusion();
  const std::vector<std::string> names = Device::list();
  for (const char* n : {"cpu", "cpu-plain", "cpu-fusion", "capture"})
    if (std::find(names.begin(), names.end(), n) == names.end()) {
      std::fprintf(stderr, "Device::list() lacks %s\n", n);
      return 1;
    }
  const Tensor t = ones({2, 3}) * 2 + 1;
  const float sum = t.sum().item<float>();
  if (sum != 18.f || !t.device().has_fusion()) {
    std::fprintf(stderr, "got sum %g on %s\n", sum, t.device().str().c_str());
    return 1;
  }
  std::printf("layers linked without the umbrella: %s, sum %g\n", t.device().str().c_str(), sum);
  return 0;
}
