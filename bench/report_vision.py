# SPDX-License-Identifier: MIT OR Apache-2.0
"""The kiln::vision section of bench/RESULTS.md: kiln_bench_vision against cv_vision_bench.py.

run.sh alternates the two programs BENCH_VISION_ROUNDS times (1 thread each) and writes
vision_kiln.<round>.tsv and vision_cv.<round>.tsv; each case keeps its best time over the rounds.
Standard library only. Alone, it prints the section for a directory of such files:

    python3 bench/report_vision.py DIR
"""
import glob
import math
import os
import sys

TARGET = 1.25  # Kiln's time at most 1.25x OpenCV's (>= 0.8x OpenCV's speed)

LABELS = {
    "vision/erode_rect3_f32": "`erode`, 3 × 3 rect, f32",
    "vision/erode_rect3_u8": "`erode`, 3 × 3 rect, u8",
    "vision/dilate_ellipse5_f32": "`dilate`, 5 × 5 ellipse, f32",
    "vision/dilate_ellipse5_u8": "`dilate`, 5 × 5 ellipse, u8",
    "vision/open_rect5_u8": "`morphology` open, 5 × 5 rect, u8",
    "vision/gaussian5_f32": "`gaussian_blur`, 5 × 5, f32",
    "vision/gaussian5_u8": "`gaussian_blur`, 5 × 5, u8",
    "vision/box5_f32": "`box_filter`, 5 × 5, f32",
    "vision/sobel_dx3_f32": "`sobel` dx, 3 × 3, f32",
    "vision/sobel_dx3_u8": "`sobel` dx, 3 × 3, u8 → f32",
    "vision/laplacian3_f32": "`laplacian`, ksize 3, f32",
    "vision/median3_u8": "`median_blur`, 3 × 3, u8",
    "vision/median5_u8": "`median_blur`, 5 × 5, u8",
    "vision/median5_f32": "`median_blur`, 5 × 5, f32",
    "vision/median7_u8": "`median_blur`, 7 × 7, u8",
    "vision/median15_u8": "`median_blur`, 15 × 15, u8 (histogram)",
    "vision/bilateral9_u8": "`bilateral_filter`, d = 9, u8",
    "vision/bilateral9_rgb_u8": "`bilateral_filter`, d = 9, RGB u8",
    "vision/bilateral5_rgb_f32": "`bilateral_filter`, d = 5, RGB f32",
    "vision/rgb_to_gray_f32": "`rgb_to_gray`, f32",
    "vision/rgb_to_gray_u8": "`rgb_to_gray`, u8",
    "vision/components8_random": "`connected_components`, 8-connected, random half-full",
    "vision/components4_random": "`connected_components`, 4-connected, random half-full",
}


def best_times(paths, prefix=""):
    """{case id: best seconds} over the result lines of paths (ids without `prefix`)."""
    best = {}
    for p in paths:
        with open(p) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) < 4 or parts[3] != "ok":
                    continue
                cid, t = parts[0][len(prefix):] if parts[0].startswith(prefix) else parts[0], float(parts[1])
                if not math.isnan(t):
                    best[cid] = min(best.get(cid, t), t)
    return best


def vision_section(d):
    kpaths = sorted(glob.glob(os.path.join(d, "vision_kiln.*.tsv")))
    cpaths = sorted(glob.glob(os.path.join(d, "vision_cv.*.tsv")))
    if not kpaths:
        return []
    kiln, cv = best_times(kpaths), best_times(cpaths, "cv_")
    out = ["### kiln::vision against OpenCV\n"]
    out.append(
        f"`kiln_bench_vision` and `cv_vision_bench.py` (OpenCV with `cv2.setNumThreads(1)`, Kiln with "
        f"`KILN_NUM_THREADS=1`) on the same 512 × 512 image, run alternately {len(kpaths)} times; each "
        "time is the best over all calls of all rounds. **ratio** = Kiln time / OpenCV time; the "
        f"target of issue 36 is ≤ {TARGET}× (Kiln at ≥ 0.8× OpenCV's speed).\n"
    )
    out.append("| op | Kiln | OpenCV | ratio | target |")
    out.append("|---|---|---|---|---|")
    met = total = 0
    for cid in list(LABELS) + sorted(set(kiln) - set(LABELS)):
        k, c = kiln.get(cid), cv.get(cid)
        if k is None:
            continue
        ratio = k / c if c else None
        verdict = "—" if ratio is None else ("met" if ratio <= TARGET else "**missed**")
        if ratio is not None:
            total += 1
            met += ratio <= TARGET
        cells = [LABELS.get(cid, cid), f"{k * 1e3:.3f} ms", "—" if c is None else f"{c * 1e3:.3f} ms",
                 "—" if ratio is None else f"{ratio:.2f}×", verdict]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    if total:
        out.append(f"{met} of {total} cases within {TARGET}× of OpenCV.\n")
    return out


if __name__ == "__main__":
    print("\n".join(vision_section(sys.argv[1] if len(sys.argv) > 1 else ".")))
