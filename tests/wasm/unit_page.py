#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Runs the WebAssembly unit tests (kiln_wasm_tests_web) in a page of headless Chromium.

  unit_page.py BUILD_DIR [--env NAME=VALUE ...] [--support-table FILE] [GTEST ARGS...]

BUILD_DIR holds kiln_wasm_tests_web.{js,wasm,data}; the page (tests/wasm/unit_page.html) runs
them with the given arguments and environment variables and posts the exit code and output
(scripts/browser_run.py). Prints the output; the exit status is the tests'. With
--support-table, the conformance suite's support table (KILN_SUPPORT_TABLE=-) must equal FILE
(docs/webgpu-support.md, written by scripts/gpu-support.sh --webgpu). KILN_PAGE_TIMEOUT
(seconds, default 540) bounds the page's run.
"""
import os
import shutil
import sys
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from browser_run import run_page  # noqa: E402


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    build, args, env, table = os.path.abspath(sys.argv[1]), [], [], None
    rest = sys.argv[2:]
    while rest:
        a = rest.pop(0)
        if a == "--env" and rest:
            env.append(rest.pop(0))
        elif a == "--support-table" and rest:
            table = rest.pop(0)
            env.append("KILN_SUPPORT_TABLE=-")
        else:
            args.append(a)
    for ext in ("js", "wasm", "data"):
        if not os.path.isfile(os.path.join(build, "kiln_wasm_tests_web." + ext)):
            raise SystemExit(f"unit_page: {build}/kiln_wasm_tests_web.{ext} is missing (build the target kiln_wasm_tests_web)")
    root = tempfile.mkdtemp(prefix="kiln-wasm-page-")
    try:
        for ext in ("js", "wasm", "data"):
            os.symlink(os.path.join(build, "kiln_wasm_tests_web." + ext), os.path.join(root, "kiln_wasm_tests_web." + ext))
        shutil.copy(os.path.join(HERE, "unit_page.html"), root)
        query = urllib.parse.urlencode([("arg", a) for a in args] + [("env", e) for e in env])
        report = run_page(root, "unit_page.html?" + query, timeout=float(os.environ.get("KILN_PAGE_TIMEOUT", "540")))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(report.get("log", ""))
    for e in report.get("console_errors", []):
        print("console error:", e)
    print(f"unit_page: exit code {report.get('code')} ({report.get('why')}) in {report.get('agent', '?')}")
    code = report.get("code", 1) if isinstance(report.get("code"), int) else 1
    if table:
        log = report.get("log", "")
        got = log[log.find("<<<support table\n") + 17:log.find(">>>support table")] if ">>>support table" in log else ""
        with open(table) as f:
            if f.read() != got:
                print(f"unit_page: {table} is out of date: run scripts/gpu-support.sh --webgpu")
                code = code or 1
    return code


if __name__ == "__main__":
    sys.exit(main())
