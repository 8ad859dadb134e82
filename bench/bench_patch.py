"""(c) patch latency: `tracefix --apply` on a generated 3,000-line model file (a fresh copy per
run) vs bare `python -c pass`.  `--row` prints table rows only."""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, median, row, run  # noqa: E402
from gen import write_model_project  # noqa: E402

BUDGET = 40.0


def rows(n: int = 5):
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template"
        write_model_project(template, 3000)
        lines = (template / "model.py").read_text().count("\n")
        codes = []

        def once() -> float:
            work = Path(tempfile.mkdtemp(dir=tmp))
            shutil.copytree(template, work, dirs_exist_ok=True)
            code, secs, _ = run([PY, "-m", "tracefix", "--apply", "--format", "plain", "--root", str(work),
                                 str(work / "crash.log")])
            codes.append(code)
            changed = (work / "model.py").read_text() != (template / "model.py").read_text()
            codes.append("written" if changed else "unchanged")
            return secs

        base = median(lambda: run([PY, "-c", "pass"])[1], n)
        t = median(once, n)
        status = f"exit {codes[0]}, {codes[1]}"
        return [row(f"(c) --apply on a {lines}-line model file ({status})", f"{t * 1000:.0f} ms",
                    f"python -c pass {base * 1000:.0f} ms", t / base, BUDGET, ok=(t / base <= BUDGET and codes[0] == 0))]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--row", action="store_true")
    ap.add_argument("-n", type=int, default=5)
    a = ap.parse_args()
    print("\n".join(rows(a.n)))
