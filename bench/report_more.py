# SPDX-License-Identifier: MIT OR Apache-2.0
"""Sections of bench/RESULTS.md added by the bench owner: FMA peak, more ops (erf-GELU composite,
middle-axis sum, attention, overhead with autodiff), conv through autodiff, training steps,
inference latency, data loading, memory, callgrind counts, edit-compile-run, the Targets table
and the chart. Standard library only (the chart needs matplotlib and is skipped without it).
"""
import os

from report import CONV_SHAPES, cell_time, fmt_pct, fmt_time, ok, pct, read_tsv, speedup


def ths(t):
    return f"{t} thread{'s' if t != 1 else ''}"


def fma_peak(kiln):
    """(GFLOP/s, isa) of the calibrated FMA peak, or (None, None)."""
    for cid, row in kiln.items():
        if cid.startswith("calib/fma_peak/") and ok(row):
            return row[1] / row[0] / 1e9, cid.rsplit("/", 1)[1]
    return None, None


def bw(kiln, cid):
    r = kiln.get(cid)
    return r[1] / r[0] if ok(r) else None


def gflops(row, flops=None):
    if not ok(row):
        return None
    f = flops if flops is not None else row[1]
    return f / row[0] / 1e9 if f else None


def fmt_g(v):
    return "—" if v is None else f"{v:.1f}"


def ratio_of(a, b):
    return None if a is None or b is None or b == 0 else a / b


def fmt_ratio(r):
    return "—" if r is None else f"{r:.2f}×"


# ---- per-thread sections -------------------------------------------------------------------------


def calib_line(t, kiln):
    g, isa = fma_peak(kiln)
    if g is None:
        return []
    return [
        f"FMA peak ({ths(t)}, register-blocked f32 FMA loop, {isa}): **{g:.1f} GFLOP/s**; the "
        "\"% of peak\" columns below divide by it.\n"
    ]


