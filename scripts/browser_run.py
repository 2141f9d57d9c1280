#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Opens a page in headless Chromium and returns what the page POSTs to /result.

The page and its files are served from a folder on 127.0.0.1 (a free port) with the
cross-origin isolation headers (COOP/COEP) that threads in WebAssembly need; Chromium runs
headless with WebGPU enabled (SwiftShader's adapter on machines without a GPU). Used by the
browser tests (tests/browser/; docs/web.md).

  browser_run.py DIR PAGE [--timeout S] [--out FILE]   prints the posted JSON (or writes FILE)
"""
import argparse
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--remote-debugging-port=0"]


def chromium():
    """The Chromium binary: $CHROMIUM, else chromium or chromium-browser on PATH."""
    for c in [os.environ.get("CHROMIUM"), "chromium", "chromium-browser"]:
        if c and shutil.which(c):
            return shutil.which(c)
    raise SystemExit("browser_run: no chromium found (scripts/install-deps.sh installs it)")


def serve(root, on_post=None):
    """A server of `root` on 127.0.0.1 (a free port) with the COOP/COEP headers, in a thread;
    on_post(body) receives what is POSTed to /result. Returns the server (shutdown() stops it)."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=root, **kw)

        def end_headers(self):
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            if self.path == "/result" and 0 < n <= (256 << 20) and on_post:
                on_post(self.rfile.read(n))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def screenshot(root, page, out, width=1000, height=1000, budget_ms=20000):
    """Writes a PNG of `page` as headless Chromium shows it once its scripts have run (virtual
    time: timers and loading advance without waiting)."""
    server = serve(root)
    profile = tempfile.mkdtemp(prefix="kiln-chromium-")
    url = f"http://127.0.0.1:{server.server_address[1]}/{page}"
    try:
        flags = [f for f in CHROMIUM_FLAGS if not f.startswith("--remote-debugging-port")]
        subprocess.run([chromium()] + flags + [f"--user-data-dir={profile}", f"--screenshot={os.path.abspath(out)}",
                                                        f"--window-size={width},{height}", "--hide-scrollbars",
                                                        f"--virtual-time-budget={budget_ms}", url],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=True)
    finally:
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    if not os.path.isfile(out):
        raise SystemExit(f"browser_run: no screenshot of {page} was written")


def run_page(root, page, timeout=120):
    """Serves `root`, opens `page` in headless Chromium, returns the JSON the page posts. A page
    reports its console errors and uncaught exceptions as `console_errors`; any fails the run."""
    posted, done = {}, threading.Event()

    def on_post(body):
        posted["body"] = body
        done.set()

    server = serve(root, on_post)
    profile = tempfile.mkdtemp(prefix="kiln-chromium-")
    url = f"http://127.0.0.1:{server.server_address[1]}/{page}"
    proc = subprocess.Popen([chromium()] + CHROMIUM_FLAGS + [f"--user-data-dir={profile}", url],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if not done.wait(timeout):
            raise SystemExit(f"browser_run: {page} posted no result within {timeout} s")
    finally:
        proc.kill()
        proc.wait()
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    report = json.loads(posted["body"])
    errors = report.get("console_errors") or []
    if errors:
        raise SystemExit(f"browser_run: {page} logged {len(errors)} console error(s):\n" + "\n".join(errors))
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root")
    ap.add_argument("page")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--out")
    a = ap.parse_args()
    result = run_page(a.root, a.page, a.timeout)
    text = json.dumps(result, indent=1)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    sys.exit(main())
