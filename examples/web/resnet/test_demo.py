#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The browser test of the ResNet page (CTest web_demo_resnet, wasm build).

Serves the built page folder, runs test.html in headless Chromium and compares the class
probabilities it posts for the 16 samples with native Kiln's on the same generated code
(reference.json, written by web_resnet_reference) within 1e-5, and its answers with the
reference's. Also checks that a truncated safetensors file is refused with a message, prints
the module's size and times, and writes a screenshot of index.html (PAGE_DIR/screenshot.png).

Usage: test_demo.py PAGE_DIR REFERENCE.json"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../common"))
from page_test import check_page, finish  # noqa: E402


def main():
    page_dir, ref_path = sys.argv[1], sys.argv[2]
    got, failures = check_page(page_dir, ref_path, {"probs": 1e-5}, {"webgpu_probs": ("probs", 1e-4)})
    with open(ref_path) as f:
        ref = json.load(f)
    probs = got["probs"]
    answers = [max(range(10), key=lambda c: probs[10 * i + c]) for i in range(16)]
    right = sum(a == y for a, y in zip(answers, ref["labels"]))
    print(f"answers: {right} of 16 match the labels; native Kiln's: {ref['predicted']}")
    if answers != ref["predicted"]:
        failures.append(f"the page's answers {answers} differ from native Kiln's {ref['predicted']}")
    finish(page_dir, got, failures)


if __name__ == "__main__":
    main()
