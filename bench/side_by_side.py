#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""A few benchmark cases of kiln_bench and torch_bench.py (or kiln_onnx_bench and ort_bench.py)
in alternated rounds, best of each, with the ratio PyTorch time / Kiln time: the quick check of
a change without `make bench`. On a shared machine the load hits both sides of a round alike.

  side_by_side.py [--rounds 3] [--reps 5] [--threads 1 2] [--build build/release]
                  [--onnx MODEL ...] [--save] PREFIX ...

PREFIX: a case-id prefix (BENCH_ONLY), e.g. reduce/ or pool/adaptive. Reduction rows also show
the fraction of the read bandwidth (calib/read_bw of the same Kiln process). --onnx MODEL runs
that fixture at batch 1 through kiln_onnx_bench (run-time path and generated code) against
ONNX Runtime. Prints a Markdown table; --save also keeps it as this CPU model's quick checks
(bench/results/, through machine_results.py, with its regression check)."""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


OUT = []


def emit(line):
    print(line, flush=True)
    OUT.append(line)


def run(cmd, env):
    out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False).stdout
    return out.splitlines()


def tsv(lines):
    rows = {}
    for ln in lines:
        f = ln.split("\t")
        if len(f) >= 4 and f[3] == "ok" and float(f[1]) > 0:
            rows[f[0]] = (float(f[1]), float(f[2]))
    return rows


def keep_best(best, rows):
    for k, (s, b) in rows.items():
        if k not in best or s < best[k][0]:
            best[k] = (s, b)


def bench_ops(a, t, env):
    kiln, torch = {}, {}
    for _ in range(a.rounds):
        for p in a.prefix:
            e = dict(env, BENCH_ONLY=p)
            keep_best(kiln, tsv(run([os.path.join(a.build, "bench/kiln_bench"), "--threads", str(t), "--reps",
                                     str(a.reps)], e)))
            keep_best(torch, tsv(run([sys.executable, "bench/torch_bench.py", "--threads", str(t), "--reps",
                                      str(a.reps)], e)))
    rbw = kiln.get("calib/read_bw")
    for k in sorted(kiln):
        if k.startswith("calib/") or k not in torch:
            continue
        ks, kb = kiln[k]
        ts = torch[k][0]
        bw = ""
        if k.startswith("reduce/") and rbw and "softmax" not in k:
            read = rbw[1] / rbw[0]
            bw = "%.0f%% / %.0f%%" % (100 * kb / ks / read, 100 * kb / ts / read)
        emit("| %s | %d | %.3f ms | %.3f ms | %.2fx | %s |" % (k, t, ks * 1e3, ts * 1e3, ts / ks, bw))


def parse_onnx(lines):
    rows = {}
    for ln in lines:
        f = ln.split()
        if len(f) == 5 and f[2] == "b=1":
            rows[(f[0], f[1])] = float(f[4])
    return rows


def bench_onnx(a, t, env):
    for model in a.onnx:
        best = {}
        for _ in range(a.rounds):
            for cmd in ([os.path.join(a.build, "bench/onnx/kiln_onnx_bench"), "20", model, str(t), "1"],
                        [sys.executable, "bench/onnx/ort_bench.py", "20", model, str(t), "1"]):
                for k, v in parse_onnx(run(cmd, env)).items():
                    best[k] = min(best.get(k, 1e30), v)
        ort = best.get((model, "ort"))
        for impl in ("kiln-runtime", "kiln-codegen"):
            if (model, impl) in best and ort:
                ms = best[(model, impl)]
                emit("| onnx %s b=1 %s | %d | %.3f ms | %.3f ms (ORT) | %.2fx | |" % (model, impl, t, ms, ort, ort / ms))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--build", default=os.environ.get("BUILD_DIR", "build/release"))
    ap.add_argument("--onnx", nargs="*", default=[])
    ap.add_argument("--save", action="store_true", help="keep the table in bench/results/ (this CPU model)")
    ap.add_argument("prefix", nargs="*")
    a = ap.parse_args()
    emit("| case | threads | Kiln | PyTorch | speedup | % of read BW (Kiln / PyTorch) |")
    emit("|---|---:|---:|---:|---:|---|")
    for t in a.threads:
        n = str(t)
        env = dict(os.environ, KILN_NUM_THREADS=n, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n)
        if a.prefix:
            bench_ops(a, t, env)
        bench_onnx(a, t, env)
    if a.save:
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write("Alternated rounds (%d), best of each; load average at the end: %s.\n\n" %
                    (a.rounds, " ".join(open("/proc/loadavg").read().split()[:3])))
            f.write("\n".join(OUT) + "\n")
        subprocess.run([sys.executable, os.path.join(HERE, "machine_results.py"), "quick", f.name], check=False)
        os.unlink(f.name)


if __name__ == "__main__":
    main()
