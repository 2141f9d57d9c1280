#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Benchmark results kept per CPU model: bench/results/<cpu-model-slug>.md, one file per model,
with the model, its cpuid family and model numbers, cache sizes and CPU flags, and
bench/results/README.md, the table of all files.

  machine_results.py full FILE    the report of a whole `make bench` run (bench/run.sh calls it)
  machine_results.py quick FILE   a side-by-side table of some cases (side_by_side.py --save)

Each kind replaces its own section of this machine's file and keeps the other. Before that, the
regression check compares every speed-up (a table cell like 1.23x) of the new report with the
same row of the section it replaces, and flags each that fell by more than 10%; the check is
printed and written into the file. Only the standard library."""
import datetime
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS_DIR = os.environ.get("BENCH_MACHINE_DIR", os.path.join(HERE, "results"))
FALL = 0.10  # a ratio lower than the last one by more than this is flagged
# The CPU flags that decide which kernels run.
FLAGS = ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
         "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "neon", "asimd", "sve"]


def cpuinfo():
    """Model, cache sizes (per core / shared), CPUs and the relevant flags of this machine."""
    model, flags, ident = "", set(), {}
    try:
        for line in open("/proc/cpuinfo"):
            k, _, v = line.partition(":")
            k = k.strip()
            if k == "model name" and not model:
                model = v.strip()
            elif k in ("flags", "Features") and not flags:
                flags = set(v.split())
            elif k in ("cpu family", "model", "stepping", "CPU implementer", "CPU part") and k not in ident:
                ident[k] = v.strip()
    except OSError:
        pass
    caches = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    for i in range(16):
        d = os.path.join(base, f"index{i}")
        if not os.path.isdir(d):
            break
        rd = lambda f: open(os.path.join(d, f)).read().strip()  # noqa: E731
        try:
            lvl, typ, size = rd("level"), rd("type"), rd("size")
        except OSError:
            continue
        if typ == "Instruction":
            continue
        shared = rd("shared_cpu_list") if os.path.exists(os.path.join(d, "shared_cpu_list")) else "?"
        caches.append(f"L{lvl}{'d' if typ == 'Data' else ''} {size} (cpus {shared})")
    return {
        "model": model or "unknown CPU",
        "caches": ", ".join(caches) or "?",
        "cpus": str(os.cpu_count() or "?"),
        "flags": " ".join(f for f in FLAGS if f in flags) or "?",
        "cpuid": ", ".join(f"{k} {v}" for k, v in ident.items()) or "?",
    }


def slug(model):
    s = re.sub(r"\((r|tm)\)", "", model.lower())
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    return s or "unknown-cpu"


RATIO = re.compile(r"^\**(\d+(?:\.\d+)?)\s*[x×]\**$")


def ratios(text):
    """{row key: speed-up} of every table cell that reads like 1.23x or 1.23×. The key is the
    headings above the table, the row's first cell, its thread count (a column named threads)
    and the column's header."""
    out, heads, header = {}, {}, None
    for line in text.splitlines():
        m = re.match(r"^(#{2,5})\s+(.*)", line)
        if m:
            lvl = len(m.group(1))
            heads = {k: v for k, v in heads.items() if k < lvl}
            heads[lvl] = m.group(2).strip()
            header = None
            continue
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
            continue
        ctx = " / ".join(heads[k] for k in sorted(heads))
        thr = ""
        if "threads" in header:
            i = header.index("threads")
            thr = cells[i] if i < len(cells) else ""
        for i, c in enumerate(cells[1:], 1):
            m = RATIO.match(c)
            if m and i < len(header):
                key = f"{ctx} | {cells[0]} | {thr} | {header[i]}".replace("  ", " ")
                out[key] = float(m.group(1))
    return out


def sections(text):
    """{name: body} of the <!-- section:NAME --> ... <!-- end:NAME --> blocks of a results file."""
    return {m.group(1): m.group(2) for m in re.finditer(r"<!-- section:(\S+) -->\n(.*?)<!-- end:\1 -->", text, re.S)}


