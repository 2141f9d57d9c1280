# SPDX-License-Identifier: MIT OR Apache-2.0
"""What the demos' browser tests share (fashion-mnist/test_demo.py, resnet/test_demo.py): run a
page's test.html in headless Chromium (scripts/browser_run.py), compare arrays it posts with
native Kiln's reference, check the refusal of a truncated file, print the module's size and
times, and write a screenshot of index.html."""
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../scripts"))
from browser_run import run_page, screenshot  # noqa: E402


def max_diff(a, b):
    """The largest |a - b| over two lists of numbers (infinity when their lengths differ)."""
    if len(a) != len(b):
        return float("inf")
    return max(abs(x - y) for x, y in zip(a, b))


def check_page(page_dir, ref_path, bounds, webgpu_bounds=None):
    """Runs test.html in page_dir and compares each key of `bounds` with the reference within its
    bound, and each key of `webgpu_bounds` (key: (reference key, bound)), the page's results on
    WebGPU, which the page must have. Returns (what the page posted, failures)."""
    with open(ref_path) as f:
        ref = json.load(f)
    got = run_page(page_dir, "test.html", timeout=240)
    if "error" in got:
        sys.exit(f"test.html failed: {got['error']}")
    failures = []
    if webgpu_bounds and not got.get("webgpu_present"):
        failures.append("the page has no WebGPU device (Chromium gives one: --enable-unsafe-webgpu, SwiftShader)")
    checks = [(k, k, b) for k, b in bounds.items()]
    checks += [(k, r, b) for k, (r, b) in (webgpu_bounds or {}).items() if got.get("webgpu_present")]
    for key, ref_key, bound in checks:
        d = max_diff(got[key], ref[ref_key])
        print(f"{key}: {len(got[key])} values, max difference from native Kiln {d:.3g} (bound {bound:g})")
        if not d <= bound:
            failures.append(f"{key} differ from native Kiln's by {d:.3g} > {bound:g}")
    if "safetensors" not in got["bad_file_error"]:
        failures.append(f"a truncated file gave no clear error: {got['bad_file_error']!r}")
    print(f"bad file: {got['bad_file_error']}")
    return got, failures


def finish(page_dir, got, failures):
    """Prints the module's size and times, exits on failures, else writes the screenshot."""
    wasm = os.path.join(page_dir, "kiln_demo.wasm")
    js = os.path.join(page_dir, "kiln_demo.js")
    gz = sum(len(gzip.compress(open(p, "rb").read(), 9)) for p in (wasm, js))
    print(f"module: {os.path.getsize(wasm)} + {os.path.getsize(js)} bytes, {gz} gzipped; "
          f"{got['ms_per_image_first']:.2f} ms per image at first, {got['ms_per_image']:.2f} ms after a second; "
          f"first prediction at {got['first_prediction_ms']:.0f} ms")
    if got.get("webgpu_present"):
        print(f"WebGPU: {got['webgpu_ms_per_image_first']:.2f} ms per image at first, "
              f"{got['webgpu_ms_per_image']:.2f} ms after a second")
    if failures:
        sys.exit("\n".join(failures))
    shot = os.path.join(page_dir, "screenshot.png")
    screenshot(page_dir, "index.html", shot, 1000, 1100)
    print(f"screenshot of index.html: {shot}")
    print("ok")
