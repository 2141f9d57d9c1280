#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Runs Kiln's benchmarks and PyTorch's side by side, 1 and 2 threads, and writes
# bench/RESULTS.md. Called by `make bench` after the release build; installs PyTorch (CPU wheel,
# in a virtual environment under build/) when python3 cannot import it.
#
# Environment: BUILD_DIR (default build/release), BENCH_THREADS (default "1 2"),
# BENCH_RESULTS (default bench/RESULTS.md), BENCH_REPS (best of; default 10), BENCH_MEM_STEPS
# (training steps of the memory-growth run; default 1000), BENCH_NO_TORCH=1 to skip PyTorch.
# Also installs, when missing: matplotlib and onnxruntime (pip, same interpreter), valgrind (apt).
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

# ---- optional Python extras, same interpreter: matplotlib (the chart), ONNX Runtime (the hook
# below). Missing ones are installed with pip; a failure only drops the chart / the hook. ----
if [ -n "$PY" ]; then
  for mod in matplotlib onnxruntime; do
    "$PY" -c "import $mod" 2> /dev/null || "$PY" -m pip install -q "$mod" ||
      echo "run.sh: could not install $mod (pip); continuing without it" >&2
  done
fi
# valgrind: the instruction counts of the overhead benchmarks (callgrind).
command -v valgrind > /dev/null || apt_install valgrind ||
  echo "run.sh: could not install valgrind; no instruction counts" >&2

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
  if [ -n "$PY" ] && "$PY" -c 'import onnxruntime' 2> /dev/null; then
    echo "onnxruntime=$("$PY" -c 'import onnxruntime; print(onnxruntime.__version__)')"
  else
    echo "onnxruntime=none"
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

# ---- fusion (issue 9): elementwise chains unfused / fused / PyTorch eager with the copy probe,
# recording and launch overhead, and the training steps again on the plain CPU (KILN_FUSION=0;
# the main run's CPU device is the fused one) ----
FUSION_BENCH="$BUILD_DIR/bench/kiln_bench_fusion"
if [ -x "$FUSION_BENCH" ]; then
  for t in $THREADS; do
    export OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t KILN_NUM_THREADS=$t
    echo "run.sh: fusion, $t thread(s)"
    "$FUSION_BENCH" --threads "$t" --reps "$REPS" | tee "$RAW/fusion_kiln_t$t.tsv"
    if [ -n "$PY" ]; then
      "$PY" bench/torch_fusion_bench.py --threads "$t" --reps "$REPS" | tee "$RAW/fusion_torch_t$t.tsv"
    fi
    KILN_FUSION=0 BENCH_ONLY=train/ "$BENCH" --threads "$t" --reps "$REPS" | grep '^train/' |
      tee "$RAW/plain_train_t$t.tsv" || true
  done
  unset OMP_NUM_THREADS MKL_NUM_THREADS OPENBLAS_NUM_THREADS KILN_NUM_THREADS
fi

# ---- kiln::vision against OpenCV (issue 36): kiln_bench_vision and bench/cv_vision_bench.py on the
# same 512 x 512 image, 1 thread each, alternated BENCH_VISION_ROUNDS times (default 3) so that
# other load on the machine hits both; report_vision.py keeps each case's best. OpenCV is
# Debian's python3-opencv (installed when python3 cannot import cv2) ----
VISION_BENCH="$BUILD_DIR/bench/kiln_bench_vision"
if [ -x "$VISION_BENCH" ]; then
  CVPY=""  # an interpreter that imports cv2: python3, else Debian's (python3-opencv)
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import cv2' 2> /dev/null; then CVPY=$p && break; fi
  done
  if [ -z "$CVPY" ]; then
    if apt_install python3-opencv && /usr/bin/python3 -c 'import cv2' 2> /dev/null; then
      CVPY=/usr/bin/python3
    else
      echo "run.sh: could not install python3-opencv; the vision table will show Kiln only" >&2
    fi
  fi
  for r in $(seq "${BENCH_VISION_ROUNDS:-3}"); do
    echo "run.sh: vision, round $r"
    KILN_NUM_THREADS=1 OMP_NUM_THREADS=1 "$VISION_BENCH" --threads 1 --reps "$REPS" | tee "$RAW/vision_kiln.$r.tsv"
    if [ -n "$CVPY" ]; then
      OMP_NUM_THREADS=1 "$CVPY" bench/cv_vision_bench.py --threads 1 --reps "$REPS" | tee "$RAW/vision_cv.$r.tsv"
    fi
  done
