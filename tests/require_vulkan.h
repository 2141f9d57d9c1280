// SPDX-License-Identifier: MIT OR Apache-2.0
// REQUIRE_VULKAN(): skips a test on a machine without a Vulkan device, saying why (CI has
// lavapipe: scripts/install-deps.sh installs it).
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "backends/vulkan/context.h"

#define REQUIRE_VULKAN()                                                                                               \
  do {                                                                                                                 \
    std::string why_no_vulkan;                                                                                         \
    if (kiln::vulkan::Context::count(&why_no_vulkan) == 0) GTEST_SKIP() << "no Vulkan device here: " << why_no_vulkan; \
  } while (0)
