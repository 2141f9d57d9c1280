#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Reference data of kiln::vision's tests (tests/data/vision/*.safetensors).

Run from the repository root:  python3 scripts/gen_vision_reference.py

Detection ops come from torchvision.ops (pip `torchvision`, installed on demand; the 0.29 wheels
run on torch 2.15 with `pip install --no-deps torchvision`). Image processing comes from OpenCV
(Debian `python3-opencv`) and scikit-image (Debian `python3-skimage`). Each file holds small
inputs and the results, written as safetensors by hand (no extra package); the tests read them
with kiln::store::load_safetensors. Inputs are seeded, so a rerun writes the same files.
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pip_ensure import ensure  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "vision")

DT = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int64"): "I64",
      np.dtype("uint8"): "U8", np.dtype("int32"): "I32"}


def save(name, tensors):
    """Writes {name: array} as name.safetensors under OUT."""
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        a = np.ascontiguousarray(tensors[k])
        if a.dtype == np.bool_:
            a = a.astype(np.uint8)
        if a.dtype == np.int32:
            a = a.astype(np.int64)
        b = a.tobytes()
        header[k] = {"dtype": DT[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def random_boxes(rng, n, size=20.0):
    xy = rng.uniform(0, size, (n, 2))
    wh = rng.uniform(0, size / 2, (n, 2))
    return np.concatenate([xy, xy + wh], 1).astype(np.float32)


def detection():
    ensure("torchvision", ["--no-deps", "torchvision"])
    import torch
    import torchvision.ops as tvo

    rng = np.random.default_rng(36)
    t = {}
    a, b = random_boxes(rng, 7), random_boxes(rng, 5)
    a[3] = [4, 4, 4, 9]  # zero area
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    t["a"], t["b"] = a, b
    t["area_a"] = tvo.box_area(ta).numpy()
    t["iou"] = tvo.box_iou(ta, tb).numpy()
    t["giou"] = tvo.generalized_box_iou(ta, tb).numpy()
    for f in ("xywh", "cxcywh"):
        t["a_" + f] = tvo.box_convert(ta, "xyxy", f).numpy()
    c = random_boxes(rng, 7)
    t["c"] = c
    for r in ("none", "sum", "mean"):
        t["giou_loss_" + r] = np.asarray(tvo.generalized_box_iou_loss(ta, torch.from_numpy(c), reduction=r).numpy())
    logits = rng.normal(0, 2, (4, 6)).astype(np.float32)
    targets = (rng.uniform(0, 1, (4, 6)) > 0.6).astype(np.float32)
    t["logits"], t["targets"] = logits, targets
    for r in ("none", "sum", "mean"):
        t["focal_" + r] = np.asarray(
            tvo.sigmoid_focal_loss(torch.from_numpy(logits), torch.from_numpy(targets), reduction=r).numpy())
    t["focal_noalpha"] = tvo.sigmoid_focal_loss(torch.from_numpy(logits), torch.from_numpy(targets), alpha=-1,
                                                gamma=1.5).numpy()
    masks = rng.uniform(0, 1, (3, 9, 11)) > 0.93
    t["masks"] = masks
    t["masks_boxes"] = tvo.masks_to_boxes(torch.from_numpy(masks)).numpy()
    # NMS: random boxes, scores with ties (rounded to one decimal).
    nb = random_boxes(rng, 40)
    ns = np.round(rng.uniform(0, 1, 40), 1).astype(np.float32)
    cls = rng.integers(0, 3, 40)
    t["nms_boxes"], t["nms_scores"], t["nms_idxs"] = nb, ns, cls
    for thr in (0.3, 0.5):
        k = str(thr).replace(".", "")
        t["nms_keep_" + k] = tvo.nms(torch.from_numpy(nb), torch.from_numpy(ns), thr).numpy()
        t["batched_keep_" + k] = tvo.batched_nms(torch.from_numpy(nb), torch.from_numpy(ns),
                                                 torch.from_numpy(cls), thr).numpy()
    save("boxes", t)

    # RoI Align and RoI Pool.
    t = {}
    x = rng.normal(0, 1, (2, 3, 9, 13)).astype(np.float32)
    rois = random_boxes(rng, 6, 14.0) * 1.5 - 3  # some outside the image
    rois[2] = [5, 5, 5, 5]  # a point
    bidx = rng.integers(0, 2, (6, 1)).astype(np.float32)
    boxes = np.concatenate([bidx, rois], 1)
    t["x"], t["boxes"] = x, boxes
    tx, tbx = torch.from_numpy(x), torch.from_numpy(boxes)
    for scale in (1.0, 0.5):
        for ratio in (-1, 2):
            for aligned in (False, True):
                k = f"align_{int(scale * 10)}_{ratio if ratio > 0 else 'a'}_{int(aligned)}"
                t[k] = tvo.roi_align(tx, tbx, (3, 4), scale, ratio, aligned).numpy()
        t[f"pool_{int(scale * 10)}"] = tvo.roi_pool(tx, tbx, (3, 4), scale).numpy()
    save("roi", t)


def main():
    what = sys.argv[1:] or ["detection", "image"]
    if "detection" in what:
        detection()
    if "image" in what and "image" in globals():
        globals()["image"]()


if __name__ == "__main__":
    main()