def more_ops_section(t, kiln, torch, have_torch):
    if not any(c in kiln for c in ("unary/gelu_composite", "reduce/sum_mid", "attn/sdpa_b4h8l256d64")):
        return []
    tp = "PyTorch" if have_torch else "PyTorch (n/a)"
    copy_bw, read_bw = bw(kiln, "calib/copy_bw"), bw(kiln, "calib/read_bw")
    peak, _ = fma_peak(kiln)
    lines = [f"#### More ops, f32, {ths(t)}\n"]
    lines.append(
        "The erf-GELU composite is `x * 0.5 * (erf(x / sqrt 2) + 1)` written as five separate ops on "
        "[4096, 4096] (Kiln and PyTorch alike); its bandwidth percentage counts one read and one write, "
        "the minimum a fused kernel moves. `sum(1)` reduces the middle axis of [256, 256, 256].\n"
    )
    lines.append(f"| op | Kiln | {tp} | speedup | Kiln % of BW | {tp} % of BW |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    k, p = kiln.get("unary/gelu_composite"), torch.get("unary/gelu_composite")
    lines.append(
        f"| erf-GELU composite (5 ops) | {cell_time(k)} | {cell_time(p)} | {speedup(k, p)} "
        f"| {fmt_pct(pct(k, copy_bw))} (copy) | {fmt_pct(pct(p, copy_bw))} |"
    )
    pg = torch.get("unary/gelu")
    lines.append(
        f"| erf-GELU composite vs `F.gelu` (one fused op) | {cell_time(k)} | {cell_time(pg)} "
        f"| {speedup(k, pg)} | | {fmt_pct(pct(pg, copy_bw))} |"
    )
    k, p = kiln.get("reduce/sum_mid"), torch.get("reduce/sum_mid")
    lines.append(
        f"| sum(1) of [256, 256, 256] | {cell_time(k)} | {cell_time(p)} | {speedup(k, p)} "
        f"| {fmt_pct(pct(k, read_bw))} (read) | {fmt_pct(pct(p, read_bw))} |"
    )
    lines.append("")
    lines.append(
        "Attention: `scaled_dot_product_attention`, q, k, v [4, 8, 256, 64]; GFLOP/s count 4·B·H·L·S·D "
        "(causal: half).\n"
    )
    lines.append(f"| case | Kiln | {tp} | speedup | Kiln GFLOP/s | Kiln % of peak |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    for cid, label in (("attn/sdpa_b4h8l256d64", "not causal"), ("attn/sdpa_b4h8l256d64/causal", "causal")):
        k, p = kiln.get(cid), torch.get(cid)
        g = gflops(k)
        lines.append(
            f"| {label} | {cell_time(k)} | {cell_time(p)} | {speedup(k, p)} | {fmt_g(g)} "
            f"| {fmt_pct(None if g is None or not peak else g / peak * 100)} |"
        )
    lines.append("")
    lines.append(
        f"Per-op overhead with autodiff: 4-element tensors that require grad on `Device::cpu().autodiff()` "
        f"({tp}: `requires_grad=True`, outside inference mode); every call records a graph node.\n"
    )
    lines.append(f"| op | Kiln, no autodiff | Kiln, recording | {tp}, recording | speedup | target ≤ 2 µs |")
    lines.append("|---|---:|---:|---:|---:|---|")
    for op, label in (("add", "x + y"), ("exp", "x.exp()"), ("sum", "x.sum()")):
        k0, k, p = kiln.get(f"overhead/{op}"), kiln.get(f"overhead/{op}_ad"), torch.get(f"overhead/{op}_ad")
        v = ("met" if k[0] <= 2e-6 else "**missed**") if ok(k) else "not measured"
        lines.append(f"| `{label}` | {cell_time(k0)} | {cell_time(k)} | {cell_time(p)} | {speedup(k, p)} | {v} |")
    lines.append("")
    return lines


def conv_more_section(t, kiln, torch, have_torch):
    if not any(c.endswith("/fwdbwd_ad") for c in kiln):
        return []
    tp = "PyTorch" if have_torch else "PyTorch (n/a)"
    peak, _ = fma_peak(kiln)
    pk = lambda row: fmt_pct(None if gflops(row) is None or not peak else gflops(row) / peak * 100)  # noqa: E731
    lines = [f"#### Convolution through autodiff and % of peak, {ths(t)}\n"]
    lines.append(
        "Forward recorded on `Device::cpu().autodiff()` then backward from a fixed output gradient to the "
        f"input, weight and bias gradients ({tp}: `torch.autograd.grad`). % of peak counts 2 flops per "
        "multiply-add (forward), 2× that for the two gradients, 3× for forward + backward.\n"
    )
    lines.append(
        f"| conv2d | N | Kiln fwd + bwd | {tp} fwd + bwd | speed-up | Kiln fwd % of peak | Kiln bwd % of peak "
        "| Kiln fwd + bwd % of peak |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for key, label in CONV_SHAPES.items():
        for n in (1, 8, 32):
            base = f"conv/{key}/N{n}"
            if base + "/fwdbwd_ad" not in kiln:
                continue
            k, p = kiln.get(base + "/fwdbwd_ad"), torch.get(base + "/fwdbwd_ad")
            lines.append(
                f"| {label} | {n} | {cell_time(k)} | {cell_time(p)} | {speedup(k, p)} | {pk(kiln.get(base + '/fwd'))} "
                f"| {pk(kiln.get(base + '/bwd'))} | {pk(k)} |"
            )
    lines.append("")
    return lines


def train_section(t, kiln, torch, have_torch):
    if not any(c.startswith(("train/", "infer/", "data/")) for c in kiln):
        return []
    tp = "PyTorch" if have_torch else "PyTorch (n/a)"
    lines = [f"#### Training steps, inference, data loading, {ths(t)}\n"]
    lines.append(
        "Training: one step = forward, cross-entropy, backward, SGD update (lr 0.01) on a fixed random batch "
        "of 64; Kiln on `Device::cpu().autodiff()` with `kiln::nn` modules and `kiln::optim::SGD`, PyTorch "
        "with `torch.nn` and `torch.optim.SGD` (`zero_grad` included). The CNN is PyTorch's MNIST example "
        "(conv 32, conv 64, max-pool, dropout, fc 128, dropout, fc 10). Inference: batch 1, eval mode, no "
        "grad (tiny MLP: 784-64-10). Data: one shuffled epoch of the 60 000 Fashion-MNIST training images "
        "in batches of 64, built on the calling thread: Kiln's `data::DataLoader` over "
        "`data::fashion_mnist(true)` (u8 images, batched to f32 in [0, 1]) against PyTorch's `DataLoader` "
        "over a `TensorDataset` of the same u8 tensors in memory (`num_workers=0`), scaled to f32 per batch.\n"
    )
    lines.append(f"| case | Kiln | {tp} | speedup | target |")
    lines.append("|---|---:|---:|---:|---|")
    rows = [
        ("train/mlp_784_512_512_10_b64", "MLP 784-512-512-10 training step, batch 64", "≥ 1.0×"),
        ("train/cnn_mnist_b64", "MNIST CNN training step, batch 64", "≥ 1.0×"),
        ("infer/cnn_b1", "MNIST CNN inference, batch 1", "≤ 0.5 ms and faster"),
        ("infer/mlp_tiny_b1", "tiny MLP inference, batch 1", ""),
    ]
    for cid, label, target in rows:
        k, p = kiln.get(cid), torch.get(cid)
        v = ""
        if target and ok(k) and ok(p):
            if cid.startswith("infer/"):
                v = "met" if k[0] <= 0.5e-3 and k[0] <= p[0] else "**missed**"
            else:
                v = "met" if k[0] <= p[0] else "**missed**"
        lines.append(f"| {label} | {cell_time(k)} | {cell_time(p)} | {speedup(k, p)} | {target}: {v} |"
                     if target else f"| {label} | {cell_time(k)} | {cell_time(p)} | {speedup(k, p)} | |")
    k, p = kiln.get("data/fashion_mnist_b64"), torch.get("data/fashion_mnist_b64")
    if k is not None:
        bps = lambda r: f"{r[1] / r[0]:.0f} batches/s" if ok(r) and r[1] else cell_time(r)  # noqa: E731
        lines.append(f"| Fashion-MNIST loading, batch 64 | {bps(k)} | {bps(p)} | {speedup(k, p)} | |")
    lines.append("")
    return lines


# ---- sections once per run -----------------------------------------------------------------------


def memory_section(raw):
    km, tm = read_tsv(os.path.join(raw, "kiln_mem.tsv")), read_tsv(os.path.join(raw, "torch_mem.tsv"))
    if not km:
        return [], {}
    mib = lambda r: f"{r[1] / 2**20:.1f} MiB" if r is not None and r[2] == "ok" else "—"  # noqa: E731
    lines = ["### Memory of a training step\n"]
    lines.append(
        "Each model trains in a fresh process, 1 thread, batch 64 (Kiln: `kiln_bench --memory`, PyTorch: "
        "`torch_bench.py --memory`). **Peak of a step**: resident-set high-water mark (`VmHWM`, reset through "
        "`/proc/self/clear_refs` just before training) after the first three steps, minus `VmRSS` before "
        "them: the memory a step adds, measured alike for both (PyTorch's CPU allocator keeps no statistics; "
        "the allocator peak is Kiln's `memory_stats(cpu).peak` above its level before). **Growth**: "
        "`memory_stats(cpu).in_use` and `VmRSS` after step 10 and after the last step.\n"
    )
    lines.append(
        "| model | steps | Kiln peak RSS growth | PyTorch peak RSS growth | Kiln / PyTorch | Kiln allocator peak "
        "| Kiln in use, step 10 → last | Kiln RSS, step 10 → last | PyTorch RSS, step 10 → last |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---|---|---|")
    verdicts = {}
    for model, label in (("mlp", "MLP 784-512-512-10"), ("cnn", "MNIST CNN")):
        p = f"mem/{model}/"
        kr, tr = km.get(p + "step_peak_rss"), tm.get(p + "step_peak_rss")
        if kr is None:
            continue
        r = kr[1] / tr[1] if tr is not None and tr[1] > 0 else None
        steps = int(km[p + "in_use_last"][0]) if p + "in_use_last" in km else 0
        k10, kl = km.get(p + "in_use_step10"), km.get(p + "in_use_last")
        grow = (kl[1] - k10[1]) if k10 is not None and kl is not None else None
        verdicts[model] = (r, grow, steps)
        lines.append(
            f"| {label} | {steps} | {mib(kr)} | {mib(tr)} | {fmt_ratio(r)} | {mib(km.get(p + 'step_peak_alloc'))} "
            f"| {mib(k10)} → {mib(kl)} | {mib(km.get(p + 'rss_step10'))} → {mib(km.get(p + 'rss_last'))} "
            f"| {mib(tm.get(p + 'rss_step10'))} → {mib(tm.get(p + 'rss_last'))} |"
        )
    lines.append("")
    return lines, verdicts


def callgrind_section(raw):
    path = os.path.join(raw, "callgrind.tsv")
    if not os.path.exists(path):
        return []
    rows = [line.split() for line in open(path) if line.strip()]
    labels = {"add": "`x + y`", "exp": "`x.exp()`", "sum": "`x.sum()`"}
    lines = ["### Instruction counts of the overhead cases (callgrind)\n"]
    lines.append(
        "`valgrind --tool=callgrind --instr-atstart=no kiln_bench --callgrind-overhead <op> <iters>`: "
        "instrumentation is switched on only around the loop of `iters` calls (after 100 warm-up calls), "
        "so instructions per op = total Ir / iters. Repeatable on a loaded machine, unlike times.\n"
    )
    lines.append("| op, 4 f32 elements | instructions per op, no autodiff | instructions per op, recording a graph |")
    lines.append("|---|---:|---:|")
    d = {r[0]: int(r[2]) / int(r[1]) for r in rows if len(r) == 3}
    for op, label in labels.items():
        a, b = d.get(op), d.get(op + "_ad")
        lines.append(f"| {label} | {'—' if a is None else f'{a:.0f}'} | {'—' if b is None else f'{b:.0f}'} |")
    lines.append("")
    return lines


ECR_TARGET_S = 5.0


def ecr_section(raw):
    path = os.path.join(raw, "ecr.txt")
    if not os.path.exists(path):
        return [], None
    runs = [tuple(float(v) for v in line.split()) for line in open(path) if len(line.split()) == 3]
    if not runs:
        return [], None
    best = min(runs, key=lambda r: r[0])
    v = "met" if best[0] <= ECR_TARGET_S else "**missed**"
    lines = ["### Edit-compile-run\n"]
    lines.append(
        "`touch bench/train_model.cpp` (a ~100-line MLP training program on Fashion-MNIST), "
        "`cmake --build <build> --target kiln_bench_train_model` with ccache off (the compiler really runs, "
        "then the link), then the program until it prints that training step 1 is done (it loads the 60k "
        "training images first). Wall seconds:\n"
    )
    lines.append("| run | total | rebuild | run to step 1 |")
    lines.append("|---|---:|---:|---:|")
    for i, r in enumerate(runs, 1):
        lines.append(f"| {i} | {r[0]:.2f} s | {r[1]:.2f} s | {r[2]:.2f} s |")
    lines.append(f"\nBest: **{best[0]:.2f} s** (target ≤ {ECR_TARGET_S:.0f} s: {v}).\n")
    return lines, best[0]


# ---- fusion (issue 9) -----------------------------------------------------------------------------


def fusion_section(raw, threads, data):
    """Elementwise chains on the plain and the fused CPU (and PyTorch eager) against the copy
    probe of the same run; recording / launch overhead; training steps with and without fusion."""
    out = []
    rows = {t: (read_tsv(os.path.join(raw, f"fusion_kiln_t{t}.tsv")), read_tsv(os.path.join(raw, f"fusion_torch_t{t}.tsv")),
                read_tsv(os.path.join(raw, f"plain_train_t{t}.tsv"))) for t in threads}
    if not any(r[0] for r in rows.values()):
        return out
    out.append("### Fusion\n")
    out.append(
        "`bench/kiln_bench_fusion.cpp`: chains written as separate ops on the plain CPU, `Device::cpu().without_fusion()` (one kernel per op), "
        "and on `Device::cpu().fusion()` (one elementwise program per chain: *fused* runs it as a compiled kernel, "
        "*interpreted* with `KILN_FUSION_JIT=0`), next to a `memcpy` of the same "
        "bytes in the same run; `bench/torch_fusion_bench.py` runs the chains in PyTorch eager. % of copy counts "
        "one read and one write per element (what a fused kernel must move). Targets: fused ≥ 4× unfused, "
        "≥ 70% of copy bandwidth, faster than PyTorch eager; recording ≤ 0.5 µs per op, a cached plan "
        "found and launched in ≤ 5 µs.\n"
    )
    out.append("| threads | chain | unfused | fused | fused vs unfused | % of copy | interpreted | its % of copy "
               "| PyTorch eager | vs PyTorch |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in threads:
        k, tt, _ = rows[t]
        for key in sorted(k):
            if not key.startswith("fusion_") or not key.endswith("_fused") or "tiny" in key or "small" in key:
                continue
            base = key[len("fusion_"):-len("_fused")]
            chain, size = base.rsplit("_", 1)
            f = k[key]
            u = k.get(f"fusion_{base}_unfused")
            c = k.get(f"copy_{size}")
            p = tt.get(f"torch_fusion_{base}_eager")
            sp = f"{u[0] / f[0]:.2f}×" if u and f[0] > 0 else "–"
            pc = f"{100 * c[0] / f[0]:.0f}%" if c and f[0] > 0 else "–"
            pt = f"{p[0] * 1e3:.2f} ms" if p else "–"
            vp = f"{p[0] / f[0]:.1f}×" if p and f[0] > 0 else "–"
            us = f"{u[0] * 1e3:.2f} ms" if u else "–"
            i = k.get(f"fusion_{base}_interp")
            it = f"{i[0] * 1e3:.2f} ms" if i else "–"
            ic = f"{100 * c[0] / i[0]:.0f}%" if i and c and i[0] > 0 else "–"
            out.append(f"| {t} | {chain} ({size}) | {us} | {f[0] * 1e3:.2f} ms | {sp} | {pc} | {it} | {ic} | {pt} | {vp} |")
    out.append("")
    for t in threads:
        k = rows[t][0]
        if "fusion_jit_compile" in k:
            c, pre = k["fusion_jit_compile"], k.get("fusion_jit_preamble")
            out.append(f"Compiling ({t} thread{'s' if t > 1 else ''}, a fresh cache): {c[0]:.2f} s per kernel over "
                       f"{c[1]:.0f} kernels" + (f", after {pre[0]:.2f} s once for the precompiled header" if pre else "")
                       + "; later runs load them from the disk cache.\n")
    out.append("")
    out.append("Overhead on 4-element tensors. By default an op whose results have at most "
               "`kiln::fusion::small_limit()` elements (4096) runs at once when no queued op names its buffers; "
               "*queued* is the same with that limit at 0 (every op recorded, 512 per flush).\n")
    out.append("| threads | recording per op | cached plan found and launched | tiny op, unfused | tiny op, fused | tiny op, queued |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for t in threads:
        k = rows[t][0]
        g = lambda key, scale=1e9, unit="ns": f"{k[key][0] * scale:.{0 if unit == 'ns' else 1}f} {unit}" if key in k else "–"  # noqa: E731
        out.append(f"| {t} | {g('fusion_record_per_op')} | {g('fusion_launch_cached_plan', 1e6, 'µs')} | "
                   f"{g('fusion_tiny_op_unfused')} | {g('fusion_tiny_op_fused')} | {g('fusion_tiny_op_queued')} |")
    out.append("")
    out.append("Small tensors: one chain and a sync, µs per call:\n")
    out.append("| threads | chain | elements | unfused | fused (default) | fused, every op queued |")
    out.append("|---|---|---:|---:|---:|---:|")
    for t in threads:
        k = rows[t][0]
        seen = sorted({key.rsplit("_", 1)[0] for key in k if key.startswith("fusion_small_")},
                      key=lambda b: (b.rsplit("_", 1)[0], int(b.rsplit("_", 1)[1])))
        for base in seen:
            chain, n = base[len("fusion_small_"):].rsplit("_", 1)
            cell = lambda tag: f"{k[base + '_' + tag][0] * 1e6:.2f}" if base + "_" + tag in k else "–"  # noqa: E731
            out.append(f"| {t} | {chain} | {n} | {cell('unfused')} | {cell('fused')} | {cell('queued')} |")
    out.append("")
    out.append("Training steps of the main run (the CPU device, fused by default) against the plain CPU (`KILN_FUSION=0`):\n")
    out.append("| threads | step | plain CPU | fused CPU | fused vs plain |")
    out.append("|---|---|---:|---:|---:|")
    for t in threads:
        plain = rows[t][2]
        fz = data[t][0]
        for key in sorted(fz):
            if key in plain and ok(plain[key]) and ok(fz[key]) and fz[key][0] > 0:
                out.append(f"| {t} | {key} | {plain[key][0] * 1e3:.2f} ms | {fz[key][0] * 1e3:.2f} ms | "
                           f"{plain[key][0] / fz[key][0]:.2f}× |")
    out.append("")
    return out


# ---- the Targets table ---------------------------------------------------------------------------


def targets_section(threads, data, mem_verdicts, ecr_best, compile_best, compile_target):
    """data: {t: (kiln, torch)}. One row per target of issue 8, per thread count where it applies."""
    lines = ["## Targets\n"]
    lines.append("Each target of issue 8, measured in this run; **missed** says so plainly.\n")
    lines.append("| target | " + " | ".join(ths(t) for t in threads) + " | verdict |")
    lines.append("|---|" + "---|" * len(threads) + "---|")

    def row(label, per_t):
        """per_t(t) -> (text, met or None)."""
        cells, mets = [], []
        for t in threads:
            text, met = per_t(*data[t])
            cells.append(text)
            if met is not None:
                mets.append(met)
        verdict = "not measured" if not mets else ("met" if all(mets) else "**missed**")
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {verdict} |")

    def frac(kiln, ids, bw_id, target, key="copy"):
        b = bw(kiln, bw_id)
        ps = [pct(kiln.get(c), b) for c in ids]
        ps = [p for p in ps if p is not None]
        if not ps:
            return "—", None
        n = sum(p >= target * 100 for p in ps)
        return f"{n}/{len(ps)} ≥ {target * 100:.0f}% (min {min(ps):.0f}%)", n == len(ps)

    ew = ["unary/relu", "unary/exp", "unary/sigmoid", "unary/gelu", "unary/tanh", "binary/add", "binary/mul",
          "binary/mul_bcast_row"]
    rd = ["reduce/sum_all", "reduce/sum_last", "reduce/sum_first", "reduce/sum_mid", "reduce/amax_all"]
    row("elementwise ≥ 70% of copy bandwidth", lambda k, p: frac(k, ew, "calib/copy_bw", 0.7))
    row("reductions ≥ 70% of read bandwidth", lambda k, p: frac(k, rd, "calib/read_bw", 0.7))

    def mm(k, p):
        rs = []
        for n in (256, 512, 1024, 2048):
            r = ratio_of(gflops(k.get(f"matmul/f32_{n}")), gflops(k.get(f"calib/onednn_sgemm_{n}")))
            if r is not None:
                rs.append(r)
        if not rs:
            return "—", None
        return f"{sum(r >= 0.9 for r in rs)}/{len(rs)} (min {min(rs) * 100:.0f}%)", all(r >= 0.9 for r in rs)

    row("matmul ≥ 90% of oneDNN sgemm (square 256–2048)", mm)

    def conv(k, p):
        rs = []
        for cid in k:
            if cid.startswith("conv/") and cid.rsplit("/", 1)[1] in ("fwd", "bwd", "fwdbwd_ad", "tr") and ok(p.get(cid)):
                if ok(k[cid]):
                    rs.append(p[cid][0] / k[cid][0])
        if not rs:
            return "—", None
        return f"{sum(r >= 1 for r in rs)}/{len(rs)} ≥ 1.0× (min {min(rs):.2f}×)", all(r >= 1 for r in rs)

    row("conv2d ≥ 1.0× PyTorch (fwd, bwd, autodiff, transposed)", conv)

    def faster(cid):
        def f(k, p):
            kk, pp = k.get(cid), p.get(cid)
            if not (ok(kk) and ok(pp)):
                return "—", None
            return f"{pp[0] / kk[0]:.2f}× ({fmt_time(kk[0])})", kk[0] <= pp[0]

        return f

    row("MLP training step ≥ 1.0× PyTorch", faster("train/mlp_784_512_512_10_b64"))
    row("CNN training step ≥ 1.0× PyTorch", faster("train/cnn_mnist_b64"))

    def infer(k, p):
        kk, pp = k.get("infer/cnn_b1"), p.get("infer/cnn_b1")
        if not ok(kk):
            return "—", None
        faster_ = ok(pp) and kk[0] <= pp[0]
        return f"{fmt_time(kk[0])} ({pp[0] / kk[0]:.2f}×)" if ok(pp) else fmt_time(kk[0]), kk[0] <= 0.5e-3 and faster_

    row("batch-1 CNN inference ≤ 0.5 ms and faster than PyTorch", infer)

    def overhead(suffix, limit):
        def f(k, p):
            vs = [k[c][0] for c in (f"overhead/add{suffix}", f"overhead/exp{suffix}", f"overhead/sum{suffix}")
                  if ok(k.get(c))]
            if not vs:
                return "—", None
            return f"max {max(vs) * 1e9:.0f} ns", max(vs) <= limit

        return f

    row("per-op overhead ≤ 1 µs without autodiff", overhead("", 1e-6))
    row("per-op overhead ≤ 2 µs with autodiff (recording)", overhead("_ad", 2e-6))
    cols = len(threads)

    def once(label, text, met):
        verdict = "not measured" if met is None else ("met" if met else "**missed**")
        lines.append(f"| {label} | {text} |" + " |" * (cols - 1) + f" {verdict} |")

    for model, name in (("mlp", "MLP"), ("cnn", "CNN")):
        r, grow, steps = mem_verdicts.get(model, (None, None, 0))
        once(f"peak memory of a {name} training step ≤ 1.5× PyTorch's (1 thread)",
             "—" if r is None else f"{r:.2f}× (RSS growth)", None if r is None else r <= 1.5)
        once(f"no memory growth over 1000 {name} training steps (Kiln in-use bytes)",
             "—" if grow is None else f"{grow / 2**10:+.0f} KiB over steps 10 → {steps}",
             None if grow is None else (grow <= 0 and steps >= 1000))
    once("edit-compile-run ≤ 5 s", "—" if ecr_best is None else f"{ecr_best:.2f} s",
         None if ecr_best is None else ecr_best <= ECR_TARGET_S)
    once(f"compile a model file ≤ {compile_target} s (issue 2)", "—" if compile_best is None else f"{compile_best:.2f} s",
         None if compile_best is None else compile_best <= compile_target)
    lines.append("")
    return lines


# ---- closing note and chart ----------------------------------------------------------------------


def worst_gaps(threads, data, n=6):
    """The n lowest speed-ups (PyTorch time / Kiln time) of the run, as text lines."""
    gaps = []
    for t in threads:
        kiln, torch = data[t]
        for cid, k in kiln.items():
            p = torch.get(cid)
            if ok(k) and ok(p) and not cid.startswith(("calib/", "mem/")):
                gaps.append((p[0] / k[0], t, cid))
    gaps.sort()
    return [f"- `{cid}`, {ths(t)}: {r:.2f}× PyTorch" for r, t, cid in gaps[:n]]


def chart(path, threads, data):
    """A bar chart of the speed-ups per case; returns a note when it cannot be drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not importable here: no chart"
    ids = sorted({c for t in threads for c, k in data[t][0].items()
                  if ok(k) and ok(data[t][1].get(c)) and not c.startswith(("calib/", "mem/"))})
    if not ids:
        return "nothing to chart"
    fig, ax = plt.subplots(figsize=(10, max(4, 0.22 * len(ids) * len(threads) / 1.6)))
    h = 0.8 / len(threads)
    for j, t in enumerate(threads):
        kiln, torch = data[t]
        vals = [torch[c][0] / kiln[c][0] if ok(kiln.get(c)) and ok(torch.get(c)) else 0 for c in ids]
        ax.barh([i + j * h for i in range(len(ids))], vals, height=h, label=ths(t))
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks([i + h * (len(threads) - 1) / 2 for i in range(len(ids))])
    ax.set_yticklabels(ids, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("speed-up vs PyTorch (PyTorch time / Kiln time; > 1: Kiln faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
