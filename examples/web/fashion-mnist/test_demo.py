#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The browser test of the Fashion-MNIST page (CTest web_demo_fashion_mnist, wasm build).

Serves the built page folder, runs test.html in headless Chromium (scripts/browser_run.py) and
compares what it posts with native Kiln's results on the same code (reference.json, written by
web_demo_reference): class probabilities within 1e-5, fine-tuning losses within 1e-4. Also checks
that a truncated safetensors file is refused with a message, prints the module's size, the
time per image and the time to the first prediction, and writes a screenshot of index.html
(PAGE_DIR/screenshot.png).

Usage: test_demo.py PAGE_DIR REFERENCE.json"""
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../scripts"))
from browser_run import run_page, screenshot  # noqa: E402


def max_diff(a, b):
    if len(a) != len(b):
        return float("inf")
    return max(abs(x - y) for x, y in zip(a, b))


def main():
    page_dir, ref_path = sys.argv[1], sys.argv[2]
    with open(ref_path) as f:
        ref = json.load(f)
    got = run_page(page_dir, "test.html", timeout=240)
    if "error" in got:
        sys.exit(f"test.html failed: {got['error']}")
    failures = []
    for key, bound in (("probs", 1e-5), ("tuned_probs", 1e-5), ("losses", 1e-4)):
        d = max_diff(got[key], ref[key])
        print(f"{key}: {len(got[key])} values, max difference from native Kiln {d:.3g} (bound {bound:g})")
        if not d <= bound:
            failures.append(f"{key} differ from native Kiln's by {d:.3g} > {bound:g}")
    losses = got["losses"]
    if not losses[-1] < losses[0]:
        failures.append(f"fine-tuning did not lower the loss: {losses}")
    if "safetensors" not in got["bad_file_error"]:
        failures.append(f"a truncated file gave no clear error: {got['bad_file_error']!r}")
    wasm = os.path.join(page_dir, "kiln_demo.wasm")
    js = os.path.join(page_dir, "kiln_demo.js")
    gz = sum(len(gzip.compress(open(p, "rb").read(), 9)) for p in (wasm, js))
    print(f"bad file: {got['bad_file_error']}")
    print(f"module: {os.path.getsize(wasm)} + {os.path.getsize(js)} bytes, {gz} gzipped; "
          f"{got['ms_per_image_first']:.2f} ms per image at first, {got['ms_per_image']:.2f} ms after a second; "
          f"first prediction at {got['first_prediction_ms']:.0f} ms")
    if failures:
        sys.exit("\n".join(failures))
    shot = os.path.join(page_dir, "screenshot.png")
    screenshot(page_dir, "index.html", shot, 1000, 1100)
    print(f"screenshot of index.html: {shot}")
    print("ok")


if __name__ == "__main__":
    main()
