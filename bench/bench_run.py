"""Overhead of ``tracefix run``: a command printing ~100 MB of progress output, run directly and
through ``tracefix run --``, output to a file in both cases; median of a few runs.

    python bench/bench_run.py [--mb 100] [--runs 5] [--row]

Prints a table: median wall time and CPU time (tracefix's own plus the child's) of each, with
their ratios to the direct run.  The bar is a wall-time ratio <= 1.10; exits 1 above it.  On a
busy machine run it a few times: wall time there measures the neighbours as well.  ``--row``
prints one `| figure | value | reference | ratio | budget | pass |` row instead (bench/run.py),
exit status 0 whatever the verdict (the row says PASS or FAIL).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CWD, ENV, PY, row  # noqa: E402

BAR = 1.10

# tqdm-like progress lines ("\r" redraws and a "\n" now and then), written the way print() does.
CHILD = r"""
import sys
total = {nbytes}
write = sys.stdout.write
line = "\r step {{:>9d}} |" + "#" * 40 + "| loss 0.123456 lr 3.0e-04 it/s 1234.5"
n = 0
i = 0
while n < total:
    s = line.format(i)
    if i % 1000 == 0:
        s += "\n"
    write(s)
    n += len(s)
    i += 1
sys.stdout.flush()
"""


def timed(cmd, out_path: str):
    """(wall seconds, CPU seconds of the process and its children) of one run, output to a file."""
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=ENV, cwd=CWD)
        _pid, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"bench: {cmd[:3]} exited {proc.returncode}")
    return elapsed, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="megabytes of output (default 100)")
    ap.add_argument("--runs", type=int, default=5, help="runs of each, median taken (default 5)")
    ap.add_argument("--row", action="store_true", help="print one markdown table row (bench/run.py)")
    args = ap.parse_args()
    child = [PY, "-c", CHILD.format(nbytes=args.mb * 1_000_000)]
    wrapped = [PY, "-m", "tracefix", "run", "--format", "plain", "--", *child]
    direct_t, run_t = [], []
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "direct.out"), os.path.join(tmp, "run.out")
        timed(child, a)  # warm caches
        for _ in range(args.runs):       # interleaved, so that drift hits both alike
            direct_t.append(timed(child, a))
            run_t.append(timed(wrapped, b))
        same = os.path.getsize(a) == os.path.getsize(b)
        with open(a, "rb") as fa, open(b, "rb") as fb:
            same = same and fa.read() == fb.read()
    d, r = statistics.median(t for t, _ in direct_t), statistics.median(t for t, _ in run_t)
    dc, rc = statistics.median(c for _, c in direct_t), statistics.median(c for _, c in run_t)
    ratio = r / d
    if args.row:
        print(row(f"(d) tracefix run -- on {args.mb} MB of progress output (output identical: {'yes' if same else 'NO'})",
                  f"{r:.3f} s (cpu {rc:.3f} s)", f"direct {d:.3f} s (cpu {dc:.3f} s)", ratio, BAR,
                  ok=ratio <= BAR and same))
        return 0
    print(f"{'case':<20}{'MB':>5}{'runs':>6}{'wall s':>9}{'ratio':>7}{'cpu s':>9}{'ratio':>7}")
    print(f"{'direct':<20}{args.mb:>5}{args.runs:>6}{d:>9.3f}{1.0:>7.3f}{dc:>9.3f}{1.0:>7.3f}")
    print(f"{'tracefix run --':<20}{args.mb:>5}{args.runs:>6}{r:>9.3f}{ratio:>7.3f}{rc:>9.3f}{rc / dc:>7.3f}"
          f"   wall ratio {'ok' if ratio <= BAR else f'OVER {BAR:.2f}'} (bar {BAR:.2f}); output identical: {same}")
    return 0 if ratio <= BAR and same else 1


if __name__ == "__main__":
    sys.exit(main())
