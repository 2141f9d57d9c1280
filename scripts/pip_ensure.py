# SPDX-License-Identifier: MIT OR Apache-2.0
"""Installs a Python package with pip when it cannot be imported (shared by the golden-data scripts)."""
import os
import subprocess
import sys


def ensure(mod, pkgs):
    try:
        __import__(mod)
        return
    except ImportError:
        pass
    base = [sys.executable, "-m", "pip", "install", "--quiet"]
    for extra in ([], ["--break-system-packages"]):
        try:
            subprocess.check_call(base + extra + pkgs)
            return
        except subprocess.CalledProcessError:
            continue
    sys.exit(f"{os.path.basename(sys.argv[0])}: could not install {pkgs}")
