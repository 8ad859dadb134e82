"""(a) diagnose latency on a 30-line traceback vs bare `python -c pass`; (e) import time and
what the plain/json diagnose path imports.  `--row` prints table rows only."""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, console_script, median, row, run  # noqa: E402
from gen import traceback_30  # noqa: E402

N = 10
BUDGET = 6.0
PROBE = r"""
import io, sys
from pathlib import Path
from tracefix.knowledge import load_entries
from tracefix.pipeline import diagnose
from tracefix.render import emit
entries = load_entries()
report = diagnose(open(sys.argv[1], 'rb'), entries, Path(sys.argv[2]), patches=False)
for fmt in ("plain", "json"):
    emit(io.StringIO(), report, fmt, entries)
print(len(report.diagnoses), *[m in sys.modules for m in ("libcst", "torch", "rich")])
"""


def rows(n: int = N):
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "proj"
        (root / "engine").mkdir(parents=True)
        (root / "engine" / "trainer.py").write_text("\n" * 76 + "        loss.backward()\n")
        log = Path(tmp) / "crash.log"
        log.write_text(traceback_30(str(root)))
        base = median(lambda: run([PY, "-c", "pass"])[1], n)
        ref = f"python -c pass {base * 1000:.0f} ms"
        variants = [("tracefix -m, --no-patch", [PY, "-m", "tracefix", "--no-patch"]),
                    ("tracefix -m (with patches)", [PY, "-m", "tracefix"])]
        script = console_script()
        if script:
            variants += [("tracefix script, --no-patch", [script, "--no-patch"]),
                         ("tracefix script (with patches)", [script])]
        for name, cmd in variants:
            full = cmd + ["--format", "plain", "--root", str(root)]
            code = run(full, stdin=log)[0]
            t = median(lambda: run(full, stdin=log)[1], n)
            out.append(row(f"(a) diagnose 30-line log: {name} (exit {code})", f"{t * 1000:.0f} ms", ref, t / base, BUDGET))
        # (e) import time of the diagnose path and what it imports
        imp = subprocess.run([PY, "-X", "importtime", "-c",
                              "import tracefix.cli, tracefix.pipeline, tracefix.reader, tracefix.matcher, tracefix.locator"],
                             capture_output=True, text=True)
        cum = [int(m.group(1)) for m in re.finditer(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)", imp.stderr)]
        names = re.findall(r"import time:\s+\d+ \|\s+\d+ \| +(\S.*)$", imp.stderr, re.M)
        top = sum(c for c, nm in zip(cum, names) if not nm.startswith(" "))  # top-level imports only
        t_imp = median(lambda: run([PY, "-c", "import tracefix.cli, tracefix.pipeline, tracefix.reader, "
                                              "tracefix.matcher, tracefix.locator"])[1], n)
        out.append(row("(e) import diagnose path (wall)", f"{t_imp * 1000:.0f} ms (importtime {top / 1000:.0f} ms)",
                       ref, t_imp / base, BUDGET))
        probe = subprocess.run([PY, "-c", PROBE, str(log), str(root)], capture_output=True, text=True)
        fields = probe.stdout.split()
        heavy = [m for m, f in zip(("libcst", "torch", "rich"), fields[1:]) if f == "True"]
        out.append(row("(e) plain/json diagnose imports libcst/torch/rich", ", ".join(heavy) or "none",
                       "none", 0.0, 0, ok=(not heavy and probe.returncode == 0 and fields[:1] == ["1"])))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--row", action="store_true")
    ap.add_argument("-n", type=int, default=N)
    a = ap.parse_args()
    print("\n".join(rows(a.n)))
