"""Shared by the bench scripts: timing, peak RSS of a child, the one-row output convention."""
from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out"
VENV = OUT / "venv"
STAMP = VENV / "tracefix-sources.sha256"


def _bin(name: str) -> Path:
    return VENV / ("Scripts" if os.name == "nt" else "bin") / (name + (".exe" if os.name == "nt" else ""))


def _sources_digest() -> str:
    h = hashlib.sha256()
    for path in sorted([*REPO.glob("tracefix/**/*.py"), *REPO.glob("knowledge/*.toml"), REPO / "pyproject.toml", REPO / "setup.py"]):
        h.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def user_install() -> Path:
    """The Python of a fresh virtual environment (bench/out/venv, no system site-packages) with
    tracefix installed from a wheel built from this checkout, bytecode compiled by pip: what a user
    who ran `pip install .` gets.  Rebuilt when the sources changed; dependencies come from pip's
    index or cache the first time."""
    digest = _sources_digest()
    python = _bin("python")
    if python.exists() and STAMP.exists() and STAMP.read_text().strip() == digest:
        return python
    quiet = {"stdout": subprocess.DEVNULL, "check": True}
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], **quiet)
    dist = OUT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(dist), str(REPO)], **quiet)
    wheel = next(dist.glob("tracefix-*.whl"))
    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", "tracefix"], **quiet)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)], **quiet)
    STAMP.write_text(digest + "\n")
    return python


# Every figure is measured with the user's install; TRACEFIX_BENCH_PY=<python> measures another one.
PY = os.environ.get("TRACEFIX_BENCH_PY") or str(user_install())
# ... and without PYTHONPATH, which would put a checkout's tracefix before the installed one; from
# a folder without one too (`python -m` and `-c` put the current folder first on sys.path).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
CWD = str(OUT)


def console_script() -> str:
    """The installed `tracefix` entry point next to the measured interpreter (not a pyenv shim)."""
    cand = Path(PY).parent / ("tracefix.exe" if os.name == "nt" else "tracefix")
    return str(cand) if cand.exists() else ""


MEASURE = ("import resource, subprocess, sys, time\n"
           "fin = open(sys.argv[1], 'rb') if sys.argv[1] != '-' else subprocess.DEVNULL\n"
           "t = time.perf_counter()\n"
           "r = subprocess.run(sys.argv[2:], stdin=fin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, shell=False)\n"
           "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
           "print(r.returncode, time.perf_counter() - t, u.ru_maxrss, u.ru_utime + u.ru_stime)\n")


def run(cmd, stdin=None) -> tuple:
    """(returncode, seconds, peak RSS MiB) of one command, measured by a fresh wrapper process."""
    out = subprocess.run([PY, "-c", MEASURE, str(stdin or "-"), *cmd], capture_output=True, text=True, check=True,
                         env=ENV, cwd=CWD)
    code, secs, rss, cpu = out.stdout.split()
    return int(code), float(secs), int(rss) / 1024


def cpu_time(cmd, stdin=None) -> float:
    """CPU seconds (user + system) of one command: steadier than wall time on a busy machine."""
    return timed(cmd, stdin)[1]


def timed(cmd, stdin=None) -> tuple:
    """(wall seconds, CPU seconds) of one run of a command, measured by a fresh wrapper process."""
    out = subprocess.run([PY, "-c", MEASURE, str(stdin or "-"), *cmd], capture_output=True, text=True, check=True,
                         env=ENV, cwd=CWD)
    fields = out.stdout.split()
    return float(fields[1]), float(fields[3])


def interleaved(cmds: dict, n: int) -> dict:
    """{name: (median wall, median CPU)} of n rounds that each run every command once, in turn.
    Load that comes and goes then falls on a command and its reference alike, so their ratio
    moves less than when each is timed n times in a row."""
    got = {name: [] for name in cmds}
    for _ in range(n):
        for name, cmd in cmds.items():
            got[name].append(timed(cmd))
    return {name: (statistics.median(w for w, _ in ts), statistics.median(c for _, c in ts)) for name, ts in got.items()}


def shell(cmd: str) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=CWD)
    return time.perf_counter() - t


def median(fn, n: int) -> float:
    return statistics.median(fn() for _ in range(n))


def row(figure: str, value: str, reference: str, ratio: float, budget: float, ok: bool = None) -> str:
    """| figure | value | reference | ratio | budget | pass |"""
    ok = ratio <= budget if ok is None else ok
    return f"| {figure} | {value} | {reference} | {ratio:.2f}x | {budget:g}x | {'PASS' if ok else 'FAIL'} |"
