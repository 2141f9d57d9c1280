#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The kernel suite on WebGPU: runs kiln_webgpu_cases, opens webgpu_suite.html in headless
Chromium (scripts/browser_run.py) and compares every buffer the page's WebGPU launches wrote
with the C++ target's: integers exactly, floats within each case's tolerance.

  webgpu_suite.py KILN_WEBGPU_CASES          (exit status 0 when every runnable case matches)
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from browser_run import run_page  # noqa: E402


def decode(values, dtype):
    """Floats from their bit patterns (the JSON of the cases and of the page)."""
    if dtype == "f32":
        return [struct.unpack("<f", struct.pack("<I", v))[0] for v in values]
    if dtype == "f16":
        return [struct.unpack("<e", struct.pack("<H", v))[0] for v in values]
    if dtype == "bf16":
        return [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in values]
    return values


def mismatch(case, index, got):
    """The first difference of buffer `index` from the C++ target's, or None."""
    b = case["buffers"][index]
    want = b["expected"]
    if len(got) != len(want):
        return f"buffer {index}: {len(got)} elements, expected {len(want)}"
    if b["type"] in ("i32", "u32"):
        for i, (g, w) in enumerate(zip(got, want)):
            if g != w:
                return f"buffer {index}[{i}]: {g}, the C++ target {w}"
        return None
    for i, (g, w) in enumerate(zip(decode(got, b["type"]), decode(want, b["type"]))):
        if math.isnan(g) or math.isnan(w) or math.isinf(w):
            ok = (math.isnan(g) and math.isnan(w)) or g == w
        else:
            ok = abs(g - w) <= case["atol"] + case["rtol"] * abs(w)
        if not ok:
            return f"buffer {index}[{i}]: {g!r}, the C++ target {w!r}"
    return None


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    root = tempfile.mkdtemp(prefix="kiln-webgpu-")
    try:
        subprocess.run([sys.argv[1], os.path.join(root, "cases.json")], check=True)
        shutil.copy(os.path.join(HERE, "webgpu_suite.html"), root)
        with open(os.path.join(root, "cases.json")) as f:
            cases = {c["name"]: c for c in json.load(f)}
        report = run_page(root, "webgpu_suite.html")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if "error" in report:
        raise SystemExit(f"webgpu_suite: the page failed: {report['error']}")
    failures, counts = [], {}
    for r in report["results"]:
        status = r["status"]
        if status == "ok":
            c = cases[r["name"]]
            for index, got in r["outputs"].items():
                m = mismatch(c, int(index), got)
                if m:
                    failures.append(f"{r['name']}: {m}")
                    status = "mismatch"
        elif status == "error":
            failures.append(f"{r['name']}: {r['message']}")
        counts[status] = counts.get(status, 0) + 1
        note = f" ({r['message'].splitlines()[0]})" if status in ("unsupported", "skipped") else ""
        print(f"  {r['name']}: {status}{note}")
    if report.get("uncaptured"):
        failures.append("uncaptured WebGPU errors: " + report["uncaptured"])
    print(f"webgpu kernel suite on {report.get('adapter', '?')}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    for f in failures:
        print("FAIL", f)
    if failures or counts.get("ok", 0) == 0:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
