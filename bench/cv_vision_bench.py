# SPDX-License-Identifier: MIT OR Apache-2.0
"""OpenCV side of bench/kiln_bench_vision.cpp: the same cases and images with cv2, ids prefixed cv_.

    python3 bench/cv_vision_bench.py [--threads N] [--reps R] [--size S]

Needs numpy and cv2 (Debian python3-opencv). Kiln's images are planar [1, C, H, W]; OpenCV's
are H x W (x 3, interleaved, for RGB): the same pixels.
"""
import argparse
import os
import time

import cv2
import numpy as np


def hash_bytes(n, start=0):
    """Top byte of splitmix64(i) for i in [start, start + n) (kiln_bench_vision.cpp's hash_byte)."""
    with np.errstate(over="ignore"):
        z = np.arange(start, start + n, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return (z >> np.uint64(56)).astype(np.uint8)


def best_of(reps, f):
    f()
    f()
    best = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--size", type=int, default=512)
    a = ap.parse_args()
    cv2.setNumThreads(a.threads)
    s = a.size
    g8 = hash_bytes(s * s).reshape(s, s)
    gf = g8.astype(np.float32) / np.float32(255)
    rgb8 = np.ascontiguousarray(hash_bytes(3 * s * s).reshape(3, s, s).transpose(1, 2, 0))
    rgbf = rgb8.astype(np.float32) / np.float32(255)
    fg = (g8 < 128).astype(np.uint8)
    rect3 = np.ones((3, 3), np.uint8)
    rect5 = np.ones((5, 5), np.uint8)
    ell5 = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5))
    only = os.environ.get("BENCH_ONLY", "")
    cases = [
        ("vision/erode_rect3_f32", lambda: cv2.erode(gf, rect3)),
        ("vision/erode_rect3_u8", lambda: cv2.erode(g8, rect3)),
        ("vision/dilate_ellipse5_f32", lambda: cv2.dilate(gf, ell5)),
        ("vision/dilate_ellipse5_u8", lambda: cv2.dilate(g8, ell5)),
        ("vision/open_rect5_u8", lambda: cv2.morphologyEx(g8, cv2.MORPH_OPEN, rect5)),
        ("vision/gaussian5_f32", lambda: cv2.GaussianBlur(gf, (5, 5), 0)),
        ("vision/gaussian5_u8", lambda: cv2.GaussianBlur(g8, (5, 5), 0)),
        ("vision/box5_f32", lambda: cv2.blur(gf, (5, 5))),
        ("vision/sobel_dx3_f32", lambda: cv2.Sobel(gf, cv2.CV_32F, 1, 0, ksize=3)),
        ("vision/sobel_dx3_u8", lambda: cv2.Sobel(g8, cv2.CV_32F, 1, 0, ksize=3)),
        ("vision/laplacian3_f32", lambda: cv2.Laplacian(gf, cv2.CV_32F, ksize=3)),
        ("vision/median3_u8", lambda: cv2.medianBlur(g8, 3)),
        ("vision/median5_u8", lambda: cv2.medianBlur(g8, 5)),
        ("vision/median5_f32", lambda: cv2.medianBlur(gf, 5)),
        ("vision/median7_u8", lambda: cv2.medianBlur(g8, 7)),
        ("vision/median15_u8", lambda: cv2.medianBlur(g8, 15)),
        ("vision/bilateral9_u8", lambda: cv2.bilateralFilter(g8, 9, 75, 75)),
        ("vision/bilateral9_rgb_u8", lambda: cv2.bilateralFilter(rgb8, 9, 75, 75)),
        ("vision/bilateral5_rgb_f32", lambda: cv2.bilateralFilter(rgbf, 5, 0.3, 3)),
        ("vision/rgb_to_gray_f32", lambda: cv2.cvtColor(rgbf, cv2.COLOR_RGB2GRAY)),
        ("vision/rgb_to_gray_u8", lambda: cv2.cvtColor(rgb8, cv2.COLOR_RGB2GRAY)),
        ("vision/components8_random",
         lambda: cv2.connectedComponentsWithStats(fg, connectivity=8, ltype=cv2.CV_32S)),
        ("vision/components4_random",
         lambda: cv2.connectedComponentsWithStats(fg, connectivity=4, ltype=cv2.CV_32S)),
    ]
    for cid, f in cases:
        if only and not cid.startswith(only):
            continue
        print(f"cv_{cid}\t{best_of(a.reps, f):.9g}\t{s * s}\tok", flush=True)


if __name__ == "__main__":
    main()
