#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Reference data of kiln::vision's tests (tests/data/vision/*.safetensors).

Run from the repository root:
  python3 scripts/gen_vision_reference.py detection   # needs torch (and torchvision)
  python3 scripts/gen_vision_reference.py image       # needs OpenCV and scikit-image
  python3 scripts/gen_vision_reference.py deform geometry   # needs torch (and torchvision)
  python3 scripts/gen_vision_reference.py opencv_extra      # needs OpenCV
(On Debian the apt packages python3-opencv and python3-skimage belong to /usr/bin/python3, which
may differ from the Python that has torch: run each part with the Python that has its modules.)

Detection ops come from torchvision.ops (pip `torchvision`, installed on demand; the 0.29 wheels
run on torch 2.15 with `pip install --no-deps torchvision`). Image processing comes from OpenCV
(Debian `python3-opencv`) and scikit-image (Debian `python3-skimage`). Each file holds small
inputs and the results, written as safetensors by hand (no extra package); the tests read them
with kiln::store::load_safetensors. Inputs are seeded, so a rerun writes the same files.
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pip_ensure import ensure  # noqa: E402
from safetensors_np import save_arrays  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "vision")


def save(name, tensors):
    """Writes {name: array} as name.safetensors under OUT."""
    save_arrays(os.path.join(OUT, name + ".safetensors"), tensors)


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
    # Position-sensitive RoI Align: 2 output channels of 2 x 3 cells (no zero-size boxes, which
    # torchvision averages over no samples into NaN).
    xp = rng.normal(0, 1, (2, 12, 7, 9)).astype(np.float32)
    bp = np.concatenate([rng.integers(0, 2, (5, 1)).astype(np.float32), random_boxes(rng, 5, 9.0) * 1.2 - 1], 1)
    t["ps_x"], t["ps_boxes"] = xp, bp
    for ratio in (-1, 2):
        t[f"ps_{ratio if ratio > 0 else 'a'}"] = tvo.ps_roi_align(torch.from_numpy(xp), torch.from_numpy(bp), (2, 3),
                                                                  0.9, ratio).numpy()
    save("roi", t)


def nchw(a):
    """HWC (or HW) -> [1, C, H, W]."""
    return (a[None, None] if a.ndim == 2 else a.transpose(2, 0, 1)[None]).copy()


def per_image(f, x, out_channels=None):
    """Applies f (an HWC or HW numpy function) to each image of NCHW x."""
    outs = []
    for img in x:
        a = img[0] if img.shape[0] == 1 else img.transpose(1, 2, 0)
        outs.append(nchw(np.asarray(f(np.ascontiguousarray(a))))[0])
    return np.stack(outs)


