"""Shared by the bench scripts: timing, peak RSS of a child, the one-row output convention."""
from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

PY = sys.executable
REPO = Path(__file__).resolve().parent.parent


def compile_bytecode() -> None:
    """Write tracefix's .pyc files, as pip does when it installs the wheel.

    An editable install under PYTHONDONTWRITEBYTECODE=1 (set on the development machines) would
    otherwise recompile every module on every run, ~60 ms that no installed user pays.
    """
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("tracefix")
    if spec and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            compileall.compile_dir(folder, quiet=1)


compile_bytecode()


def console_script() -> str:
    """The installed `tracefix` entry point next to this interpreter (not a pyenv shim)."""
    cand = Path(sysconfig.get_path("scripts")) / "tracefix"
    return str(cand) if cand.exists() else (shutil.which("tracefix") or "")


MEASURE = ("import resource, subprocess, sys, time\n"
           "fin = open(sys.argv[1], 'rb') if sys.argv[1] != '-' else subprocess.DEVNULL\n"
           "t = time.perf_counter()\n"
           "r = subprocess.run(sys.argv[2:], stdin=fin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, shell=False)\n"
           "print(r.returncode, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def run(cmd, stdin=None) -> tuple:
    """(returncode, seconds, peak RSS MiB) of one command, measured by a fresh wrapper process."""
    out = subprocess.run([PY, "-c", MEASURE, str(stdin or "-"), *cmd], capture_output=True, text=True, check=True)
    code, secs, rss = out.stdout.split()
    return int(code), float(secs), int(rss) / 1024


def shell(cmd: str) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def median(fn, n: int) -> float:
    return statistics.median(fn() for _ in range(n))


def row(figure: str, value: str, reference: str, ratio: float, budget: float, ok: bool = None) -> str:
    """| figure | value | reference | ratio | budget | pass |"""
    ok = ratio <= budget if ok is None else ok
    return f"| {figure} | {value} | {reference} | {ratio:.2f}x | {budget:g}x | {'PASS' if ok else 'FAIL'} |"
