# SPDX-License-Identifier: MIT OR Apache-2.0
# Cross build for ARM64 Linux with Debian's aarch64-linux-gnu-g++ (g++-aarch64-linux-gnu) and
# the arm64 packages of multiarch (dpkg --add-architecture arm64: libhwy-dev:arm64,
# libgtest-dev:arm64, zlib1g-dev:arm64; scripts/install-deps.sh --arm64). Programs and tests run
# under qemu-user through scripts/qemu-aarch64.sh (docs/micro.md, "ARM64 Linux").
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# The multiarch folders: CMake finds /usr/lib/aarch64-linux-gnu/cmake/{hwy,GTest} and the arm64
# libraries, never the host's /usr/lib/x86_64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/cmake)
# GCC contracts a*b+c into one FMA by default on aarch64 (not on x86-64 without -mfma): Kiln's
# kernels and their bitwise tests assume the separate rounding of x86's builds.
set(CMAKE_CXX_FLAGS_INIT "-ffp-contract=off")
set(CMAKE_C_FLAGS_INIT "-ffp-contract=off")
# Test programs (and gtest_discover_tests) run under qemu-aarch64-static, SVE vector length from
# KILN_SVE_VL (bytes; scripts/qemu-aarch64.sh).
get_filename_component(_kiln_root "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
set(CMAKE_CROSSCOMPILING_EMULATOR "${_kiln_root}/scripts/qemu-aarch64.sh")
