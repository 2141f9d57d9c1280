#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The micro section of the benchmarks (bench/MICRO.md; bench/run.sh calls it).

For each model of tests/micro (built by the release build: micro_<board>_<model>.elf) on the
Cortex-M3 (mps2-an385), the Cortex-M55 (mps3-an547) and the M55 without Helium (+nomve):

- instructions per inference: QEMU with -icount shift=0 (1 ns of virtual time per instruction),
  counted by SysTick around the entry point (micro/boards/startup.cpp calibrates ticks against a
  loop of known length), so the count is exact and the same on every run;
- flash: text + rodata + data of the ELF (arm-none-eabi-size), split with arm-none-eabi-nm into
  the kernels (kiln_micro::), the weights (the generated const arrays cN), the runtime (the
  generated <model>_run, its parameter structs pN and size tables) and the rest (startup, test
  program);
- RAM: the static arena against the liveness plan's lower bound (the most bytes live at one
  step), and the stack's high-water mark (the reset handler paints the stack).

Usage: scripts/gen_micro_bench.py [--build build/release] [--out bench/MICRO.md]
"""
import argparse
import datetime
import os
import re
import subprocess

MODELS = ["conv_net", "mlp", "depthwise", "fashion_micro", "kiln_cnn", "kiln_fashion", "resnet", "mobilenet", "unet", "bert",
          "lstm"]
BOARDS = {
    "mps2-an385": ("Cortex-M3", ["-M", "mps2-an385", "-cpu", "cortex-m3"]),
    "mps3-an547": ("Cortex-M55 (Helium)", ["-M", "mps3-an547", "-cpu", "cortex-m55"]),
    "mps3-an547-scalar": ("Cortex-M55 scalar", ["-M", "mps3-an547", "-cpu", "cortex-m55"]),
}
QEMU = ["qemu-system-arm", "-nographic", "-monitor", "none", "-serial", "none", "-semihosting-config",
        "enable=on,target=native", "-icount", "shift=0", "-kernel"]


def run(elf, machine):
    out = subprocess.run(QEMU[:1] + machine + QEMU[1:] + [elf], capture_output=True, text=True, timeout=60)
    line = [l for l in (out.stdout + out.stderr).splitlines() if l.startswith("KILN_MICRO")]
    if out.returncode != 0 or not line:
        raise RuntimeError(f"{elf}: exit {out.returncode}\n{out.stdout}{out.stderr}")
    return dict(kv.split("=", 1) for kv in line[0].split()[1:] if "=" in kv)


def sizes(elf, model):
    """Flash bytes by part: kernels, weights, runtime, other; and the total text+rodata+data."""
    sec = subprocess.run(["arm-none-eabi-size", "-A", elf], capture_output=True, text=True, check=True).stdout
    total = 0
    for l in sec.splitlines():
        f = l.split()
        if len(f) >= 2 and f[0] in (".text", ".rodata", ".data", ".ARM.exidx"):
            total += int(f[1])
    nm = subprocess.run(["arm-none-eabi-nm", "-S", "-C", elf], capture_output=True, text=True, check=True).stdout
    parts = {"kernels": 0, "weights": 0, "runtime": 0, "other": 0}
    for l in nm.splitlines():
        m = re.match(r"^[0-9a-f]+ ([0-9a-f]+) ([tTrRdD]) (.*)$", l)
        if not m:
            continue
        size, name = int(m.group(1), 16), m.group(3)
        if name.startswith("kiln_micro::"):
            parts["kernels"] += size
        elif re.fullmatch(r"\(anonymous namespace\)::c\d+", name):
            parts["weights"] += size
        elif re.fullmatch(r"\(anonymous namespace\)::p\d+", name) or name.startswith(model + "_"):
            parts["runtime"] += size
        else:
            parts["other"] += size
    return total, parts


def header_defines(build, model):
    h = os.path.join(build, "tests", "micro", "kiln_micro", model, model + ".h")
    text = open(h).read()
    get = lambda k: int(re.search(rf"#define \w+_{k} (\d+)", text).group(1))
    return get("ARENA_BYTES"), get("ARENA_LOWER_BOUND")


def version(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--out", default="bench/MICRO.md")
    args = ap.parse_args()
    d = os.path.join(args.build, "tests", "micro")
    rows, flash_rows, ram_rows = [], [], []
    for m in MODELS:
        res = {}
        for b, (label, machine) in BOARDS.items():
            elf = os.path.join(d, f"micro_{b}_{m}.elf")
            if not os.path.exists(elf):  # a model too large for the board
                res[b] = None
                continue
            r = run(elf, machine)
            total, parts = sizes(elf, m)
            res[b] = (int(r["instructions"]), int(r["stack_bytes"]), total, parts)
        arena, bound = header_defines(args.build, m)
        cell = lambda b, f: "—" if res[b] is None else f(res[b])
        m3, m55, m55s = "mps2-an385", "mps3-an547", "mps3-an547-scalar"
        speedup = "—" if res[m55] is None else f"{res[m55s][0] / res[m55][0]:.2f}x"
        rows.append(f"| {m} | {cell(m3, lambda r: f'{r[0]:,}')} | {cell(m55s, lambda r: f'{r[0]:,}')} | "
                    f"{cell(m55, lambda r: f'{r[0]:,}')} | {speedup} |")
        num = lambda b, i: cell(b, lambda r: f"{r[i]:,}")
        part = lambda b, k: cell(b, lambda r: f"{r[3][k]:,}")
        flash_rows.append(f"| {m} | {num(m3, 2)} | {num(m55, 2)} | {res[m3][3]['weights']:,} | "
                          f"{part(m3, 'kernels')} | {part(m55, 'kernels')} | {part(m3, 'runtime')} | "
                          f"{part(m55, 'runtime')} |")
        stacks = "/".join(cell(b, lambda r: str(r[1])) for b in BOARDS)
        ram_rows.append(f"| {m} | {bound:,} | {arena:,} | {arena / bound:.2f}x | {stacks} |")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = f"""# Kiln on microcontrollers: size and speed