def image():
    import cv2
    import skimage.data
    import skimage.measure

    rng = np.random.default_rng(3636)
    t = {}
    rgb_f = rng.uniform(0, 1, (2, 3, 7, 9)).astype(np.float32)
    rgb_f[0, :, 0, 0] = [0.5, 0.5, 0.5]  # gray: hue 0
    rgb_f[0, :, 0, 1] = [0, 0, 0]
    rgb_u8 = rng.integers(0, 256, (2, 3, 7, 9)).astype(np.uint8)
    cam = cv2.resize(skimage.data.camera(), (23, 17), interpolation=cv2.INTER_AREA)
    gray_u8 = np.stack([nchw(cam)[0], nchw(np.ascontiguousarray(255 - cam[::-1, ::-1]))[0]])  # [2, 1, 17, 23]
    gray_f = (gray_u8.astype(np.float32) / 255).astype(np.float32)
    t["rgb_f"], t["rgb_u8"], t["gray_u8"], t["gray_f"] = rgb_f, rgb_u8, gray_u8, gray_f
    # Colour.
    t["gray_of_rgb_f"] = per_image(lambda a: cv2.cvtColor(a, cv2.COLOR_RGB2GRAY), rgb_f)
    t["gray_of_rgb_u8"] = per_image(lambda a: cv2.cvtColor(a, cv2.COLOR_RGB2GRAY), rgb_u8)
    t["hsv_f"] = per_image(lambda a: cv2.cvtColor(a, cv2.COLOR_RGB2HSV), rgb_f)
    t["rgb_of_hsv_f"] = per_image(lambda a: cv2.cvtColor(a, cv2.COLOR_HSV2RGB), t["hsv_f"])
    t["yuv_f"] = per_image(lambda a: cv2.cvtColor(a, cv2.COLOR_RGB2YUV), rgb_f)
    t["rgb_of_yuv_f"] = per_image(lambda a: cv2.cvtColor(a, cv2.COLOR_YUV2RGB), t["yuv_f"])
    t["bgr_u8"] = per_image(lambda a: cv2.cvtColor(a, cv2.COLOR_RGB2BGR), rgb_u8)
    save("color", t)

    t = {"gray_u8": gray_u8, "gray_f": gray_f, "rgb_f": rgb_f}
    for k in (3, 5, 7):
        t[f"gk_{k}_0"] = cv2.getGaussianKernel(k, 0).astype(np.float32)[:, 0]
        t[f"gk_{k}_13"] = cv2.getGaussianKernel(k, 1.3).astype(np.float32)[:, 0]
    t["gk_9_0"] = cv2.getGaussianKernel(9, 0).astype(np.float32)[:, 0]
    for name, x in (("f", gray_f), ("u8", gray_u8)):
        t[f"gauss_5x3_{name}"] = per_image(lambda a: cv2.GaussianBlur(a, (3, 5), 1.2), x)
        t[f"gauss_7x7_{name}"] = per_image(lambda a: cv2.GaussianBlur(a, (7, 7), 0), x)
        t[f"box_3x5_{name}"] = per_image(lambda a: cv2.blur(a, (5, 3)), x)
        t[f"median_3_{name}"] = per_image(lambda a: cv2.medianBlur(a, 3), x)
        t[f"median_5_{name}"] = per_image(lambda a: cv2.medianBlur(a, 5), x)
        t[f"lap_1_{name}"] = per_image(lambda a: cv2.Laplacian(a, cv2.CV_32F, ksize=1), x)
        t[f"lap_3_{name}"] = per_image(lambda a: cv2.Laplacian(a, cv2.CV_32F, ksize=3), x)
    t["gauss_rgb_f"] = per_image(lambda a: cv2.GaussianBlur(a, (5, 5), 0.8), rgb_f)
    t["boxsum_3x3_f"] = per_image(lambda a: cv2.boxFilter(a, -1, (3, 3), normalize=False), gray_f)
    for dx, dy, k in ((1, 0, 3), (0, 1, 5), (1, 1, 3), (2, 0, 1), (0, 2, 7), (1, 0, 1)):
        t[f"sobel_{dx}{dy}_{k}"] = per_image(lambda a: cv2.Sobel(a, cv2.CV_32F, dx, dy, ksize=k), gray_f)
    t["sobel_u8_10_3"] = per_image(lambda a: cv2.Sobel(a, cv2.CV_32F, 1, 0, ksize=3, scale=0.5, delta=3), gray_u8)
    save("filter", t)

    t = {"gray_u8": gray_u8, "gray_f": gray_f}
    shapes = {"rect": cv2.MORPH_RECT, "cross": cv2.MORPH_CROSS, "ellipse": cv2.MORPH_ELLIPSE}
    for sname, sh in shapes.items():
        for kh, kw in ((5, 5), (3, 5), (7, 5), (4, 6)):
            t[f"se_{sname}_{kh}x{kw}"] = cv2.getStructuringElement(sh, (kw, kh))
    custom = (rng.uniform(0, 1, (3, 5)) > 0.4).astype(np.uint8)
    custom[1, 2] = 1
    t["se_custom"] = custom
    ops = {"erode": cv2.MORPH_ERODE, "dilate": cv2.MORPH_DILATE, "open": cv2.MORPH_OPEN,
           "close": cv2.MORPH_CLOSE, "gradient": cv2.MORPH_GRADIENT, "tophat": cv2.MORPH_TOPHAT,
           "blackhat": cv2.MORPH_BLACKHAT}
    for oname, o in ops.items():
        for kname in ("se_ellipse_5x5", "se_custom"):
            for name, x in (("f", gray_f), ("u8", gray_u8)):
                t[f"{oname}_{kname[3:]}_{name}"] = per_image(lambda a: cv2.morphologyEx(a, o, t[kname]), x)
    t["dilate_cross_it2_u8"] = per_image(lambda a: cv2.dilate(a, t["se_cross_3x5"], iterations=2), gray_u8)
    save("morph", t)

    t = {"gray_u8": gray_u8, "gray_f": gray_f}
    types = {"binary": cv2.THRESH_BINARY, "binary_inv": cv2.THRESH_BINARY_INV, "trunc": cv2.THRESH_TRUNC,
             "tozero": cv2.THRESH_TOZERO, "tozero_inv": cv2.THRESH_TOZERO_INV}
    for tn, ty in types.items():
        t[f"th_{tn}_u8"] = per_image(lambda a: cv2.threshold(a, 100.5, 200, ty)[1], gray_u8)
        t[f"th_{tn}_f"] = per_image(lambda a: cv2.threshold(a, 0.4, 0.9, ty)[1], gray_f)
    t["otsu_t"] = np.array([[cv2.threshold(img[0], 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)[0]]
                            for img in gray_u8])
    t["otsu_u8"] = per_image(lambda a: cv2.threshold(a, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)[1], gray_u8)
    for bs, c in ((5, 2), (7, -3.5)):
        for tn, ty in (("binary", cv2.THRESH_BINARY), ("binary_inv", cv2.THRESH_BINARY_INV)):
            t[f"adaptive_{bs}_{tn}"] = per_image(
                lambda a: cv2.adaptiveThreshold(a, 255, cv2.ADAPTIVE_THRESH_MEAN_C, ty, bs, c), gray_u8)
    t["eq_u8"] = per_image(cv2.equalizeHist, gray_u8)
    flat = np.full((1, 1, 3, 4), 7, np.uint8)
    t["flat_u8"] = flat
    t["otsu_flat_t"] = np.array([[cv2.threshold(flat[0, 0], 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)[0]]])
    t["otsu_flat"] = per_image(lambda a: cv2.threshold(a, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)[1], flat)
    t["eq_flat"] = per_image(cv2.equalizeHist, flat)
    save("threshold", t)

    t = {"gray_u8": gray_u8, "rgb_f": rgb_f}
    rot = cv2.getRotationMatrix2D((7.5, 5.0), 33.0, 0.8)
    t["rot"] = rot
    shear = np.array([[1.1, 0.3, -2.2], [-0.2, 0.9, 1.7]])
    t["shear"] = shear
    for mname, m in (("rot", rot), ("shear", shear)):
        for iname, inter in (("bilinear", cv2.INTER_LINEAR), ("nearest", cv2.INTER_NEAREST)):
            t[f"warp_{mname}_{iname}_u8"] = per_image(lambda a: cv2.warpAffine(a, m, (19, 13), flags=inter), gray_u8)
            t[f"warp_{mname}_{iname}_f"] = per_image(lambda a: cv2.warpAffine(a, m, (11, 8), flags=inter), rgb_f)
        t[f"warp_{mname}_inverse_f"] = per_image(
            lambda a: cv2.warpAffine(a, m, (11, 8), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP), rgb_f)
    save("warp", t)

    t = {}
    blobs = (rng.uniform(0, 1, (2, 1, 16, 19)) > 0.55).astype(np.uint8)
    t["blobs"] = blobs
    for i, img in enumerate(blobs):
        for conn in (4, 8):
            n, labels, stats, cents = cv2.connectedComponentsWithStatsWithAlgorithm(img[0], conn, cv2.CV_32S,
                                                                                     cv2.CCL_SAUF)
            # scikit-image numbers components in the same raster order of first pixels.
            sk = skimage.measure.label(img[0], connectivity=1 if conn == 4 else 2, background=0)
            assert (sk == labels).all(), "OpenCV and scikit-image disagree"
            t[f"labels_{i}_{conn}"], t[f"stats_{i}_{conn}"], t[f"cents_{i}_{conn}"] = labels, stats, cents
    for name, img in (("zeros", np.zeros((3, 4), np.uint8)), ("ones", np.ones((3, 4), np.uint8))):
        n, labels, stats, cents = cv2.connectedComponentsWithStatsWithAlgorithm(img, 8, cv2.CV_32S, cv2.CCL_SAUF)
        t[f"labels_{name}"], t[f"stats_{name}"], t[f"cents_{name}"] = labels, stats, cents
    save("components", t)


