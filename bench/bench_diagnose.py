"""(a) diagnose latency on a sample's crash log whose frames map into a copy of that sample's
project (so the default output really computes and prints a patch) vs bare `python -c pass` from
the same virtual environment; (e) import time, and what the diagnose path imports.  Everything
runs from a wheel install (`_common.user_install`).  `--row` prints table rows only."""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ENV, PY, REPO, console_script, interleaved, median, row, run  # noqa: E402

SAMPLE = "nonscalar-weighted-mse"
N = 15
BUDGET = 6.0            # --no-patch, and the import figure
BUDGET_PATCH = 20.0     # the default output, which computes and shows a patch (imports libcst)
HEAVY = ("libcst", "torch", "rich", "click", "rapidfuzz")
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
print(len(report.diagnoses), *[m in sys.modules for m in ("libcst", "torch", "rich", "click", "rapidfuzz")])
"""


def rows(n: int = N):
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "proj"
        shutil.copytree(REPO / "samples" / SAMPLE, root)
        log = root / "crash.log"
        lines = log.read_text().count("\n")
        variants = [("tracefix -m, --no-patch", [PY, "-m", "tracefix", "--no-patch"], BUDGET),
                    ("tracefix -m (with patches)", [PY, "-m", "tracefix"], BUDGET_PATCH)]
        script = console_script()
        if script:
            variants += [("tracefix script, --no-patch", [script, "--no-patch"], BUDGET),
                         ("tracefix script (with patches)", [script], BUDGET_PATCH)]
        # the floor of the rows with a patch: computing one imports libcst (~60% of their time)
        cmds = {"python -c pass": [PY, "-c", "pass"], "import libcst": [PY, "-c", "import libcst"]}
        checks = {}
        for name, cmd, _budget in variants:
            full = cmds[name] = cmd + ["--format", "plain", "--root", str(root), str(log)]
            shown = subprocess.run(full, capture_output=True, text=True, env=ENV, cwd=root)
            diff = bool(re.search(r"^\s*--- a/train\.py$", shown.stdout, re.M)) and "+++ b/train.py" in shown.stdout
            wants_diff = "--no-patch" not in cmd
            note = ("a patch shown" if diff else "NO PATCH SHOWN") if wants_diff else "no patch computed"
            checks[name] = (shown.returncode, note, shown.returncode == 0 and diff == wants_diff)
        # the reference and every variant in turn, n rounds: see _common.interleaved
        times = interleaved(cmds, n)
        base, base_cpu = times["python -c pass"]
        ref = f"python -c pass {base * 1000:.0f} ms"
        floor = times["import libcst"][0]
        out.append(f"| (a) for reference, no budget: `python -c 'import libcst'`, which every row with a patch "
                   f"includes | {floor * 1000:.0f} ms | {ref} | {floor / base:.2f}x | - | info |")
        for name, cmd, budget in variants:
            code, note, ok = checks[name]
            t, c = times[name]
            out.append(row(f"(a) diagnose a {lines}-line sample log, frames mapped: {name} (exit {code}, {note})",
                           f"{t * 1000:.0f} ms", ref, t / base, budget, ok=ok and t / base <= budget))
            if cmd[0] == script:   # the same runs in CPU time (user + system), which load disturbs less
                out.append(row(f"(a) the same, CPU time: {name}", f"{c * 1000:.0f} ms", f"python -c pass {base_cpu * 1000:.0f} ms",
                               c / base_cpu, budget, ok=ok and c / base_cpu <= budget))
        # (e) import time of the diagnose path and what it imports
        modules = "import tracefix.cli, tracefix.pipeline, tracefix.reader, tracefix.matcher, tracefix.locator"
        imp = subprocess.run([PY, "-X", "importtime", "-c", modules], capture_output=True, text=True, env=ENV, cwd=root)
        cum = [int(m.group(1)) for m in re.finditer(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)", imp.stderr)]
        names = re.findall(r"import time:\s+\d+ \|\s+\d+ \| +(\S.*)$", imp.stderr, re.M)
        top = sum(c for c, nm in zip(cum, names) if not nm.startswith(" "))  # top-level imports only
        imp_times = interleaved({"base": [PY, "-c", "pass"], "import": [PY, "-c", modules]}, n)
        t_imp, base_imp = imp_times["import"][0], imp_times["base"][0]
        out.append(row("(e) import diagnose path (wall)", f"{t_imp * 1000:.0f} ms (importtime {top / 1000:.0f} ms)",
                       f"python -c pass {base_imp * 1000:.0f} ms", t_imp / base_imp, BUDGET))
        probe = subprocess.run([PY, "-c", PROBE, str(log), str(root)], capture_output=True, text=True, env=ENV, cwd=root)
        fields = probe.stdout.split()
        heavy = [m for m, f in zip(HEAVY, fields[1:]) if f == "True"]
        out.append(row("(e) plain/json diagnose (API) imports " + "/".join(HEAVY), ", ".join(heavy) or "none",
                       "none", 0.0, 0, ok=(not heavy and probe.returncode == 0 and fields[:1] == ["1"])))
        cli = subprocess.run([PY, "-X", "importtime", "-m", "tracefix", "--no-patch", "--format", "plain",
                              "--root", str(root), str(log)], capture_output=True, text=True, env=ENV, cwd=root)
        loaded = set(re.findall(r"\| +([\w.]+)$", cli.stderr, re.M))
        heavy = [m for m in HEAVY if m in loaded]
        out.append(row("(e) `tracefix --no-patch --format plain LOG` imports " + "/".join(HEAVY),
                       ", ".join(heavy) or "none", "none", 0.0, 0, ok=(not heavy and cli.returncode == 0)))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--row", action="store_true")
    ap.add_argument("-n", type=int, default=N)
    a = ap.parse_args()
    print("\n".join(rows(a.n)))