fi

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

# ---- the remote device on loopback: per-op cost, read round trip, 256 MB upload and download
# against a plain socket copy (kiln_bench_remote starts its own kiln-server; docs/remote.md) ----
REMOTE_BENCH="$BUILD_DIR/bench/kiln_bench_remote"
if [ -x "$REMOTE_BENCH" ]; then
  echo "run.sh: remote"
  "$REMOTE_BENCH" | tee "$RAW/remote.tsv" || true
fi

# ---- peak memory of a training step and its growth over BENCH_MEM_STEPS steps: each model in a
# fresh process (Kiln, then PyTorch), 1 thread; see kiln_bench_train.cpp for the method ----
MEM_STEPS=${BENCH_MEM_STEPS:-1000}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 KILN_NUM_THREADS=1
for model in mlp cnn; do
  echo "run.sh: memory, $model, $MEM_STEPS steps"
  "$BENCH" --threads 1 --memory "$model" "$MEM_STEPS" | tee -a "$RAW/kiln_mem.tsv" || true
  if [ -n "$PY" ]; then
    "$PY" bench/torch_bench.py --threads 1 --memory "$model" "$MEM_STEPS" | tee -a "$RAW/torch_mem.tsv" || true
  fi
done
unset OMP_NUM_THREADS MKL_NUM_THREADS OPENBLAS_NUM_THREADS KILN_NUM_THREADS

# ---- instruction counts of the overhead cases under callgrind (instrumented loop only) ----
if command -v valgrind > /dev/null; then
  echo "run.sh: callgrind, overhead ops"
  for op in add exp sum add_ad exp_ad sum_ad; do
    iters=20000
    KILN_NUM_THREADS=1 OMP_NUM_THREADS=1 valgrind --tool=callgrind --instr-atstart=no \
      --callgrind-out-file="$RAW/callgrind.$op.out" "$BENCH" --callgrind-overhead "$op" "$iters" \
      > /dev/null 2> "$RAW/callgrind.$op.log" || continue
    ir=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$RAW/callgrind.$op.out" | head -1)
    [ -n "$ir" ] && printf '%s\t%s\t%s\n' "$op" "$iters" "$ir" | tee -a "$RAW/callgrind.tsv"
    rm -f "$RAW/callgrind.$op.out"
  done
fi

# ---- edit-compile-run: touch a ~100-line training program, rebuild its target alone with the
# build system (ccache off: the compiler really runs), run it until its first training step ----
ECR_BIN="$BUILD_DIR/bench/kiln_bench_train_model"
if [ -f "$BUILD_DIR/CMakeCache.txt" ] && [ -x "$ECR_BIN" ]; then
  echo "run.sh: edit-compile-run"
  # Untimed: bring the target's dependencies (libkiln) up to date, so only the edit is timed.
  cmake --build "$BUILD_DIR" --target kiln_bench_train_model > "$RAW/ecr_build.log" 2>&1 || true
  for _ in 1 2 3; do
    touch bench/train_model.cpp
    t0=$(date +%s.%N)
    CCACHE_DISABLE=1 cmake --build "$BUILD_DIR" --target kiln_bench_train_model > "$RAW/ecr_build.log" 2>&1 || {
      echo "run.sh: rebuild of kiln_bench_train_model failed (see $RAW/ecr_build.log)" >&2
      break
    }
    t1=$(date +%s.%N)
    "$ECR_BIN" --steps 1 | grep -q "step 1 done" || { echo "run.sh: train_model gave no marker" >&2; break; }
    t2=$(date +%s.%N)
    echo "$t0 $t1 $t2" | awk '{printf "%.3f %.3f %.3f\n", $3 - $1, $2 - $1, $3 - $2}' | tee -a "$RAW/ecr.txt"
  done
