"""The real-program test bed (tests/programs, issue 19): each program is run once, under
`tracefix run --apply --verify`, which proves that the patch trains; the crash it passed through
is diagnosed as a plain log (is the true fix site first?). An entry's known_miss names the figures expected to fail; a miss that
starts passing fails too, so that the entry is updated. bench/programs.py prints the figures."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, after_crash, crash_log

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PROGRAMS = sorted(p.parent for p in (REPO / "tests" / "programs").glob("*/expected.toml"))
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1",
       "PYTHONPATH": str(REPO)}
LEAVE = shutil.ignore_patterns("expected.toml", "crash.log", "data", "out", "checkpoints", "__pycache__")


def _copy(src, dest):
    shutil.copytree(src, dest, ignore=LEAVE)
    return dest


def _tracefix(*args, **kw):
    return subprocess.run([sys.executable, "-m", "tracefix", *args], capture_output=True, text=True, env=ENV,
                          timeout=300, **kw)


@pytest.mark.parametrize("folder", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program(folder, tmp_path):
    exp = tomllib.loads((folder / "expected.toml").read_text())
    known = set(exp.get("known_miss", []))
    wanted = {exp["fix_site"], *exp.get("fix_site_also", [])}
    trained = re.compile(exp["trained"], re.M)

    verify = _copy(folder, tmp_path / "verify" / folder.name)
    run = _tracefix("run", "--apply", "--verify", "--format", "json", "--", sys.executable, "train.py", cwd=verify)
    report = json.loads(run.stdout)
    log = crash_log(run.stderr)
    assert report["command_exit_code"] != 0 and not trained.search(log), "the program no longer crashes"
    # the log as a user pipes it, against the unpatched project
    plain = _copy(folder, tmp_path / "plain" / folder.name)
    diag = json.loads(_tracefix("--format", "json", "--root", str(plain), "-", input=log).stdout)["diagnoses"]
    assert diag and diag[0]["id"] == exp["id"], diag[:1]
    assert f"{diag[0]['crash_site']['path']}:{diag[0]['crash_site']['line']}" == exp["crash_site"]
    sites = diag[0]["fix_sites"]
    first = f"{sites[0]['path']}:{sites[0]['line']}" if sites else "-"
    label = diag[0]["patches"][0]["applicability"] if diag[0]["patches"] else "none"

    verdict = report.get("verification")
    trains = trained.search(after_crash(run.stderr)) is not None         # the verify run's own output
    # never said of a program that still fails, whatever the entry expects
    assert not (verdict == "verified" and not trains), run.stderr[-1500:]

    got = {"site": first in wanted, "verify": verdict == "verified" and trains}
    for figure, ok in got.items():
        if figure in known:
            assert not ok, f"known miss '{figure}' now passes: update {folder.name}/expected.toml"
        else:
            assert ok, (figure, first, wanted, verdict, run.stderr[-1500:])
    if label == "safe":
        assert got["verify"], "a patch labelled safe does not train"
