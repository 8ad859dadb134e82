"""(b) scan throughput and peak memory on a generated realistic training log (traceback at the end)
vs `grep -c Traceback FILE` and `cat FILE | grep -c Traceback`.  `--row` prints table rows only."""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, median, row, run, shell  # noqa: E402
from gen import write_training_log  # noqa: E402

RSS_BUDGET_MB = 100


def rows(size_mb: int = 1024, n: int = 3):
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "train.log"
        size = write_training_log(log, size_mb << 20)
        root = Path(tmp) / "proj"
        root.mkdir()
        cmd = [PY, "-m", "tracefix", "--no-patch", "--format", "plain", "--root", str(root)]
        code, _, rss = run(cmd + [str(log)])
        t_file = median(lambda: run(cmd + [str(log)])[1], n)
        grep = median(lambda: shell(f"grep -c Traceback {shlex.quote(str(log))}"), n)
        mb = size / (1 << 20)
        out.append(row(f"(b) scan {mb:.0f} MiB log, file arg (exit {code})", f"{t_file:.2f} s ({mb / t_file:.0f} MiB/s)",
                       f"grep -c {grep:.2f} s", t_file / grep, 4))
        q = " ".join(shlex.quote(c) for c in cmd)
        t_pipe = median(lambda: shell(f"cat {shlex.quote(str(log))} | {q}"), n)
        cat_grep = median(lambda: shell(f"cat {shlex.quote(str(log))} | grep -c Traceback"), n)
        out.append(row("(b) scan via pipe: cat | tracefix", f"{t_pipe:.2f} s", f"cat | grep -c {cat_grep:.2f} s",
                       t_pipe / cat_grep, 1.5))
        out.append(row("(b) scan peak RSS", f"{rss:.0f} MiB", f"{RSS_BUDGET_MB} MiB", rss / RSS_BUDGET_MB, 1.0))
        os.unlink(log)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--row", action="store_true")
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("-n", type=int, default=3)
    a = ap.parse_args()
    print("\n".join(rows(a.size_mb, a.n)))
