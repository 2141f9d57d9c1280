#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Writes examples/web/fashion-mnist/samples.bin: the first 16 images of Fashion-MNIST's test set
(from Debian's dataset-fashion-mnist), which the page offers to classify and to label for
fine-tuning, and which its browser test and native reference use. Format: 16 labels (uint8),
then 16 images of 28 x 28 uint8 pixels, row-major.

Usage: scripts/gen_web_samples.py [OUT]"""
import gzip
import os
import sys

DATA = "/usr/share/datasets/fashion-mnist"
COUNT = 16


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "examples/web/fashion-mnist/samples.bin")
    with gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")) as f:
        images = f.read()
    with gzip.open(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")) as f:
        labels = f.read()
    assert images[:4] == b"\x00\x00\x08\x03" and labels[:4] == b"\x00\x00\x08\x01", "not IDX files"
    data = labels[8:8 + COUNT] + images[16:16 + COUNT * 784]
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out)
    print(f"wrote {out}: {COUNT} images, labels {list(labels[8:8 + COUNT])}")


if __name__ == "__main__":
    main()
