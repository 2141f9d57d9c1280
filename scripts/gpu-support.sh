#!/usr/bin/env bash
# Writes docs/gpu-support.md, the table of what runs on the Vulkan device and what goes through
# the CPU fallback, from the conformance suite on `vulkan` (lavapipe in CI), or with --check
# compares a fresh table with it (the CTest gpu_support_table) and fails on a difference.
#   scripts/gpu-support.sh [--check] [path/to/kiln_tests]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
check=0
if [[ "${1:-}" == "--check" ]]; then
  check=1
  shift
fi
bin="${1:-$root/build/release/tests/kiln_tests}"
doc="$root/docs/gpu-support.md"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
KILN_TEST_DEVICES=vulkan KILN_SUPPORT_TABLE="$out" "$bin" --gtest_filter='Conformance/Op.*' >/dev/null
if [[ $check == 1 ]]; then
  if ! diff -u "$doc" "$out"; then
    echo "docs/gpu-support.md is out of date: run scripts/gpu-support.sh" >&2
    exit 1
  fi
  echo "docs/gpu-support.md is current"
else
  cp "$out" "$doc"
  echo "wrote $doc"
fi
