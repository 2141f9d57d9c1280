#!/usr/bin/env bash
# Installs the Debian packages Kiln needs to build and test; does nothing when all are present.
# glslc and spirv-tools check the GLSL rendering of the kernel language (tests/unit/test_kernel_targets.cpp);
# glslang-dev and libshaderc-dev let it compile GLSL to SPIR-V in process (src/kernel/spirv.cpp).
# libvulkan-dev builds the Vulkan backend; mesa-vulkan-drivers (lavapipe) runs it on the CPU.
# libopenmpi-dev and openmpi-bin build kiln_dist and run its tests under mpirun (docs/distributed.md).
# libboost-dev (Beast) and libssl-dev build the remote device and kiln-server (docs/remote.md);
# openssl makes the certificate of its TLS test.
# libsentencepiece-dev gives kiln_text its SentencePiece tokenizers; fortunes is the text corpus of
# examples/text-classification and docs/text.md.
# python3-statsmodels ships the El Nino series of examples/time-series (its CSV, read directly).
# gcc-arm-none-eabi, its newlib and libstdc++ and qemu-system-arm build and run the micro target's
# tests and example on the emulated Cortex-M3 and Cortex-M55 boards (docs/micro.md).
# chromium runs the browser tests headless, its WebGPU adapter (SwiftShader) the kernel suite's
# WGSL (tests/browser/, scripts/browser_run.py).
# --wasm: also emscripten, nodejs and googletest (its sources), for the WebAssembly build and its
# tests in node (`make wasm`, `make test-wasm`, docs/web.md).
# --arm64 (make test-arm64) installs only what the ARM64 Linux cross build needs (docs/micro.md,
# "ARM64 Linux"): g++-aarch64-linux-gnu, qemu-user-static, and through multiarch
# (dpkg --add-architecture arm64) the arm64 libhwy, GoogleTest and zlib that it links.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
wasm=0
arm64_only=0
for arg in "$@"; do
  case "$arg" in
    --wasm) wasm=1 ;;
    --arm64) arm64_only=1 ;;
    *) echo "install-deps: unknown option $arg (known: --wasm, --arm64)" >&2; exit 2 ;;
  esac
done
if [ "$arm64_only" -eq 1 ]; then
  arm64=(cmake make g++-aarch64-linux-gnu qemu-user-static libhwy-dev:arm64 libgtest-dev:arm64 zlib1g-dev:arm64)
  missing=()
  for p in "${arm64[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
  fi
  exit 0
fi
pkgs=(cmake g++ make ccache pkg-config libhwy-dev libgtest-dev libgmock-dev libbenchmark-dev clang-format libdnnl-dev
  nlohmann-json3-dev zlib1g-dev libpng-dev libjpeg-dev libsqlite3-dev libncurses-dev
  dataset-fashion-mnist python3-sklearn libonnx-testdata
  glslc glslang-tools glslang-dev libshaderc-dev spirv-tools libvulkan-dev mesa-vulkan-drivers
  libopenmpi-dev openmpi-bin libboost-dev libssl-dev openssl libsentencepiece-dev fortunes python3-statsmodels
  gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm chromium)
[ "$wasm" -eq 0 ] || pkgs+=(emscripten nodejs googletest)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
# Optional: the ONNX export tests check exported models with onnx.checker and run them with ONNX
# Runtime when these Python packages are present, and skip those cases without them.
if ! python3 -c 'import onnx, onnxruntime' 2>/dev/null; then
  echo "install-deps: installing the Python packages onnx and onnxruntime (optional)"
  python3 -m pip install -q onnx onnxruntime 2>/dev/null ||
    python3 -m pip install -q --break-system-packages onnx onnxruntime ||
    echo "install-deps: pip could not install onnx and onnxruntime; the ONNX Runtime export tests will skip"
fi
