"""(g) what the ten families added after the first three cost a diagnosis of one of the first
three's errors: the installed package, copied whole, against a copy trimmed to the first three
families (their registry line, their entries, their folders; the entries' pre-parsed heads written
again), both run the same way (`PYTHONPATH=<copy> python -m tracefix`), on the crash log of
`samples/nonscalar-weighted-mse` mapped into a copy of that sample, with and without `--no-patch`:
medians of interleaved rounds.  The two copies must print the same diagnosis.  `--row` prints
table rows only."""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CWD, ENV, PY, REPO, interleaved, row  # noqa: E402

SAMPLE = "nonscalar-weighted-mse"
FIRST = ("nonscalar", "inplace", "half_unscale")
N = 15
BUDGET = 1.10


def _py(code: str, path: Optional[Path] = None) -> str:
    """``code``'s output, run by the measured Python, with the copy at ``path`` first on sys.path."""
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True,
                          env={**ENV, "PYTHONPATH": str(path)} if path else ENV, cwd=CWD)
    return done.stdout.strip()


def _copies(tmp: Path):
    installed = Path(_py("import os, tracefix; print(os.path.dirname(tracefix.__file__))"))
    every, first = tmp / "every", tmp / "first"
    for copy in (every, first):
        shutil.copytree(installed, copy / "tracefix")
    owners = _py("from tracefix.families import families\n"
                 "print(' '.join(f'{e}={f.name}' for f in families() for e in f.entries))", every)
    owner = dict(pair.split("=") for pair in owners.split())
    pkg = first / "tracefix"
    registry = pkg / "families" / "__init__.py"
    text, n = re.subn(r"^FAMILIES = \(.*\)$", f"FAMILIES = {FIRST!r}", registry.read_text(), count=1, flags=re.M)
    assert n == 1, "the registry line was not found"
    registry.write_text(text)
    for name in set(owner.values()) - set(FIRST):
        shutil.rmtree(pkg / "families" / name)
    for entry in (pkg / "entries").glob("*.toml"):
        if owner.get(entry.stem) not in FIRST:
            entry.unlink()
    _py("from pathlib import Path; import tracefix.entries as e; from tracefix.knowledge import write_heads_cache\n"
        "write_heads_cache(Path(e.__file__).parent)", first)
    kept = _py("from tracefix.families import families; from tracefix.knowledge import load_entries\n"
               "print(len(families()), len(load_entries()))", first).split()
    assert kept == [str(len(FIRST)), "4"], f"the trimmed copy has {kept} families and entries"
    return every, first, len(set(owner.values()))


def rows(n: int = N):
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        every, first, count = _copies(tmp)
        root = tmp / "proj"
        shutil.copytree(REPO / "samples" / SAMPLE, root)
        args = ["--format", "plain", "--root", str(root), str(root / "crash.log")]
        cmds, same = {}, {}
        for opts, label in ((["--no-patch"], "--no-patch"), ([], "with patches")):
            shown = {}
            for copy, who in ((every, f"{count} families"), (first, f"{len(FIRST)} families")):
                cmd = ["env", f"PYTHONPATH={copy}", PY, "-m", "tracefix", *opts, *args]
                # the first run also writes the bytecode of the edited registry
                done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=CWD)
                shown[who] = (done.returncode, done.stdout)
                cmds[f"{who}, {label}"] = cmd
            same[label] = len(set(shown.values())) == 1 and next(iter(shown.values()))[0] == 0
        times = interleaved(cmds, n)
        for label, ok in same.items():
            t_every, t_first = times[f"{count} families, {label}"][0], times[f"{len(FIRST)} families, {label}"][0]
            out.append(row(f"(g) diagnose the sample log, {label}: {count} families against the first {len(FIRST)} "
                           f"({'the same output' if ok else 'OUTPUTS DIFFER'})",
                           f"{t_every * 1000:.0f} ms", f"{len(FIRST)} families {t_first * 1000:.0f} ms",
                           t_every / t_first, BUDGET, ok=ok and t_every / t_first <= BUDGET))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--row", action="store_true")
    ap.add_argument("-n", type=int, default=N)
    a = ap.parse_args()
    print("\n".join(rows(a.n)))
