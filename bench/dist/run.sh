#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# The distributed benchmarks on this machine (make bench runs this when kiln_bench_dist is built):
# the all-reduce of 1 KB to 256 MB on 2 ranks, Kiln against MPI_Allreduce on the same buffers
# (with and without the ranks' call check) and against torch.distributed (gloo) when PyTorch is
# installed; and one epoch of the Fashion-MNIST CNN on 1 and 2 ranks. Writes bench/dist/RESULTS.md.
#
# Environment: BUILD_DIR (default build/release), DIST_IMAGES (CNN epoch size, default 12800),
# MPIRUN (default "mpirun --allow-run-as-root --oversubscribe").
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build/release}
BIN="$BUILD_DIR/bench/dist/kiln_bench_dist"
OUT=bench/dist/RESULTS.md
RAW="$BUILD_DIR/bench/dist/raw"
IMAGES=${DIST_IMAGES:-12800}
read -r -a MPIRUN <<<"${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}"
[ -x "$BIN" ] || { echo "bench/dist/run.sh: $BIN not built (needs MPI)" >&2; exit 1; }
mkdir -p "$RAW"
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "bench/dist: all-reduce, 2 ranks"
load_start=$(load)
KILN_NUM_THREADS=1 "${MPIRUN[@]}" -np 2 "$BIN" allreduce | tee "$RAW/allreduce.tsv"
KILN_DIST_CHECK=0 KILN_NUM_THREADS=1 "${MPIRUN[@]}" -np 2 "$BIN" allreduce | tee "$RAW/allreduce_nocheck.tsv"
: > "$RAW/gloo.tsv"
if python3 -c 'import torch.distributed' 2>/dev/null; then
  echo "bench/dist: torch.distributed (gloo), 2 ranks"
  OMP_NUM_THREADS=1 python3 -m torch.distributed.run --nproc_per_node 2 bench/dist/torch_allreduce.py |
    tee "$RAW/gloo.tsv" || true
fi
echo "bench/dist: CNN epoch ($IMAGES images, batch 128)"
KILN_NUM_THREADS=1 "${MPIRUN[@]}" -np 1 "$BIN" cnn --images "$IMAGES" | tee "$RAW/cnn_1r1t.tsv"
KILN_NUM_THREADS=2 "${MPIRUN[@]}" -np 1 "$BIN" cnn --images "$IMAGES" | tee "$RAW/cnn_1r2t.tsv"
KILN_NUM_THREADS=1 "${MPIRUN[@]}" -np 2 "$BIN" cnn --images "$IMAGES" | tee "$RAW/cnn_2r1t.tsv"
load_end=$(load)
python3 - "$RAW" "$OUT" "$load_start" "$load_end" <<'PY'
import sys, os, subprocess
raw, out, l0, l1 = sys.argv[1:5]
def rows(name):
    p = os.path.join(raw, name)
    if not os.path.exists(p): return []
    return [l.split("\t") for l in open(p).read().splitlines() if l and not l.startswith("#")]
def size(b):
    b = int(b)
    return f"{b >> 20} MB" if b >= 1 << 20 else f"{b >> 10} KB"
ar = {r[0]: r for r in rows("allreduce.tsv")}
nc = {r[0]: r for r in rows("allreduce_nocheck.tsv")}
gl = {r[0]: r for r in rows("gloo.tsv")}
cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
L = ["# Distributed benchmarks", "",
     f"`bench/dist/run.sh` on {cpu}, {os.cpu_count()} cores, Open MPI (shared memory between the ranks), "
     f"load average {l0} at the start and {l1} at the end. Times are the best of 5 batches of calls, "
     "the slowest rank's time per call. MPI's ranks poll while they wait: when other processes "
     "load the cores (a load average above the core count) the times scatter widely, in both "
     "directions; compare runs on an idle machine.", "",
     "## All-reduce (sum, f32), 2 ranks", "",
     "Bandwidth = bytes / time. Kiln runs each collective on its communication thread after the ranks "
     "compare their calls (one small exchange); `KILN_DIST_CHECK=0` leaves the comparison out. "
     "Target: Kiln at least 90% of `MPI_Allreduce`'s bandwidth.", "",
     "| size | MPI_Allreduce | Kiln | Kiln / MPI | Kiln, no check | no check / MPI | gloo (torch) | Kiln / gloo |",
     "|---|---|---|---|---|---|---|---|"]
for b, r in ar.items():
    mpi, k = float(r[1]), float(r[2])
    n = nc.get(b); g = gl.get(b)
    kn = float(n[2]) if n else None
    gs = float(g[1]) if g else None
    def bw(t): return f"{int(b) / t / 1e9:.2f} GB/s ({t * 1e6:.1f} µs)" if t < 1e-3 else f"{int(b) / t / 1e9:.2f} GB/s ({t * 1e3:.2f} ms)"
    L.append(f"| {size(b)} | {bw(mpi)} | {bw(k)} | {mpi / k:.0%} | {bw(kn) if kn else '-'} | "
             f"{(float(n[1]) / kn if n else 0):.0%} | {bw(gs) if gs else '-'} | {(gs / k if gs else 0):.2f}× |")
L += ["", "## Fashion-MNIST CNN, one epoch", "",
      "The CNN of `examples/fashion-mnist` (420k parameters, 1.7 MB of gradients in 1 MiB buckets), "
      "AdamW, global batch 128, a timed epoch after a warm-up epoch. *wait* is the time spent waiting "
      "for all-reduces after backward returned (communication not hidden by backward).", "",
      "| ranks × threads | epoch | images/s | speed-up vs 1 × 1 | efficiency | backward | wait after backward | buckets started during backward |",
      "|---|---|---|---|---|---|---|---|"]
base = None
for name, label in [("cnn_1r1t.tsv", "1 × 1"), ("cnn_1r2t.tsv", "1 × 2"), ("cnn_2r1t.tsv", "2 × 1")]:
    r = rows(name)
    if not r: continue
    r = r[0]
    ranks, images, ep, bwd, wt, bk, la = int(r[0]), int(r[2]), float(r[5]), float(r[6]), float(r[7]), float(r[8]), float(r[9])
    if base is None: base = ep
    cores = ranks * int(r[1])
    L.append(f"| {label} | {ep:.2f} s | {images / ep:.0f} | {base / ep:.2f}× | {base / ep / cores:.0%} | "
             f"{bwd:.2f} s | {wt:.3f} s | {la:.1f} of {bk:.1f} |")
L += ["", "Efficiency = speed-up / cores used. This machine has 2 cores, so 2 ranks use all of them: "
      "compare 2 × 1 (data parallel) with 1 × 2 (one process, two threads).", ""]
open(out, "w").write("\n".join(L))
print("bench/dist: wrote", out)
PY
