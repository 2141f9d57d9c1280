#!/usr/bin/env bash
# On a machine with a real GPU (docs/gpu.md, "Running the suite on a GPU"): the conformance
# suite and the gradient checks on the Vulkan devices, the kernel language's suite launched on
# CUDA (docs/kernels.md), then the Vulkan bench with its speed
# section (f32 matmul GFLOP/s, elementwise bandwidth, as shares of the GPU's peak where this
# script knows it, or KILN_GPU_PEAK_GFLOPS / KILN_GPU_PEAK_GBPS say), and a training step of
# the bench's MLP in PyTorch on the same GPU where PyTorch with CUDA is installed. Writes
# bench/GPU.md (written aside, then moved into place). Needs a release build (make build).
#   scripts/gpu-check.sh            the whole check
#   scripts/gpu-check.sh --smoke    small sizes and a part of the suite (to try the script on lavapipe)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build/release}
tests=$build/tests/kiln_tests
bench=$build/bench/kiln_bench_vulkan
for f in "$tests" "$bench"; do
  [ -x "$f" ] || { echo "gpu-check: $f is missing: run make build first" >&2; exit 1; }
done
filter='Conformance*'
if [ "${1:-}" = "--smoke" ]; then
  filter='Conformance/Op.Matches/add_*:Conformance/Op.Matches/matmul_*'
  export KILN_GPU_MATMUL=${KILN_GPU_MATMUL:-256} KILN_GPU_ELEMS=${KILN_GPU_ELEMS:-1000000}
fi

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)
# Peaks of the f32 (non-tensor-core) units and of memory, from the vendors' data sheets.
case "$gpu" in
  *H200*) : "${KILN_GPU_PEAK_GFLOPS:=67000}" "${KILN_GPU_PEAK_GBPS:=4800}" ;;
  *H100*SXM* | *"H100 80GB HBM3"*) : "${KILN_GPU_PEAK_GFLOPS:=67000}" "${KILN_GPU_PEAK_GBPS:=3350}" ;;
  *H100*) : "${KILN_GPU_PEAK_GFLOPS:=51000}" "${KILN_GPU_PEAK_GBPS:=2000}" ;;
  *A100*) : "${KILN_GPU_PEAK_GFLOPS:=19500}" "${KILN_GPU_PEAK_GBPS:=2039}" ;;
esac
export KILN_GPU_PEAK_GFLOPS KILN_GPU_PEAK_GBPS

out=bench/GPU.md
tmp=$out.tmp.$$
trap 'rm -f "$tmp"' EXIT
{
  echo "# GPU check ($(date -u +%Y-%m-%d))"
  echo
  echo "GPU: ${gpu:-unknown (no nvidia-smi)}; Vulkan: $(vulkaninfo --summary 2>/dev/null | grep -m1 deviceName | sed 's/.*= //' || echo '?')"
  echo
  echo "## Conformance and gradients"
  echo
  echo '```'
  KILN_TEST_DEVICES=vulkan,vulkan-plain "$tests" --gtest_filter="$filter" 2>&1 |
    grep -E "conformance on|fallbacks|^\[  (PASSED|FAILED)" || true
  KILN_DEVICE=vulkan "$tests" --gtest_filter='Grad*:NNLoss.Grad*' 2>&1 | grep -E "^\[  (PASSED|FAILED)" || true
  echo '```'
  echo
  echo "## The kernel suite on CUDA (NVRTC and the driver) against the C++ target"
  echo
  echo '```'
  "$tests" --gtest_filter='KernelSuiteDevices.Cuda*' 2>&1 | grep -E "^\[ +(OK|SKIPPED|FAILED|PASSED) |Failure|Skipped|buffer|kernel '" || true
  echo '```'
  echo
  "$bench" --gpu | sed 's/^# Vulkan/## Vulkan/'
  if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo
    echo "## PyTorch on the same GPU (the bench's MLP step: 64x64 -> 128 -> 10, SGD)"
    python3 - <<'PY'
import time, torch
torch.manual_seed(0)
d = torch.device("cuda")
net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(d)
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
x, y = torch.randn(64, 64, device=d), torch.randint(0, 10, (64,), device=d)
def step():
    loss = torch.nn.functional.cross_entropy(net(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    return loss.item()
step()
t0 = time.perf_counter()
for _ in range(100): step()
print(f"| PyTorch MLP training step | {(time.perf_counter() - t0) * 10:.3f} ms |")
PY
  fi
} > "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "gpu-check: wrote $out"