def deform():
    """deform_conv2d (torchvision.ops), its output and the gradients of sum(out * g) in f64."""
    ensure("torchvision", ["--no-deps", "torchvision"])
    import torch
    import torchvision.ops as tvo

    rng = np.random.default_rng(3638)
    t = {}
    # (name, B, Cin, H, W, Cout, kh, kw, weight groups, offset groups, stride, padding, dilation, mask, bias)
    cases = (("a", 2, 4, 7, 9, 6, 3, 3, 2, 2, (1, 2), (1, 1), (1, 1), True, True),
             ("b", 1, 3, 8, 6, 2, 2, 3, 1, 1, (2, 1), (0, 2), (2, 1), False, False),
             ("c", 2, 2, 5, 5, 4, 3, 1, 2, 1, (1, 1), (1, 0), (1, 1), True, False))
    for name, b, cin, h, w, cout, kh, kw, gw, go, st, pd, dl, has_mask, has_bias in cases:
        oh = (h + 2 * pd[0] - dl[0] * (kh - 1) - 1) // st[0] + 1
        ow = (w + 2 * pd[1] - dl[1] * (kw - 1) - 1) // st[1] + 1
        x = rng.normal(0, 1, (b, cin, h, w)).astype(np.float32)
        off = rng.normal(0, 1.5, (b, 2 * go * kh * kw, oh, ow)).astype(np.float32)
        wt = rng.normal(0, 0.5, (cout, cin // gw, kh, kw)).astype(np.float32)
        g = rng.normal(0, 1, (b, cout, oh, ow)).astype(np.float32)
        ins = {"x": x, "offset": off, "weight": wt, "g": g}
        if has_mask:
            ins["mask"] = rng.uniform(0, 1, (b, go * kh * kw, oh, ow)).astype(np.float32)
        if has_bias:
            ins["bias"] = rng.normal(0, 1, (cout,)).astype(np.float32)
        tt = {k: torch.from_numpy(v).double().requires_grad_(k != "g") for k, v in ins.items()}
        y = tvo.deform_conv2d(tt["x"], tt["offset"], tt["weight"], tt.get("bias"), st, pd, dl, tt.get("mask"))
        (y * tt["g"]).sum().backward()
        for k, v in ins.items():
            t[f"{name}_{k}"] = v
            if k != "g":
                t[f"{name}_grad_{k}"] = tt[k].grad.numpy()
        t[f"{name}_out"] = y.detach().numpy()
    save("deform", t)


def geometry():
    """Antialiased resize (torch interpolate), rotate and affine (torchvision.transforms.v2) and
    the colour adjustments of ColorJitter."""
    ensure("torchvision", ["--no-deps", "torchvision"])
    import torch
    import torch.nn.functional as tf
    import torchvision.transforms.v2.functional as F
    from torchvision.transforms import InterpolationMode as IM

    rng = np.random.default_rng(3639)
    t = {}
    x = rng.uniform(0, 1, (2, 3, 17, 23)).astype(np.float32)
    xu = rng.integers(0, 256, (1, 3, 17, 23)).astype(np.uint8)
    t["x"], t["xu"] = x, xu
    tx, txu = torch.from_numpy(x), torch.from_numpy(xu)
    for mode in ("bilinear", "bicubic"):
        for oh, ow in ((7, 9), (5, 11), (31, 12), (17, 23)):
            t[f"resize_{mode}_{oh}x{ow}"] = tf.interpolate(tx, (oh, ow), mode=mode, antialias=True).numpy()
        t[f"resize_{mode}_u8"] = F.resize(txu, [7, 9], interpolation=IM(mode), antialias=True).numpy()
    tx = tx[:1]  # one image is enough for the rest
    for name, kw in (("rot30", dict(angle=30.0)), ("rot30_expand", dict(angle=30.0, expand=True)),
                     ("rot_m75_center", dict(angle=-75.0, center=[4.0, 6.5])),
                     ("rot30_fill", dict(angle=30.0, fill=0.25)), ("rot90", dict(angle=90.0, expand=True))):
        for iname, im in (("bilinear", IM.BILINEAR), ("nearest", IM.NEAREST)):
            t[f"{name}_{iname}"] = F.rotate(tx, interpolation=im, **kw).numpy()
    t["rot30_u8"] = F.rotate(txu, 30.0, interpolation=IM.BILINEAR).numpy()
    for iname, im in (("bilinear", IM.BILINEAR), ("nearest", IM.NEAREST)):
        t[f"affine_{iname}"] = F.affine(tx, angle=20.0, translate=[2, -1], scale=0.9, shear=[10.0, 5.0],
                                        interpolation=im).numpy()
    t["affine_u8"] = F.affine(txu, angle=-12.0, translate=[1, 3], scale=1.2, shear=[0.0, -8.0],
                              interpolation=IM.BILINEAR, fill=40).numpy()
    for name, img in (("f", tx), ("u8", txu)):
        t[f"bright_{name}"] = F.adjust_brightness(img, 1.3).numpy()
        t[f"contrast_{name}"] = F.adjust_contrast(img, 0.6).numpy()
        t[f"sat_{name}"] = F.adjust_saturation(img, 1.7).numpy()
        t[f"hue_{name}"] = F.adjust_hue(img, 0.2).numpy()
        t[f"hue_neg_{name}"] = F.adjust_hue(img, -0.35).numpy()
    save("geometry", t)


def lab_exact(rgb):
    """RGB [N, 3, H, W] in [0, 1] -> L*a*b* with OpenCV's documented formulas (float64)."""
    x = np.clip(rgb, 0, 1)
    lin = np.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)
    m = np.array([[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169], [0.019334, 0.119193, 0.950227]])
    xyz = np.einsum("ij,njhw->nihw", m, lin) / np.array([0.950456, 1.0, 1.088754])[None, :, None, None]
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    L = np.where(xyz[:, 1] > 0.008856, 116 * f[:, 1] - 16, 903.3 * xyz[:, 1])
    return np.stack([L, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], 1)


def rgb_exact(lab):
    """The inverse of lab_exact (OpenCV's Lab2RGB formulas), RGB clipped to [0, 1]."""
    L, a, b = lab[:, 0], lab[:, 1], lab[:, 2]
    low = L <= 0.008856 * 903.3
    y = np.where(low, L / 903.3, ((L + 16) / 116) ** 3)
    fy = np.where(low, 7.787 * (L / 903.3) + 16 / 116, (L + 16) / 116)
    inv = lambda t: np.where(t <= 0.206893, (t - 16 / 116) / 7.787, t ** 3)  # noqa: E731
    xyz = np.stack([inv(a / 500 + fy) * 0.950456, y, inv(fy - b / 200) * 1.088754], 1)
    m = np.array([[3.240479, -1.53715, -0.498535], [-0.969256, 1.875991, 0.041556], [0.055648, -0.204043, 1.057311]])
    v = np.clip(np.einsum("ij,njhw->nihw", m, xyz), 0, 1)
    return np.where(v <= 0.0031308, 12.92 * v, 1.055 * v ** (1 / 2.4) - 0.055)


def opencv_extra():
    """Bilateral filter, LAB and perspective warps (OpenCV)."""
    import cv2

    rng = np.random.default_rng(3640)
    t = {}
    gray_u8 = rng.integers(0, 256, (2, 1, 13, 17)).astype(np.uint8)
    gray_u8[:, :, 4:9, 5:12] //= 4  # some flat-ish areas and edges
    rgb_u8 = rng.integers(0, 256, (1, 3, 11, 14)).astype(np.uint8)
    gray_f = (gray_u8.astype(np.float32) / 255).astype(np.float32)
    rgb_f = (rgb_u8.astype(np.float32) / 255).astype(np.float32)
    t.update(gray_u8=gray_u8, rgb_u8=rgb_u8, gray_f=gray_f, rgb_f=rgb_f)
    for name, x, sc in (("gray_u8", gray_u8, 40.0), ("rgb_u8", rgb_u8, 60.0), ("gray_f", gray_f, 0.15),
                        ("rgb_f", rgb_f, 0.3)):
        t[f"bil_{name}_5"] = per_image(lambda a: cv2.bilateralFilter(a, 5, sc, 3.0), x)
        t[f"bil_{name}_auto"] = per_image(lambda a: cv2.bilateralFilter(a, -1, sc, 1.5), x)
        t[f"bil_{name}_8"] = per_image(lambda a: cv2.bilateralFilter(a, 8, sc, 2.0), x)
    save("bilateral", t)

    t = {}
    rgb_f = rng.uniform(0, 1, (2, 3, 5, 7)).astype(np.float32)
    rgb_f[0, :, 0, 0] = [0, 0, 0]
    rgb_f[0, :, 0, 1] = [1, 1, 1]
    rgb_f[0, :, 0, 2] = [0.001, 0.002, 0.0005]  # the linear part near black
    t["rgb_f"], t["rgb_u8"] = rgb_f, rgb_u8
    t["lab_f"] = per_image(lambda a: cv2.cvtColor(a, cv2.COLOR_RGB2Lab), rgb_f)
    t["rgb_of_lab_f"] = per_image(lambda a: cv2.cvtColor(a, cv2.COLOR_Lab2RGB), t["lab_f"])
    # OpenCV's float path reads an interpolated table (about 0.1 off in L, a, b): a plain
    # implementation of its documented formulas gives the exact values too.
    t["lab_exact_f"] = lab_exact(rgb_f.astype(np.float64))
    t["rgb_of_lab_exact_f"] = rgb_exact(t["lab_exact_f"])
    t["lab_u8"] = per_image(lambda a: cv2.cvtColor(a, cv2.COLOR_RGB2Lab), rgb_u8)
    t["rgb_of_lab_u8"] = per_image(lambda a: cv2.cvtColor(a, cv2.COLOR_Lab2RGB), t["lab_u8"])
    save("lab", t)

    t = {"gray_u8": gray_u8, "rgb_f": rgb_f}
    src = np.array([[0, 0], [16, 1], [15, 12], [1, 11]], np.float32)
    dst = np.array([[2, 1], [14, 0], [17, 13], [-1, 10]], np.float32)
    t["src"], t["dst"] = src, dst
    m = cv2.getPerspectiveTransform(src, dst)
    t["m"] = m
    for iname, inter in (("bilinear", cv2.INTER_LINEAR), ("nearest", cv2.INTER_NEAREST)):
        t[f"persp_{iname}_u8"] = per_image(lambda a: cv2.warpPerspective(a, m, (19, 14), flags=inter), gray_u8)
        t[f"persp_{iname}_f"] = per_image(lambda a: cv2.warpPerspective(a, m, (6, 4), flags=inter), rgb_f)
    t["persp_inverse_f"] = per_image(
        lambda a: cv2.warpPerspective(a, m, (6, 4), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP), rgb_f)
    save("perspective", t)


def main():
    what = sys.argv[1:] or ["detection", "image", "deform", "geometry", "opencv_extra"]
    if "detection" in what:
        detection()
    if "image" in what:
        image()
    if "deform" in what:
        deform()
    if "geometry" in what:
        geometry()
    if "opencv_extra" in what:
        opencv_extra()


if __name__ == "__main__":
    main()