fi

# ---- ONNX Runtime hook: the ONNX importer's benchmark (bench/onnx/: kiln_onnx_bench, built when
# bench/CMakeLists.txt adds that directory, and ort_bench.py) runs here when present; the raw
# lines go to $RAW/onnx_kiln.txt and $RAW/onnx_ort.txt, which report.py prints as they are ----
if [ -n "$PY" ] && [ -f bench/onnx/ort_bench.py ] && "$PY" -c 'import onnxruntime' 2> /dev/null; then
  if [ -x "$BUILD_DIR/bench/onnx/kiln_onnx_bench" ]; then
    echo "run.sh: ONNX models, Kiln"
    "$BUILD_DIR/bench/onnx/kiln_onnx_bench" | tee "$RAW/onnx_kiln.txt" || true
  fi
  echo "run.sh: ONNX models, ONNX Runtime"
  "$PY" bench/onnx/ort_bench.py | tee "$RAW/onnx_ort.txt" || true
fi

# ---- distributed (kiln::dist, built with MPI): all-reduce against MPI_Allreduce and gloo, the
# CNN epoch on 1 and 2 ranks; bench/dist/run.sh writes its own bench/dist/RESULTS.md ----
if [ -x "$BUILD_DIR/bench/dist/kiln_bench_dist" ]; then
  BUILD_DIR="$BUILD_DIR" bash bench/dist/run.sh || echo "run.sh: the distributed benchmarks failed" >&2
fi

# ---- Vulkan (lavapipe on machines without a GPU): counters, not speed; bench/VULKAN.md ----
if [ -x "$BUILD_DIR/bench/kiln_bench_vulkan" ]; then
  echo "run.sh: Vulkan"
  XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp} "$BUILD_DIR/bench/kiln_bench_vulkan" > bench/VULKAN.md ||
    echo "run.sh: the Vulkan benchmark failed" >&2
fi

# ---- the kernel language: tracing, rendering, compile caches, the C++ target; bench/KERNELS.md ----
if [ -x "$BUILD_DIR/bench/kiln_bench_kernel" ]; then
  echo "run.sh: kernel language"
  "$BUILD_DIR/bench/kiln_bench_kernel" > bench/KERNELS.md || echo "run.sh: the kernel-language benchmark failed" >&2
fi

# ---- the web: the demo pages' size, time per image against native and time to the first
# prediction, in headless Chromium, when the wasm build has it (make wasm); bench/WEB.md ----
if [ -f build/wasm/examples/web/fashion-mnist/kiln_demo.wasm ] && [ -x "$BUILD_DIR/examples/web/web_demo_reference" ]; then
  echo "run.sh: web"
  python3 scripts/gen_web_bench.py --wasm build/wasm --native "$BUILD_DIR" --out bench/WEB.md ||
    echo "run.sh: the web benchmark failed" >&2
fi

# ---- the micro target: flash, RAM and instructions per inference of the generated models under
# QEMU (Cortex-M3, Cortex-M55 with and without Helium); bench/MICRO.md ----
if [ -d "$BUILD_DIR/tests/micro" ] && command -v qemu-system-arm > /dev/null; then
  echo "run.sh: micro"
  python3 scripts/gen_micro_bench.py --build "$BUILD_DIR" --out bench/MICRO.md ||
    echo "run.sh: the micro benchmark failed" >&2
fi

echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg 2> /dev/null || echo ?)" >> "$RAW/meta.txt"
# report.py needs only the standard library; with matplotlib importable it also draws the chart.
"${PY:-python3}" bench/report.py --dir "$RAW" --out "$RESULTS" --chart "$(dirname "$RESULTS")/results.png"
echo "run.sh: wrote $RESULTS"
# One results file per CPU model (bench/results/), with the regression check against the last one.
"${PY:-python3}" bench/machine_results.py full "$RESULTS" || echo "run.sh: machine_results.py failed" >&2
