"""The benchmark suite: `python bench/run.py` prints one markdown table of every figure.

Each bench/bench_*.py script, run as `python bench/bench_X.py --row`, prints one or more lines
`| figure | value | reference | ratio | budget | pass |`; this script runs each as a subprocess
(so no import or cache is shared between them) and collects the rows.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ["bench_diagnose.py", "bench_scan.py", "bench_patch.py", "bench_run.py", "bench_witness.py", "bench_families.py"]
HEADER = "| figure | value | reference | ratio | budget | pass |\n|---|---|---|---|---|---|"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the generated scan log")
    ap.add_argument("--only", nargs="*", help="run only these scripts (e.g. bench_scan.py)")
    args = ap.parse_args(argv)
    rows, failed = [], False
    t0 = time.perf_counter()
    for name in args.only or SCRIPTS:
        path = HERE / name
        if not path.exists():
            rows.append(f"| {name} | not present | | | | SKIP |")
            continue
        cmd = [sys.executable, str(path), "--row"] + (["--size-mb", str(args.size_mb)] if name == "bench_scan.py" else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        got = [ln for ln in r.stdout.splitlines() if ln.startswith("|")]
        if r.returncode != 0 or not got:
            err = (r.stderr.strip().splitlines() or ["no row printed"])[-1]
            rows.append(f"| {name} | error: {err[:120]} | | | | FAIL |")
            failed = True
            continue
        rows += got
        failed |= any(ln.rstrip().endswith("FAIL |") for ln in got)
    print(HEADER)
    print("\n".join(rows))
    print(f"\n{len(rows)} figures in {time.perf_counter() - t0:.0f} s; python {sys.version.split()[0]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
