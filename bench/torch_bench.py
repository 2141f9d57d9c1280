#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""PyTorch side of the benchmark suite: the same cases as kiln_bench.cpp, same output format.

    python3 bench/torch_bench.py [--threads N] [--reps R] [--smoke]

One tab-separated line per measurement: id, seconds per call (best of R after warm-up),
bytes moved per call, status. Run by bench/run.sh with the thread count pinned in the
environment too (OMP/MKL/OpenBLAS variables).
"""
import argparse
import sys
import time

import torch


def best_of(f, reps, warmup=2):
    for _ in range(warmup):
        f()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def emit(case_id, seconds, nbytes, status="ok"):
    print(f"{case_id}\t{seconds:.9g}\t{nbytes:.0f}\t{status}", flush=True)


def case(case_id, nbytes, reps, f, inner=1, warmup=2):
    def sample():
        for _ in range(inner):
            f()

    try:
        emit(case_id, best_of(sample, reps, warmup) / inner, nbytes)
    except Exception as e:  # noqa: BLE001 - report and continue
        emit(case_id, 0, nbytes, "skip: " + str(e).replace("\t", " ").replace("\n", " ")[:100])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    reps = 1 if a.smoke else a.reps
    warm = 0 if a.smoke else 2
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)

    side = 64 if a.smoke else 4096
    n = side * side
    fb = n * 4
    x = torch.rand(side, side) * 8 - 4
    y = torch.rand(side, side) * 8 - 4
    row = torch.rand(side) * 8 - 4
    gelu = torch.nn.functional.gelu

    cases = [
        ("unary/relu", 2 * fb, lambda: torch.relu(x)),
        ("unary/exp", 2 * fb, lambda: torch.exp(x)),
        ("unary/sigmoid", 2 * fb, lambda: torch.sigmoid(x)),
        ("unary/gelu", 2 * fb, lambda: gelu(x)),
        ("unary/tanh", 2 * fb, lambda: torch.tanh(x)),
        ("binary/add", 3 * fb, lambda: x + y),
        ("binary/mul", 3 * fb, lambda: x * y),
        ("binary/mul_bcast_row", 2 * fb + side * 4, lambda: x * row),
        ("reduce/sum_all", fb, lambda: x.sum()),
        ("reduce/sum_last", fb, lambda: x.sum(-1)),
        ("reduce/sum_first", fb, lambda: x.sum(0)),
        ("reduce/amax_all", fb, lambda: x.amax()),
        ("reduce/softmax_last", 2 * fb, lambda: torch.softmax(x, -1)),
    ]
    for cid, nb, f in cases:
        case(cid, nb, reps, f, warmup=warm)

    # The elementwise cases again writing into a preallocated output: PyTorch's functional
    # form pays for a fresh 64 MiB allocation (mmap + page faults) on every call, Kiln's
    # caching allocator does not; this column separates kernel speed from allocation cost.
    o = torch.empty_like(x)
    out_cases = [
        ("unary/relu", 2 * fb, lambda: torch.clamp_min(x, 0, out=o)),
        ("unary/exp", 2 * fb, lambda: torch.exp(x, out=o)),
        ("unary/sigmoid", 2 * fb, lambda: torch.sigmoid(x, out=o)),
        ("unary/gelu", 2 * fb, lambda: torch._C._nn.gelu(x, out=o)),
        ("unary/tanh", 2 * fb, lambda: torch.tanh(x, out=o)),
        ("binary/add", 3 * fb, lambda: torch.add(x, y, out=o)),
        ("binary/mul", 3 * fb, lambda: torch.mul(x, y, out=o)),
        ("binary/mul_bcast_row", 2 * fb + side * 4, lambda: torch.mul(x, row, out=o)),
    ]
    for cid, nb, f in out_cases:
        case(cid + "@out", nb, reps, f, warmup=warm)

    # Per-op overhead on 4 elements, as a PyTorch user pays it (including the Python call).
    s = torch.tensor([1.0, 2.0, 3.0, 4.0])
    t = torch.tensor([0.5, 0.25, 2.0, 1.0])
    inner = 10 if a.smoke else 100000
    with torch.inference_mode():
        case("overhead/add", 0, reps, lambda: s + t, inner, warm)
        case("overhead/exp", 0, reps, lambda: s.exp(), inner, warm)
        case("overhead/sum", 0, reps, lambda: s.sum(), inner, warm)
    print(f"# torch {torch.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
