#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The web section of the benchmarks (bench/WEB.md; bench/run.sh calls it when the wasm build
has the demo pages): each page's size, its time per image against native Kiln's on one thread,
and the time from opening the page to its first prediction.

- size: kiln_demo.wasm + kiln_demo.js, raw and gzip -9 (what a server would send);
- time per image: test.html's single-image calls, the first 32 (V8 runs its baseline code
  then) and the best of 5 x 32 after a second of calls (its optimizing compiler has run), best of
  3 page loads, against the page's reference program with --time (the same code natively, one
  thread, best of 5 x 32 calls);
- first prediction: performance.now() when the 16 sample predictions return (the module
  fetched, compiled and started, the weights loaded);
- the WebGPU device's costs (bench/web/webgpu.cpp in a page, beside the page's CPU device): a
  read of one op's result, an op recorded in a batch, 4 MiB moved each way.

Usage: scripts/gen_web_bench.py [--wasm build/wasm] [--native build/release] [--out bench/WEB.md]
"""
import argparse
import datetime
import gzip
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from browser_run import chromium, run_page  # noqa: E402


# The pages: folder under examples/web, native reference program, what the page runs.
PAGES = [
    ("fashion-mnist", "web_demo_reference", "the main job's CNN (420k parameters), deterministic test weights"),
    ("resnet", "web_resnet_reference", "a ResNet from ONNX through generated code (175k parameters), trained"),
]


def measure(wasm_dir, native_dir, demo, reference):
    """The numbers of one page (a dict), or None when it is not built."""
    page = os.path.join(wasm_dir, "examples/web", demo)
    files = [os.path.join(page, f) for f in ("kiln_demo.wasm", "kiln_demo.js")]
    if not all(os.path.exists(f) for f in files):
        return None
    samples = os.path.join(ROOT, "examples/web/fashion-mnist/samples.bin")
    runs = [run_page(page, "test.html", timeout=240) for _ in range(3)]
    for r in runs:
        if "error" in r:
            sys.exit(f"gen_web_bench: {demo}/test.html failed: {r['error']}")

    def native_ms_per_image(env):
        r = subprocess.run([os.path.join(native_dir, "examples/web", reference), samples, "--time"],
                           capture_output=True, text=True, check=True, env=dict(os.environ, **env))
        return float(r.stdout.strip())

    return {
        "raw": sum(os.path.getsize(f) for f in files),
        "gz": sum(len(gzip.compress(open(f, "rb").read(), 9)) for f in files),
        "wasm_ms": min(r["ms_per_image"] for r in runs),
        "first32_ms": min(r["ms_per_image_first"] for r in runs),
        "first_ms": min(r["first_prediction_ms"] for r in runs),
        "webgpu_ms": min(r.get("webgpu_ms_per_image", float("inf")) for r in runs),
        "native_ms": native_ms_per_image({}),
        "portable_ms": native_ms_per_image({"KILN_ONEDNN": "0"}),  # the kernels the page runs, natively
    }


def webgpu_costs(wasm_dir):
    """bench/web's measurements (a dict), or None when the page is not built."""
    page = os.path.join(wasm_dir, "bench/web")
    if not os.path.exists(os.path.join(page, "kiln_web_bench_webgpu.wasm")):
        return None
    r = run_page(page, "page.html", timeout=240)
    got = json.loads(r.get("log", "{}").strip().splitlines()[-1])
    if r.get("code") != 0 or "error" in got:
        sys.exit(f"gen_web_bench: bench/web/page.html failed: {r.get('log')}")
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wasm", default="build/wasm")
    ap.add_argument("--native", default="build/release")
    ap.add_argument("--out", default="bench/WEB.md")
    a = ap.parse_args()
    pages = [(demo, what, measure(a.wasm, a.native, demo, ref)) for demo, ref, what in PAGES]
    pages = [p for p in pages if p[2]]
    if not pages:
        sys.exit("gen_web_bench: no demo page is built (make wasm)")
    version = subprocess.run([chromium(), "--version"], capture_output=True, text=True).stdout.strip()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows = [
        ("module size (`kiln_demo.wasm` + `kiln_demo.js`)", lambda m: f"{m['raw'] / 1e6:.2f} MB", ""),
        ("the same, gzip -9", lambda m: f"{m['gz'] / 1e6:.2f} MB", "<= 2 MB"),
        ("time per image, page (CPU, WebAssembly), first 32 calls (V8's baseline code)",
         lambda m: f"{m['first32_ms']:.3f} ms", ""),
        ("time per image, page, after a second of calls (V8's optimized code)", lambda m: f"{m['wasm_ms']:.3f} ms", ""),
        ("time per image, native Kiln, one thread", lambda m: f"{m['native_ms']:.3f} ms", ""),
        ("page / native", lambda m: f"{m['wasm_ms'] / m['native_ms']:.2f}x", "<= 3x"),
        ("time per image, native Kiln's portable kernels (`KILN_ONEDNN=0`), one thread",
         lambda m: f"{m['portable_ms']:.3f} ms", ""),
        ("page / native portable kernels", lambda m: f"{m['wasm_ms'] / m['portable_ms']:.2f}x", ""),
        ("page start to the first predictions", lambda m: f"{m['first_ms']:.0f} ms", "<= 1000 ms"),
        ("time per image, page on WebGPU (SwiftShader here: a CPU), after a second of calls",
         lambda m: f"{m['webgpu_ms']:.1f} ms", ""),
    ]
    head = "| what | " + " | ".join(f"`{d}`" for d, _, _ in pages) + " | target |"
    table = [head, "|---|" + "---:|" * len(pages) + "---:|"]
    for label, fmt, target in rows:
        table.append(f"| {label} | " + " | ".join(fmt(m) for _, _, m in pages) + f" | {target} |")
    pages_text = "\n".join(f"- `examples/web/{d}`: {what}." for d, what, _ in pages)
    costs = webgpu_costs(a.wasm)
    costs_text = "" if not costs else f"""
What the WebGPU device costs, in a page of the same browser (`bench/web/webgpu.cpp`, best of 5;
adds of 256 floats, each on the last one's result):

| | WebGPU (SwiftShader) | CPU device of the same page | ratio |
|---|---:|---:|---:|
| one op, then a read of its result | {costs['gpu_read_ms']:.3f} ms | {costs['cpu_read_ms']:.4f} ms | {costs['gpu_read_ms'] / costs['cpu_read_ms']:.0f}x |
| each further op of a batch of 1000 before the read | {costs['gpu_op_ms']:.4f} ms | {costs['cpu_op_ms']:.4f} ms | {costs['gpu_op_ms'] / costs['cpu_op_ms']:.1f}x |
| 4 MiB from the page's memory to the device | {costs['upload_4mib_ms']:.2f} ms | | |
| 4 MiB from the device to the page's memory | {costs['download_4mib_ms']:.2f} ms | | |

A read costs a submission, the wait for the device (a Promise the page's event loop resolves)
and a mapping: keep values on the device between ops and read once.
"""
    text = f"""# Kiln in the browser: size and speed

Written by `scripts/gen_web_bench.py` (called by `bench/run.sh`) on {now}: the demo pages built
by `make wasm` (emscripten 3.1.6, -O3, SIMD128, no threads), in headless {version} on this
machine, against the same code built natively (each page's reference program with `--time`, one
thread). The page's numbers are the best of 3 page loads.

{pages_text}

{chr(10).join(table)}

The native build uses oneDNN's convolutions and AVX2 or AVX-512 through Highway; the pages run
Kiln's portable kernels on 4-lane SIMD128 without fused multiply-add. Weights are downloaded
apart from the module: the CNN's trained file is 1.7 MB of f32, the ResNet's 0.7 MB.

The WebGPU row is the same page with the network moved to `Device::webgpu()`: on a machine
without a GPU, Chromium's WebGPU adapter is SwiftShader, which runs the kernels on the CPU, so
this time says nothing about a GPU (no target). Each call there is one batch of dispatches and
one read of the result, which waits for the device (docs/web.md, "The WebGPU device").
{costs_text}"""
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, a.out)
    print(text)


if __name__ == "__main__":
    main()
