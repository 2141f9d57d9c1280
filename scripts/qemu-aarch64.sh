#!/usr/bin/env bash
# Runs an ARM64 Linux program of the cross build (cmake/toolchains/aarch64-linux-gnu.cmake) under
# qemu-user, called explicitly (no binfmt_misc needed): the emulated CPU is `max` (NEON, SVE,
# SVE2) with an SVE vector length of KILN_SVE_VL bytes (default 16 = 128 bits; 64 = 512 bits).
# The program's loader and shared libraries are the arm64 multiarch ones (libc6:arm64,
# libhwy1:arm64 in /usr/lib/aarch64-linux-gnu), so no -L sysroot is given.
set -euo pipefail
exec qemu-aarch64-static -cpu "max,sve-default-vector-length=${KILN_SVE_VL:-16}" "$@"
