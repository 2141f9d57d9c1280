#!/usr/bin/env bash
# Writes docs/gpu-support.md, the table of what runs on the Vulkan device and what goes through
# the CPU fallback, from the conformance suite on `vulkan` (lavapipe in CI), or with --check
# compares a fresh table with it (the CTest gpu_support_table) and fails on a difference. With
# --webgpu, docs/webgpu-support.md from the suite on `webgpu` in a page of headless Chromium
# (the Wasm build's test program, build/wasm/tests/wasm by default).
#   scripts/gpu-support.sh [--check] [--webgpu] [path/to/kiln_tests or the Wasm test folder]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
check=0
webgpu=0
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --check) check=1 ;;
    --webgpu) webgpu=1 ;;
    *) echo "gpu-support.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
out="$(mktemp)"
trap 'rm -f "$out" "$out.log"' EXIT
if [[ $webgpu == 1 ]]; then
  doc="$root/docs/webgpu-support.md"
  python3 "$root/tests/wasm/unit_page.py" "${1:-$root/build/wasm/tests/wasm}" --env KILN_TEST_DEVICES=webgpu \
    --env KILN_SUPPORT_TABLE=- --gtest_filter='Conformance/Op.*' >"$out.log" || true
  sed -n '/^<<<support table$/,/^>>>support table$/{//!p}' "$out.log" >"$out"
  [[ -s "$out" ]] || { echo "gpu-support.sh: the page printed no table:" >&2; tail -20 "$out.log" >&2; exit 1; }
else
  doc="$root/docs/gpu-support.md"
  bin="${1:-$root/build/release/tests/kiln_tests}"
  KILN_TEST_DEVICES=vulkan KILN_SUPPORT_TABLE="$out" "$bin" --gtest_filter='Conformance/Op.*' >/dev/null
fi
if [[ $check == 1 ]]; then
  if ! diff -u "$doc" "$out"; then
    echo "$doc is out of date: run scripts/gpu-support.sh" >&2
    exit 1
  fi
  echo "$doc is current"
else
  cp "$out" "$doc"
  echo "wrote $doc"
fi