def regression(old, new):
    """Markdown lines: rows whose speed-up fell by more than FALL from old to new."""
    a, b = ratios(old), ratios(new)
    common = sorted(set(a) & set(b))
    fell = [(k, a[k], b[k]) for k in common if a[k] > 0 and b[k] < a[k] * (1 - FALL)]
    lines = [f"{len(common)} speed-ups compared with the last run of this CPU model; "
             f"{len(fell)} fell by more than {FALL:.0%}" + (":" if fell else ".")]
    if fell:
        lines += ["", "| row | last | now | change |", "|---|---:|---:|---:|"]
        lines += [f"| {k.replace('|', '·')} | {x:.2f}x | {y:.2f}x | {100 * (y / x - 1):+.0f}% |" for k, x, y in fell]
    return lines


def git(*args):
    try:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return ""


def write_index():
    rows = []
    for f in sorted(os.listdir(RESULTS_DIR)):
        if not f.endswith(".md") or f == "README.md":
            continue
        text = open(os.path.join(RESULTS_DIR, f)).read()
        field = lambda k: (re.search(rf"^\| {k} \| (.*) \|$", text, re.M) or [None, "?"])[1]  # noqa: E731
        sec = sections(text)
        kinds = " + ".join(k for k in ("full", "quick") if k in sec)
        rows.append(f"| [{field('CPU model')}]({f}) | {field('cpuid')} | {field('caches')} | {field('flags')} | {kinds} | "
                    f"{field('updated')} |")
    with open(os.path.join(RESULTS_DIR, "README.md"), "w") as out:
        out.write("# Benchmark results per CPU model\n\n"
                  "Written by `make bench` (full runs) and `bench/side_by_side.py --save` (quick checks) through "
                  "`bench/machine_results.py`; one file per CPU model. Each file ends with the regression check "
                  "against the run it replaced.\n\n"
                  "| CPU model | cpuid | caches (cpu0) | flags | runs | updated |\n|---|---|---|---|---|---|\n")
        out.write("\n".join(rows) + "\n")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("full", "quick"):
        sys.exit(__doc__)
    kind, src = sys.argv[1], sys.argv[2]
    body = open(src).read()
    if kind == "full":  # drop the report's own title
        body = re.sub(r"\A# [^\n]*\n", "", body)
        body = re.sub(r"^Results of every CPU model.*\n\n?", "", body, flags=re.M)  # a link to this folder
    info = cpuinfo()
    os.makedirs(RESULTS_DIR, exist_ok=True)
    path = os.path.join(RESULTS_DIR, slug(info["model"]) + ".md")
    old = sections(open(path).read()) if os.path.exists(path) else {}
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    title = {"full": "Full run (`make bench`)", "quick": "Quick side-by-side checks (`bench/side_by_side.py`)"}[kind]
    if kind == "full":  # the report's own date and commit, when it has them
        d, c = (re.search(rf"^\| {k} \| (.*) \|$", body, re.M) for k in ("date", "commit"))
        now, commit = d.group(1) if d else now, c.group(1) if c else commit
    sec = dict(old)
    sec[kind] = f"## {title}\n\n{now}, commit {commit}.\n\n{body.strip()}\n\n"
    check = regression(old.get(kind, ""), sec[kind]) if kind in old else ["First run of this kind on this CPU model."]
    sec[f"regress-{kind}"] = f"### Regression check ({kind})\n\n" + "\n".join(check) + "\n\n"
    print("\n".join(check))
    head = [f"# Kiln benchmark results: {info['model']}", "",
            "One file per CPU model (bench/results/README.md lists them all).", "",
            "| | |", "|---|---|", f"| CPU model | {info['model']} |", f"| caches | {info['caches']} |",
            f"| cpuid | {info['cpuid']} |", f"| CPUs | {info['cpus']} |", f"| flags | {info['flags']} |", f"| updated | {now} |", ""]
    with open(path, "w") as out:
        out.write("\n".join(head) + "\n")
        for name in ("full", "regress-full", "quick", "regress-quick"):
            if name in sec:
                out.write(f"<!-- section:{name} -->\n{sec[name]}<!-- end:{name} -->\n\n")
    write_index()
    print(f"machine_results.py: wrote {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
