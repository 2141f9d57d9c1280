#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Turns the raw outputs of bench/run.sh into bench/RESULTS.md (standard library only).

    python3 bench/report.py --dir <raw results dir> --out bench/RESULTS.md

The raw dir holds kiln_t<N>.tsv and torch_t<N>.tsv (lines: id, seconds, bytes, status),
meta.txt (key=value lines) and compile.txt (seconds of each compile-time run).
"""
import argparse
import os
import re
import sys

# Targets from issue 2 ("Speed") and issue 8.
ELEMENTWISE_TARGET = 0.70  # of copy bandwidth
REDUCTION_TARGET = 0.70  # of read bandwidth
OVERHEAD_TARGET_NS = 1000.0
COMPILE_TARGET_S = 1.5

LABELS = {
    "unary/relu": "relu",
    "unary/exp": "exp",
    "unary/sigmoid": "sigmoid",
    "unary/gelu": "gelu (erf)",
    "unary/tanh": "tanh",
    "binary/add": "add",
    "binary/mul": "mul",
    "binary/mul_bcast_row": "mul, broadcast row [4096] over [4096, 4096]",
    "reduce/sum_all": "sum over all",
    "reduce/sum_last": "sum(-1)",
    "reduce/sum_first": "sum(0)",
    "reduce/amax_all": "amax over all",
    "reduce/softmax_last": "softmax(-1)",
    "overhead/add": "x + y",
    "overhead/exp": "x.exp()",
    "overhead/sum": "x.sum()",
}


def read_tsv(path):
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 4:
                continue
            row = (float(parts[1]), float(parts[2]), parts[3])
            old = rows.get(parts[0])
            # A calibration measured twice (start and end of the run): the faster one counts.
            if parts[0].startswith("calib/") and old is not None and ok(old) and (not ok(row) or old[0] <= row[0]):
                continue
            rows[parts[0]] = row
    return rows


def read_meta(path):
    meta = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    meta[k] = v
    return meta


def fmt_time(s):
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e9:.0f} ns"


def ok(row):
    return row is not None and row[2] == "ok" and row[0] > 0


def cell_time(row):
    if row is None:
        return "—"
    if not ok(row):
        return "skipped¹" if row[2].startswith("skip") else "—"
    return fmt_time(row[0])


def speedup(k, t):
    """PyTorch time / Kiln time: above 1 means Kiln is faster."""
    if ok(k) and ok(t):
        return f"{t[0] / k[0]:.2f}×"
    return "—"


def pct(row, bw):
    if ok(row) and bw:
        return row[1] / row[0] / bw * 100
    return None


def fmt_pct(p):
    return "—" if p is None else f"{p:.0f}%"


def verdict(p, target):
    if p is None:
        return "not measured"
    return "met" if p >= target * 100 else "**missed**"


def thread_section(t, kiln, torch, have_torch):
    lines = []
    copy = kiln.get("calib/copy_bw")
    read = kiln.get("calib/read_bw")
    copy_bw = copy[1] / copy[0] if ok(copy) else None
    read_bw = read[1] / read[0] if ok(read) else None
    lines.append(f"### {t} thread{'s' if t != 1 else ''}\n")
    lines.append(
        f"Calibration (this process, {t} thread{'s' if t != 1 else ''}, 64 MiB buffers like the operands, best of "
        "three calibrations spread over the run): "
        f"copy bandwidth **{copy_bw / 1e9:.1f} GB/s** (memcpy, bytes read + written), "
        f"read bandwidth **{read_bw / 1e9:.1f} GB/s** (sum of an f32 array).\n"
        if copy_bw and read_bw
        else "Calibration failed.\n"
    )
    tp = "PyTorch" if have_torch else "PyTorch (not available)"
    lines.append("#### Elementwise, f32, 16M elements ([4096, 4096], contiguous)\n")
    lines.append(
        f"| op | Kiln | {tp} | PyTorch `out=` | speedup vs PyTorch | vs `out=` "
        "| Kiln % copy BW | PyTorch `out=` % copy BW | target ≥ 70% |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for cid in [c for c in LABELS if c.startswith(("unary/", "binary/"))]:
        k, p, po = kiln.get(cid), torch.get(cid), torch.get(cid + "@out")
        kp = pct(k, copy_bw)
        lines.append(
            f"| {LABELS[cid]} | {cell_time(k)} | {cell_time(p)} | {cell_time(po)} | {speedup(k, p)} "
            f"| {speedup(k, po)} | {fmt_pct(kp)} | {fmt_pct(pct(po, copy_bw))} "
            f"| {verdict(kp, ELEMENTWISE_TARGET)} |"
        )
    lines.append("")
    lines.append("#### Reductions and softmax, f32, [4096, 4096]\n")
    lines.append(f"| op | Kiln | {tp} | speedup | Kiln % of BW | PyTorch % of BW | target ≥ 70% |")
    lines.append("|---|---:|---:|---:|---:|---:|---|")
    for cid in [c for c in LABELS if c.startswith("reduce/")]:
        k, p = kiln.get(cid), torch.get(cid)
        is_softmax = "softmax" in cid
        bw = copy_bw if is_softmax else read_bw
        kp = pct(k, bw)
        unit = " (copy BW)" if is_softmax else " (read BW)"
        lines.append(
            f"| {LABELS[cid]} | {cell_time(k)} | {cell_time(p)} | {speedup(k, p)} "
            f"| {fmt_pct(kp)}{unit if kp is not None else ''} | {fmt_pct(pct(p, bw))} "
            f"| {verdict(kp, REDUCTION_TARGET)} |"
        )
    lines.append("")
    lines.append("#### Per-op overhead, f32, 4 elements (ns per call)\n")
    lines.append(f"| op | Kiln (C++) | {tp} (Python) | speedup | target ≤ 1 µs |")
    lines.append("|---|---:|---:|---:|---|")
    for cid in [c for c in LABELS if c.startswith("overhead/")]:
        k, p = kiln.get(cid), torch.get(cid)
        kt = f"{k[0] * 1e9:.0f} ns" if ok(k) else cell_time(k)
        pt = f"{p[0] * 1e9:.0f} ns" if ok(p) else cell_time(p)
        v = ("met" if k[0] * 1e9 <= OVERHEAD_TARGET_NS else "**missed**") if ok(k) else "not measured"
        lines.append(f"| `{LABELS[cid]}` | {kt} | {pt} | {speedup(k, p)} | {v} |")
    lines.append("")
    return lines


# ---- matmul (gemm owner's block) ---------------------------------------------------------------
MATMUL_TARGET = 0.50  # portable GEMM vs oneDNN sgemm
MATMUL_LABELS = {
    "matmul/f32_16": ("16 x 16 x 16", "calib/onednn_sgemm_16"),
    "matmul/f32_64": ("64 x 64 x 64", "calib/onednn_sgemm_64"),
    "matmul/f32_256": ("256 x 256 x 256", "calib/onednn_sgemm_256"),
    "matmul/f32_512": ("512 x 512 x 512", "calib/onednn_sgemm_512"),
    "matmul/f32_1024": ("1024 x 1024 x 1024", "calib/onednn_sgemm_1024"),
    "matmul/f32_2048": ("2048 x 2048 x 2048", "calib/onednn_sgemm_2048"),
    "matmul/bmm_32x128x128x128": ("bmm 32 x [128 x 128] x [128 x 128]", None),
    "matmul/odd_1000x1001x999": ("[1000 x 1001] x [1001 x 999]", None),
    "matmul/mv_4096": ("mat-vec [4096 x 4096] x [4096]", None),
}


def gflops(row):
    """The matmul rows carry the flop count in the bytes field."""
    return row[1] / row[0] / 1e9 if ok(row) else None


def matmul_section(t, kiln, torch, have_torch):
    if not any(c in kiln for c in MATMUL_LABELS):
        return []
    f = lambda v: "—" if v is None else f"{v:.1f}"  # noqa: E731
    r = lambda x, y: "—" if x is None or y is None else f"{x / y:.2f}×"  # noqa: E731
    tp = "PyTorch" if have_torch else "PyTorch (n/a)"
    lines = [f"#### Matrix multiply, f32, {t} thread{'s' if t != 1 else ''} (GFLOP/s)\n"]
    lines.append(
        "Kiln runs `kiln::matmul` through oneDNN (the default build) and through its portable packed "
        "GEMM (`KILN_ONEDNN=0`); oneDNN sgemm is `dnnl_sgemm` called directly in the same process. "
        "Ratios above 1 mean Kiln is faster.\n"
    )
    lines.append(
        f"| product | Kiln | Kiln portable | oneDNN sgemm | {tp} | Kiln / oneDNN | portable / oneDNN "
        f"| Kiln / {tp} | portable / {tp} | portable ≥ 50% of oneDNN | Kiln % of FMA peak |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    peak = next((r[1] / r[0] / 1e9 for c, r in kiln.items() if c.startswith("calib/fma_peak/") and ok(r)), None)
    for cid, (label, calib) in MATMUL_LABELS.items():
        k, p, d, pt = (gflops(kiln.get(cid)), gflops(kiln.get(cid + "/portable")),
                       gflops(kiln.get(calib)) if calib else None, gflops(torch.get(cid)))
        v = "not measured" if p is None or d is None else ("met" if p >= MATMUL_TARGET * d else "**missed**")
        v = v if calib and int(cid.rsplit("_", 1)[1]) >= 256 else ""  # the target covers n = 256..2048
        lines.append(
            f"| {label} | {f(k)} | {f(p)} | {f(d)} | {f(pt)} | {r(k, d)} | {r(p, d)} | {r(k, pt)} | {r(p, pt)} "
            f"| {v} | {'—' if k is None or not peak else f'{k / peak * 100:.0f}%'} |"
        )
    lines.append("")
    return lines
# ---- end of the matmul block ----


# ---- pooling (pool owner's block) ------------------------------------------------------------
POOL_LABELS = {
    "pool/max_pool2d_3x3s2": "max_pool2d 3x3, stride 2, pad 1",
    "pool/max_pool2d_3x3s2_indices": "max_pool2d 3x3, stride 2, pad 1, with indices",
    "pool/avg_pool2d_3x3s2": "avg_pool2d 3x3, stride 2, pad 1",
    "pool/avg_pool2d_2x2": "avg_pool2d 2x2",
    "pool/adaptive_avg_pool2d_1x1": "adaptive_avg_pool2d to 1x1",
}


def pool_section(t, kiln, torch, have_torch):
    if not any(c in kiln for c in POOL_LABELS):
        return []
    tp = "PyTorch" if have_torch else "PyTorch (n/a)"
    lines = [f"#### Pooling, f32 [32, 64, 56, 56], {t} thread{'s' if t != 1 else ''}\n"]
    lines.append(f"| op | Kiln | {tp} | speed-up | Kiln GB/s |")
    lines.append("|---|---:|---:|---:|---:|")
    for cid, label in POOL_LABELS.items():
        k, p = kiln.get(cid), torch.get(cid)
        gbs = f"{k[1] / k[0] / 1e9:.1f}" if ok(k) and k[1] else "—"
        lines.append(f"| {label} | {cell_time(k)} | {cell_time(p)} | {speedup(k, p)} | {gbs} |")
    lines.append("")
    return lines
# ---- end of the pooling block ----


# ---- autodiff (autodiff owner's block) ---------------------------------------------------------
RECORD_TARGET_NS = 2000.0  # recording overhead per op (issue 4)
AUTODIFF_CHAIN_LABELS = {
    "autodiff/add_chain/plain": "`y = y + c`, nothing requires grad",
    "autodiff/add_chain/record": "the same, recording the graph",
    "autodiff/add_chain/fwd_bwd": "recording + backward",
}
AUTODIFF_LSTM_LABELS = {
    "autodiff/lstm/fwd_bwd": "LSTM-like cell, 16 steps, forward + backward",
    "autodiff/lstm/fwd_bwd/balanced": "the same with `Checkpointing::Balanced`",
}


def autodiff_section(t, kiln, torch, have_torch):
    if not any(c in kiln for c in list(AUTODIFF_CHAIN_LABELS) + list(AUTODIFF_LSTM_LABELS)):
        return []
    tp = "PyTorch" if have_torch else "PyTorch (n/a)"
    ns = lambda r: f"{r[0] * 1e9:.0f} ns" if ok(r) else cell_time(r)  # noqa: E731
    lines = [f"#### Autodiff, {t} thread{'s' if t != 1 else ''}\n"]
    lines.append(
        "A chain of 1000 adds on [16] f32 tensors, time per add (PyTorch: Python calls, the plain row under "
        "`torch.no_grad()`). The recording overhead is the `record` row minus the `plain` row.\n"
    )
    lines.append(f"| case | Kiln (C++) | {tp} (Python) | speedup |")
    lines.append("|---|---:|---:|---:|")
    for cid, label in AUTODIFF_CHAIN_LABELS.items():
        k, p = kiln.get(cid), torch.get(cid)
        lines.append(f"| {label} | {ns(k)} | {ns(p)} | {speedup(k, p)} |")
    plain, rec = kiln.get("autodiff/add_chain/plain"), kiln.get("autodiff/add_chain/record")
    if ok(plain) and ok(rec):
        over = max(rec[0] - plain[0], 0) * 1e9
        v = "met" if over <= RECORD_TARGET_NS else "**missed**"
        lines.append(f"\nRecording overhead: **{over:.0f} ns per op** (target ≤ 2 µs: {v}).\n")
    else:
        lines.append("")
    lines.append(
        "burn-bench's autodiff case: an LSTM-like cell (4 gates of sigmoid/tanh over [32, 64] x [64, 64] "
        "matmuls, 16 time steps), forward + backward of `h.square().mean()`. Peak memory: the highest "
        "`memory_stats(cpu).in_use` during one step, above the level before it (PyTorch's CPU allocator "
        "reports none).\n"
    )
    lines.append(f"| case | Kiln | {tp} | speedup | Kiln peak memory | target: no slower than PyTorch |")
    lines.append("|---|---:|---:|---:|---:|---|")
    tref = torch.get("autodiff/lstm/fwd_bwd")
    for cid, label in AUTODIFF_LSTM_LABELS.items():
        k = kiln.get(cid)
        peak = f"{k[1] / 1024:.0f} KiB" if ok(k) else "—"
        v = ("met" if k[0] <= tref[0] else "**missed**") if ok(k) and ok(tref) else "not measured"
        v = v if cid == "autodiff/lstm/fwd_bwd" else ""  # the target is for the default device
        lines.append(f"| {label} | {cell_time(k)} | {cell_time(tref)} | {speedup(k, tref)} | {peak} | {v} |")
    lines.append("")
    return lines
# ---- end of the autodiff block ----

# ---- convolution and normalisation block ----
CONV_SHAPES = {
    "mnist_1to32_k3": "[N, 1, 28, 28] 1→32, 3x3",
    "mnist_32to64_k3": "[N, 32, 26, 26] 32→64, 3x3",
    "small_16to16_k3": "[N, 16, 16, 16] 16→16, 3x3, pad 1",
    "small_64to64_k3": "[N, 64, 8, 8] 64→64, 3x3, pad 1",
    "resnet_64to64_k3": "[N, 64, 56, 56] 64→64, 3x3, pad 1",
    "resnet_64to256_k1": "[N, 64, 56, 56] 64→256, 1x1",
}


def conv_section(t, kiln, torch, have_torch):
    if not any(c.startswith("conv/") for c in kiln):
        return []
    tp = "PyTorch" if have_torch else "PyTorch (n/a)"
    lines = [f"#### Convolution, f32, {t} thread{'s' if t != 1 else ''} (backward = input + weight gradients)\n"]
    lines.append(f"| conv2d | N | Kiln fwd | {tp} fwd | speed-up fwd | Kiln bwd | {tp} bwd | speed-up bwd | ≥ 1.0× |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for key, label in CONV_SHAPES.items():
        for n in (1, 8, 32):
            f, b = f"conv/{key}/N{n}/fwd", f"conv/{key}/N{n}/bwd"
            if f not in kiln:
                continue
            kf, pf, kb, pb = kiln.get(f), torch.get(f), kiln.get(b), torch.get(b)
            met = ""
            if ok(kf) and ok(pf) and ok(kb) and ok(pb):
                met = "met" if pf[0] >= kf[0] and pb[0] >= kb[0] else "**missed**"
            lines.append(
                f"| {label} | {n} | {cell_time(kf)} | {cell_time(pf)} | {speedup(kf, pf)} | {cell_time(kb)} | "
                f"{cell_time(pb)} | {speedup(kb, pb)} | {met} |"
            )
    for n in (1, 8):
        cid = f"conv/tr_64to32_k3_s2/N{n}/tr"
        if cid in kiln:
            k, p = kiln.get(cid), torch.get(cid)
            lines.append(
                f"| conv_transpose2d [N, 64, 28, 28] 64→32, 3x3, stride 2 | {n} | {cell_time(k)} | {cell_time(p)} | "
                f"{speedup(k, p)} | | | | |"
            )
    lines.append("")
    ln = "norm/layer_norm_8192x1024"
    if ln in kiln:
        k, p = kiln.get(ln), torch.get(ln)
        lines.append(f"#### Normalisation, f32, {t} thread{'s' if t != 1 else ''}\n")
        lines.append(f"| op | Kiln | {tp} | speed-up | Kiln GB/s |")
        lines.append("|---|---:|---:|---:|---:|")
        gbs = f"{k[1] / k[0] / 1e9:.1f}" if ok(k) and k[1] else "—"
        lines.append(f"| layer_norm [8192, 1024] | {cell_time(k)} | {cell_time(p)} | {speedup(k, p)} | {gbs} |")
        lines.append("")
    return lines
# ---- end of the convolution and normalisation block ----


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import report_more as rm  # the bench owner's sections (imports helpers from this module)
    import report_vision as rv  # kiln::vision against OpenCV

    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--chart", help="PNG path of the speed-up chart (needs matplotlib)")
    a = ap.parse_args()
    meta = read_meta(os.path.join(a.dir, "meta.txt"))
    threads = sorted(
        int(m.group(1)) for f in os.listdir(a.dir) if (m := re.fullmatch(r"kiln_t(\d+)\.tsv", f))
    )
    have_torch = meta.get("torch", "") not in ("", "none")

    out = ["# Kiln benchmark results", ""]
    out.append("Generated by `make bench` (`bench/run.sh`); do not edit by hand. See `bench/README.md`.")
    out.append("")
    out.append("Results of every CPU model measured, with regression checks: [results/README.md](results/README.md).")
    out.append("")
    out.append("| | |")
    out.append("|---|---|")
    for key, label in [
        ("cpu", "machine"),
        ("cores", "cores"),
        ("caches", "caches"),
        ("date", "date"),
        ("commit", "commit"),
        ("compiler", "compiler"),
        ("flags", "Kiln build"),
        ("torch", "PyTorch"),
    ]:
        out.append(f"| {label} | {meta.get(key, '?')} |")
    out.append(
        f"| load average (1, 5, 15 min) | {meta.get('load_start', '?')} at the start, "
        f"{meta.get('load_end', '?')} at the end |"
    )
    out.append("")
    out.append(
        f"Times are the best of {meta.get('reps', '10')} calls after 2 warm-up calls; overheads are "
        f"the best of {meta.get('reps', '10')} loops of 100 000 calls. **speedup** = PyTorch time / Kiln time (above 1: Kiln is "
        "faster). Bandwidth percentages count bytes read + written per call (elementwise, "
        "softmax) against the copy bandwidth, or bytes read (reductions) against the read "
        "bandwidth, both measured in the same run with the same thread count. Kiln and "
        "PyTorch run back to back with `KILN_NUM_THREADS`, `OMP_NUM_THREADS`, "
        "`MKL_NUM_THREADS`, `OPENBLAS_NUM_THREADS` and `torch.set_num_threads` set alike."
    )
    out.append("")
    out.append("## Summary\n")
    summary = []
    for t in threads:
        kiln = read_tsv(os.path.join(a.dir, f"kiln_t{t}.tsv"))
        copy, read = kiln.get("calib/copy_bw"), kiln.get("calib/read_bw")
        cbw = copy[1] / copy[0] if ok(copy) else None
        rbw = read[1] / read[0] if ok(read) else None
        ew = [pct(kiln.get(c), cbw) for c in LABELS if c.startswith(("unary/", "binary/"))]
        rd = [pct(kiln.get(c), rbw) for c in LABELS if c.startswith("reduce/") and "softmax" not in c]
        ov = [kiln[c][0] * 1e9 for c in LABELS if c.startswith("overhead/") and ok(kiln.get(c))]
        ewm = [p for p in ew if p is not None]
        rdm = [p for p in rd if p is not None]
        s = f"- {t} thread{'s' if t != 1 else ''}: "
        s += (
            f"elementwise {min(ewm):.0f}–{max(ewm):.0f}% of copy bandwidth "
            f"({sum(p >= 70 for p in ewm)}/{len(ewm)} at ≥ 70%)"
            if ewm
            else "elementwise not measured"
        )
        s += (
            f"; reductions {min(rdm):.0f}–{max(rdm):.0f}% of read bandwidth "
            f"({sum(p >= 70 for p in rdm)}/{len(rdm)} at ≥ 70%)"
            if rdm
            else "; reductions not measured yet"
        )
        s += f"; per-op overhead {min(ov):.0f}–{max(ov):.0f} ns" if ov else ""
        summary.append(s + ".")
    comp = []  # (wall, cpu) seconds per compile
    cpath = os.path.join(a.dir, "compile.txt")
    if os.path.exists(cpath):
        with open(cpath) as f:
            for line in f:
                p = line.split()
                if len(p) == 3:
                    comp.append((float(p[0]), float(p[1]) + float(p[2])))
    if comp:
        best = min(c[0] for c in comp)
        cpu = min(c[1] for c in comp)
        v = "met" if best <= COMPILE_TARGET_S else "**missed**"
        summary.append(
            f"- Compile time of a model file including `<kiln/kiln.h>` (`bench/compile_model.cpp`, "
            f"-O2): **{best:.2f} s** wall, {cpu:.2f} s CPU (best of {len(comp)}; target ≤ "
            f"{COMPILE_TARGET_S} s: {v})."
        )
    data = {t: (read_tsv(os.path.join(a.dir, f"kiln_t{t}.tsv")), read_tsv(os.path.join(a.dir, f"torch_t{t}.tsv")))
            for t in threads}
    mem_lines, mem_verdicts = rm.memory_section(a.dir)
    ecr_lines, ecr_best = rm.ecr_section(a.dir)
    chart_note = rm.chart(a.chart, threads, data) if a.chart else "no chart requested"
    if a.chart and chart_note is None:
        rel = os.path.relpath(a.chart, os.path.dirname(os.path.abspath(a.out)))
        summary.append(f"- Chart of every speed-up: [{rel}]({rel}).")
    elif a.chart:
        summary.append(f"- Chart skipped: {chart_note}.")
    out += summary
    out.append("")
    out += rm.targets_section(threads, data, mem_verdicts, ecr_best, min((c[0] for c in comp), default=None),
                              COMPILE_TARGET_S)
    out.append("## Results\n")
    for t in threads:
        kiln, torch = data[t]
        sec = thread_section(t, kiln, torch, have_torch)
        out += sec[:2] + rm.calib_line(t, kiln) + sec[2:]
        out += rm.more_ops_section(t, kiln, torch, have_torch)
        out += rm.train_section(t, kiln, torch, have_torch)
        out += matmul_section(t, kiln, torch, have_torch)  # matmul block
        out += pool_section(t, kiln, torch, have_torch)  # pooling block
        out += conv_section(t, kiln, torch, have_torch)  # convolution and normalisation block
        out += rm.conv_more_section(t, kiln, torch, have_torch)
        out += autodiff_section(t, kiln, torch, have_torch)  # autodiff block
    out += rm.fusion_section(a.dir, threads, data)
    out += rv.vision_section(a.dir)  # kiln::vision against OpenCV (report_vision.py)
    out += mem_lines
    out += rm.callgrind_section(a.dir)
    out += ecr_lines
    if comp:
        out.append("### Compile time\n")
        out.append(
            f"`{meta.get('compile_cmd', '')}`: "
            + ", ".join(f"{w:.2f} s wall ({c:.2f} s CPU)" for w, c in comp)
            + f"; best {min(w for w, _ in comp):.2f} s, target ≤ {COMPILE_TARGET_S} s. Wall time "
            "exceeds CPU time when other work shares the machine.\n"
        )
    spath = os.path.join(a.dir, "store.txt")
    if os.path.exists(spath):
        out.append("### Loading weights\n")
        out.append(
            "`kiln_store_bench`: the file is read once first (page cache warm); every case touches "
            "one byte per page of the loaded data. Ratios are against `read()` of the same file "
            "into a reused buffer. Targets: safetensors ≤ 1.2×, `.pth` ≤ 2×.\n"
        )
        out.append("```text")
        out += [line.rstrip() for line in open(spath) if line.strip()]
        out.append("```\n")
    for fname, title in (("onnx_kiln.txt", "ONNX models, Kiln (`bench/onnx/kiln_onnx_bench`)"),
                         ("onnx_ort.txt", "ONNX models, ONNX Runtime (`bench/onnx/ort_bench.py`)")):
        opath = os.path.join(a.dir, fname)
        if os.path.exists(opath):
            out.append(f"### {title}\n")
            out.append("```text")
            out += [line.rstrip() for line in open(opath) if line.strip()]
            out.append("```\n")
    skipped = sorted(
        {
            f"`{cid}` ({row[2][6:]})"
            for t in threads
            for cid, row in read_tsv(os.path.join(a.dir, f"kiln_t{t}.tsv")).items()
            if row[2].startswith("skip")
        }
    )
    out.append("## Biggest gaps\n")
    out.append("The lowest speed-ups against PyTorch in this run:\n")
    out += rm.worst_gaps(threads, data)
    out.append("")
    gaps_md = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gaps.md")
    if os.path.exists(gaps_md):
        out.append("Causes, as profiled (`bench/gaps.md`, written by hand from `perf` / callgrind runs; the "
                   "numbers above are regenerated, this text is not):\n")
        out += [line.rstrip("\n") for line in open(gaps_md) if not line.startswith("# ")]
        out.append("")
    out.append("## Notes\n")
    if skipped:
        out.append("¹ Skipped: the op threw when this table was made: " + "; ".join(skipped) + ".\n")
    out.append(
        "- PyTorch's functional form (`torch.exp(x)`) allocates a fresh 64 MiB output per call; "
        "glibc serves that with `mmap`, so every call also pays page faults. Kiln's caching "
        "allocator reuses the freed block. The `out=` column shows PyTorch's kernels alone.\n"
        "- PyTorch overheads include the Python call (`torch.inference_mode()`), which is what a "
        "PyTorch user pays; Kiln's are C++ calls.\n"
        "- The machine may be shared (see the load average above): other work lowers every "
        "number, Kiln's and PyTorch's alike, so compare the ratios and percentages of one run "
        "rather than absolute times across runs."
    )
    out.append("")
    with open(a.out, "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
