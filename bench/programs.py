"""Issue 19's figures on the real-program test bed (tests/programs) and, with --samples, the samples.

    python bench/programs.py                 # the test bed, about 15 s a program on 2 cores
    python bench/programs.py --samples       # and every sample that runs on this machine
    python bench/programs.py -k dcgan -v     # some programs, one row each

Each program is copied to a temporary folder and run as a user would: its crash log goes to
`tracefix --format json` (is the first fix site the expected one?) and `tracefix --apply` (does it
train after?); a fresh copy goes through `tracefix run --apply --verify` (is it verified, and does it
really train after?). "Trains" means exit 0 with the entry's `trained` regex on stdout. Samples whose
log was recorded on a GPU (`recorded = true`) are left out. The exit status is 1 when a figure misses
the issue's threshold.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", NO_COLOR="1")
TIMEOUT = 300


def _tracefix(args, **kw):
    return subprocess.run([sys.executable, "-m", "tracefix", *args], capture_output=True, env=ENV,
                          timeout=TIMEOUT, **kw)


def _trains(folder: Path, pattern: str) -> bool:
    r = subprocess.run(["python3", "train.py"], cwd=folder, capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    return r.returncode == 0 and re.search(pattern, r.stdout, re.M) is not None


def measure(folder: Path) -> dict:
    exp = tomllib.loads((folder / "expected.toml").read_text())
    pattern = exp.get("trained", r"loss")
    wanted = {exp["fix_site"], *exp.get("fix_site_also", [])}
    work = Path(tempfile.mkdtemp(prefix="tracefix-bench-"))
    try:
        plain, verify = work / "plain" / folder.name, work / "verify" / folder.name
        shutil.copytree(folder, plain, ignore=shutil.ignore_patterns("expected.toml", "crash.log"))
        shutil.copytree(folder, verify, ignore=shutil.ignore_patterns("expected.toml", "crash.log"))
        crash = subprocess.run(["python3", "train.py"], cwd=plain, capture_output=True, env=ENV, timeout=TIMEOUT)
        log = crash.stdout + crash.stderr
        out = _tracefix(["--format", "json", "--root", str(plain), "-"], input=log)
        try:
            diag = (json.loads(out.stdout).get("diagnoses") or [{}])[0]
        except ValueError:
            diag = {}
        sites = diag.get("fix_sites") or []
        first = f'{sites[0]["path"]}:{sites[0]["line"]}' if sites else "-"
        label = diag["patches"][0]["applicability"] if diag.get("patches") else "none"
        _tracefix(["--apply", "--root", str(plain), "-"], input=log)
        trains = _trains(plain, pattern)
        v = _tracefix(["run", "--apply", "--verify", "--format", "json", "--", "python3", "train.py"], cwd=verify)
        try:
            verdict = json.loads(v.stdout).get("verification") or "none"
        except ValueError:
            verdict = "none"
        really = _trains(verify, pattern)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"name": folder.name, "expected": exp["fix_site"], "first": first, "site": first in wanted,
            "label": label, "trains": trains, "verdict": verdict, "really": really}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", action="store_true", help="also measure the samples")
    ap.add_argument("-k", default="", help="only folders whose name contains this")
    ap.add_argument("-j", type=int, default=2, help="programs measured at once (default 2)")
    ap.add_argument("-v", action="store_true", help="one row per program")
    a = ap.parse_args(argv)
    folders = sorted(p.parent for p in (REPO / "tests" / "programs").glob("*/expected.toml"))
    if a.samples:
        folders += sorted(p.parent for p in (REPO / "samples").glob("*/expected.toml")
                          if not tomllib.loads(p.read_text()).get("recorded"))
    folders = [f for f in folders if a.k in f.name]
    with ThreadPoolExecutor(max(1, a.j)) as pool:
        rows = list(pool.map(measure, folders))
    n = len(rows) or 1
    if a.v:
        print("| program | expected | first | label | trains after --apply | verify | trains after verify |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f'| {r["name"]} | {r["expected"]} | {r["first"]} | {r["label"]} | {r["trains"]} | '
                  f'{r["verdict"]} | {r["really"]} |')
        print()
    figures = [
        ("true fix site first", sum(r["site"] for r in rows), ">=", 0.90),
        ("trains after --apply", sum(r["trains"] for r in rows), ">=", 0.90),
        ("run --apply --verify: verified and trains", sum(r["verdict"] == "verified" and r["really"] for r in rows),
         ">=", 0.95),
        ("verified but still fails", sum(r["verdict"] == "verified" and not r["really"] for r in rows), "==", 0),
        ("safe patch that does not train", sum(r["label"] == "safe" and not r["trains"] for r in rows), "==", 0),
    ]
    print(f"| figure ({len(rows)} programs) | count | share | threshold | pass |")
    print("|---|---|---|---|---|")
    ok = True
    for name, count, op, bound in figures:
        passed = count / n >= bound if op == ">=" else count == bound
        ok &= passed
        limit = f">= {bound:.0%}" if op == ">=" else f"== {bound}"
        print(f"| {name} | {count} | {count / n:.0%} | {limit} | {'PASS' if passed else 'FAIL'} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
