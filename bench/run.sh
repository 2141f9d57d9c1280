#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Runs Kiln's benchmarks and PyTorch's side by side, 1 and 2 threads, and writes
# bench/RESULTS.md. Called by `make bench` after the release build; installs PyTorch (CPU wheel,
# in a virtual environment under build/) when python3 cannot import it.
#
# Environment: BUILD_DIR (default build/release), BENCH_THREADS (default "1 2"),
# BENCH_RESULTS (default bench/RESULTS.md), BENCH_REPS (best of; default 10), BENCH_NO_TORCH=1
# to skip PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build/release}
THREADS=${BENCH_THREADS:-"1 2"}
REPS=${BENCH_REPS:-10}
RESULTS=${BENCH_RESULTS:-bench/RESULTS.md}
BENCH="$BUILD_DIR/bench/kiln_bench"
RAW="$BUILD_DIR/bench/raw"

if [ ! -x "$BENCH" ]; then
  echo "run.sh: $BENCH not found; build first (make bench does)" >&2
  exit 1
fi

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  echo "run.sh: installing $*"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@"
}

command -v python3 > /dev/null || apt_install python3

# ---- PyTorch: use python3's if it has one, else a venv with the CPU wheel -------------------
PY=""
if [ "${BENCH_NO_TORCH:-0}" != 1 ]; then
  if python3 -c 'import torch' 2> /dev/null; then
    PY=python3
  else
    VENV="build/pyvenv"
    if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import torch' 2> /dev/null; then
      python3 -m venv "$VENV" 2> /dev/null || { apt_install python3-venv && python3 -m venv "$VENV"; }
      "$VENV/bin/pip" install -q torch ||
        echo "run.sh: could not install PyTorch; the table will show Kiln only" >&2
    fi
    "$VENV/bin/python" -c 'import torch' 2> /dev/null && PY="$VENV/bin/python"
  fi
fi

rm -rf "$RAW"
mkdir -p "$RAW"

# ---- what ran where ---------------------------------------------------------------------
CXX=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt" 2> /dev/null || true)
CXX=${CXX:-c++}
FLAGS=$(sed -n 's/^CMAKE_CXX_FLAGS:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt" 2> /dev/null || true)
BTYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt" 2> /dev/null || true)
HWY=$(sed -n 's/^KILN_WITH_HWY:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt" 2> /dev/null || true)
commit=$(git rev-parse --short HEAD 2> /dev/null || echo unknown)
git diff --quiet HEAD 2> /dev/null || commit="$commit (with uncommitted changes)"
{
  echo "cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  echo "cores=$(nproc) online; $(lscpu | sed -n 's/^Thread(s) per core: *//p') thread(s) per core"
  echo "caches=L1d $(lscpu | sed -n 's/^L1d cache: *//p'), L2 $(lscpu | sed -n 's/^L2 cache: *//p'), L3 $(lscpu | sed -n 's/^L3 cache: *//p')"
  echo "reps=$REPS"
  echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg 2> /dev/null || echo ?)"
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit=$commit"
  echo "compiler=$("$CXX" --version | head -1)"
  echo "flags=${BTYPE:-?} ${FLAGS:-(default flags)}, Highway ${HWY:-?}"
  if [ -n "$PY" ]; then
    echo "torch=$("$PY" -c 'import torch; print(torch.__version__)') ($("$PY" -c 'import platform; print(platform.python_version())'))"
  else
    echo "torch=none"
  fi
} > "$RAW/meta.txt"

# ---- the runs: Kiln then PyTorch for each thread count, same pinning -------------------------
for t in $THREADS; do
  export OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t KILN_NUM_THREADS=$t
  echo "run.sh: Kiln, $t thread(s)"
  "$BENCH" --threads "$t" --reps "$REPS" | tee "$RAW/kiln_t$t.tsv"
  if [ -n "$PY" ]; then
    echo "run.sh: PyTorch, $t thread(s)"
    "$PY" bench/torch_bench.py --threads "$t" --reps "$REPS" | tee "$RAW/torch_t$t.tsv"
  fi
done
unset OMP_NUM_THREADS MKL_NUM_THREADS OPENBLAS_NUM_THREADS KILN_NUM_THREADS

# ---- compile time of a model file (no ccache: the compiler itself) ----------------------------
COMPILE_CMD="$CXX -std=c++20 -O2 -Iinclude -c bench/compile_model.cpp -o $RAW/compile_model.o"
echo "compile_cmd=${COMPILE_CMD/$RAW\//}" >> "$RAW/meta.txt"
echo "run.sh: compile time"
TIMEFORMAT='%R %U %S'  # wall, user and system seconds of the compiler
for _ in 1 2 3; do
  { time $COMPILE_CMD 2> "$RAW/compile.err"; } 2>> "$RAW/compile.txt"
  tail -1 "$RAW/compile.txt"
done

# ---- loading weights: a 400 MB safetensors file and a 400 MB .pth against read() ---------------
STORE_BENCH="$BUILD_DIR/bench/kiln_store_bench"
if [ -x "$STORE_BENCH" ]; then
  echo "run.sh: loading weights"
  PTH_ARGS=()
  if [ -n "$PY" ] && "$PY" -c "import torch; torch.save({f'layers.{i}.weight': torch.randn(4096, 1024) for i in range(25)}, '$RAW/model.pth')"; then
    PTH_ARGS=(--pth "$RAW/model.pth")
  fi
  "$STORE_BENCH" --dir "$RAW" "${PTH_ARGS[@]}" | tee "$RAW/store.txt"
  rm -f "$RAW/model.pth" "$RAW"/*.safetensors
fi

echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg 2> /dev/null || echo ?)" >> "$RAW/meta.txt"
python3 bench/report.py --dir "$RAW" --out "$RESULTS"
echo "run.sh: wrote $RESULTS"
