#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""ONNX Runtime on the real-architecture fixtures (tests/fixtures/onnx), batch 1 and 16, 1 and 2
threads, best of N: the reference for bench/onnx/kiln_onnx_bench.cpp (same output lines).
Usage: ort_bench.py [reps=20] [model] [threads] [batch] (as kiln_onnx_bench: a model, thread
count or batch given alone runs only the matching cases)"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from pip_ensure import ensure  # noqa: E402

ensure("onnxruntime", ["onnxruntime"])
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

FX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "onnx")


def inputs_for(model, b):
    if model == "bert":
        return [(np.arange(b * 16) % 100).reshape(b, 16).astype(np.int64), np.ones((b, 16), np.int64)]
    if model == "lstm":
        return [np.random.randn(b, 16, 12).astype(np.float32)]
    return [np.random.randn(b, 3, 32, 32).astype(np.float32)]


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    only = sys.argv[2] if len(sys.argv) > 2 else ""
    only_threads = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    only_batch = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    for threads in (1, 2):
        if only_threads and threads != only_threads:
            continue
        for name in ["resnet", "mobilenet", "bert", "lstm", "unet"]:
            if only and name != only:
                continue
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            s = ort.InferenceSession(os.path.join(FX, name, "model.onnx"), so, providers=["CPUExecutionProvider"])
            names = [i.name for i in s.get_inputs()]
            for b in (1, 16):
                if only_batch and b != only_batch:
                    continue
                feeds = dict(zip(names, inputs_for(name, b)))
                s.run(None, feeds)
                s.run(None, feeds)
                best = 1e30
                for _ in range(reps):
                    t0 = time.perf_counter()
                    s.run(None, feeds)
                    best = min(best, (time.perf_counter() - t0) * 1e3)
                print("%s ort b=%d t=%d %.3f" % (name, b, threads, best), flush=True)


if __name__ == "__main__":
    main()
