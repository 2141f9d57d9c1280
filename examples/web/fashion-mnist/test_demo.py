#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The browser test of the Fashion-MNIST page (CTest web_demo_fashion_mnist, wasm build).

Serves the built page folder, runs test.html in headless Chromium and compares what it posts
with native Kiln's results on the same code (reference.json, written by web_demo_reference):
class probabilities within 1e-5, fine-tuning losses within 1e-4, and the same on the page's
WebGPU device within 1e-4 (the browser must have one: Chromium does, on SwiftShader). Also checks that a truncated
safetensors file is refused with a message, prints the module's size, the time per image and
the time to the first prediction, and writes a screenshot of index.html (PAGE_DIR/screenshot.png).

Usage: test_demo.py PAGE_DIR REFERENCE.json"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../common"))
from page_test import check_page, finish  # noqa: E402


def main():
    page_dir, ref_path = sys.argv[1], sys.argv[2]
    got, failures = check_page(page_dir, ref_path, {"probs": 1e-5, "tuned_probs": 1e-5, "losses": 1e-4},
                               {"webgpu_probs": ("probs", 1e-4), "webgpu_tuned_probs": ("tuned_probs", 1e-4),
                                "webgpu_losses": ("losses", 1e-4)})
    for key in ("losses", "webgpu_losses"):
        losses = got.get(key, [0])
        if not losses[-1] < losses[0]:
            failures.append(f"fine-tuning did not lower the loss ({key}): {losses}")
    finish(page_dir, got, failures)


if __name__ == "__main__":
    main()