Written by `scripts/gen_micro_bench.py` (called by `bench/run.sh`) on {now}, from the ELFs of the
micro tests (`tests/micro`, `ctest -L micro`): {version(['arm-none-eabi-g++', '--version'])},
-O3; {version(['qemu-system-arm', '--version'])}. Models: `tests/micro/models` and
`examples/micro/fashion_micro.onnx` (`scripts/gen_micro_models.py`), and two Kiln models exported
with `kiln::onnx::export_model` (seeded weights, batch fixed with `--dim`): `kiln_cnn` (the
image-folder example's CNN, [1, 3, 24, 24]) and `kiln_fashion` (the fashion-mnist example's
net, 1.7 MB of weights: only the M3's 4 MB code memory holds it, "—" elsewhere), and the five
architecture fixtures of the ONNX tests (`tests/fixtures/onnx`, batch 1): ResNet, MobileNet and
UNet on [1, 3, 32, 32] images, a two-layer BERT encoder on 7 int64 token ids and a two-layer LSTM
on 5 steps of 12 features. docs/micro.md explains the generator, the memory plan and the methods.

## Instructions per inference

QEMU with `-icount shift=0` gives one nanosecond of virtual time per instruction; SysTick counts
that time around the entry point (calibrated at reset on a loop of known length). The counts are
exact and repeatable, but they are instructions, not cycles: an MVE instruction works on four
f32 lanes (two beats of two lanes on the M55's 64-bit datapath), and the M3's soft float turns
each float operation into a libgcc call. "M55 scalar" is the same code built with
`-mcpu=cortex-m55+nomve` (scalar FPU, no Helium).

| model | Cortex-M3 | M55 scalar | M55 Helium | Helium speedup |
|---|---:|---:|---:|---:|
""" + "\n".join(rows) + """

## Flash (bytes)

Text + rodata + data of the test program (startup, semihosting, the test harness and its
reference data are in the total too). Weights: the generated `const` arrays. Kernels: the
`kiln_micro::` functions the linker kept (`--gc-sections`). Runtime: what the generator adds over
the kernels and weights: `<model>_run`, its parameter structs and size tables (target <= 8 KB).

| model | total M3 | total M55 | weights | kernels M3 | kernels M55 | runtime M3 | runtime M55 |
|---|---:|---:|---:|---:|---:|---:|---:|
""" + "\n".join(flash_rows) + """

## RAM (bytes)

The liveness plan's lower bound is the most bytes live at one step (each buffer rounded up to
16 bytes); the arena is what the greedy offset assignment needs (target <= 1.2x the bound). The
stack's high-water mark covers the whole test program (M3 / M55 / M55 scalar), measured by
painting the stack at reset. Inputs are read in place; outputs are copied out of the arena.

| model | lower bound | arena | arena / bound | stack |
|---|---:|---:|---:|---:|
""" + "\n".join(ram_rows) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
