"""Notebooks, end to end on a real ipykernel with torch (CPU): the extension, and logs of executed notebooks.

The notebooks live in tests/notebooks/ (fixtures for these tests, not samples: a sample is a script
with crash.log and expected.toml).  Kernel runs are slow (~5 s each), so every notebook is executed
once per role in session fixtures, all at the same time.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
NOTEBOOKS = HERE / "notebooks"
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# name: (fix cell, fix line, cell that runs and fails, crash cell, crash line, the fixed line)
# cells are 1-based positions in the .ipynb (markdown cells count); lines are lines of that cell.
CASES = {
    "inplace_residual": (3, 8, 5, 5, 6, "out = out + x"),             # culprit in the model cell
    "nonscalar_criterion": (3, 2, 4, 4, 8, 'reduction="mean"'),      # criterion cell; magics around
    "nonscalar_train_step": (2, 3, 3, 2, 5, 'reduction="mean"'),     # crash frame in a function's cell
    "fp16_half_model": (2, 1, 3, 3, 9, "nn.Linear(16, 1))\n"),       # .half() dropped in the model cell
}
pytestmark = pytest.mark.torch


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("JUPYTER_PLATFORM_DIRS", "1")
    return env


def _text(outputs) -> str:
    """Everything a cell showed, as text (error tracebacks, streams, rich's text/plain)."""
    parts = []
    for o in outputs:
        if o.get("output_type") == "error":
            parts.append("\n".join(o.get("traceback", [])))
        elif o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        else:
            parts.append(o.get("data", {}).get("text/plain", ""))
    return ANSI.sub("", "\n".join(parts))


def _errors(outputs):
    return [o for o in outputs if o.get("output_type") == "error"]


def _in_number(nb_path: Path, cell: int) -> int:
    """In [N] of file cell ``cell`` when the extension's cell ran first and every cell ran once."""
    cells = json.loads(nb_path.read_text(encoding="utf-8"))["cells"]
    code = [i for i, c in enumerate(cells, 1) if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    return code.index(cell) + 2


def _nbconvert(nb: Path, log: Path) -> subprocess.Popen:
    fh = open(log, "wb")
    return subprocess.Popen([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                             "--stdout", str(nb)], stdout=subprocess.DEVNULL, stderr=fh, env=_env(), cwd=nb.parent)


def _once(tmp_path_factory, key: str, build) -> Path:
    """A folder that ``build(folder)`` fills once per test run, also under pytest-xdist.

    Every xdist worker has its own session: the first to take the lock runs the (slow) kernels,
    the others wait for its ``.done`` marker and read the same files.
    """
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder = base / key
    done = base / f"{key}.done"
    try:
        os.close(os.open(base / f"{key}.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        deadline = time.monotonic() + 1800
        while not done.exists():
            assert time.monotonic() < deadline, f"another worker did not finish {key}"
            time.sleep(0.5)
        assert done.read_text() == "ok", done.read_text()
        return folder
    folder.mkdir()
    try:
        build(folder)
    except BaseException as exc:
        done.write_text(f"failed: {exc!r}"[:2000])
        raise
    done.write_text("ok")
    return folder


def _build_runs(base: Path) -> None:
    procs = []
    for name, (fix, _, ran, *_rest) in CASES.items():
        folder = base / name
        folder.mkdir()
        shutil.copy(NOTEBOOKS / f"{name}.ipynb", folder / f"{name}.ipynb")
        logdir = base / f"{name}-log"
        logdir.mkdir()
        shutil.copy(NOTEBOOKS / f"{name}.ipynb", logdir / f"{name}.ipynb")
        procs.append(subprocess.Popen([sys.executable, str(HERE / "nbexec.py"), str(folder / f"{name}.ipynb"),
                                       str(fix), str(ran), str(folder / "kernel.json")],
                                      env=_env(), cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        procs.append(_nbconvert(logdir / f"{name}.ipynb", logdir / "nbconvert.log"))
    anomaly = base / "anomaly"
    anomaly.mkdir()
    shutil.copy(NOTEBOOKS / "inplace_pooler_dropout.ipynb", anomaly / "nb.ipynb")
    procs.append(subprocess.Popen([sys.executable, str(HERE / "nbexec.py"), "--anomaly", str(anomaly / "nb.ipynb"),
                                   "4", str(anomaly / "kernel.json")],
                                  env=_env(), cwd=anomaly, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for p in procs:
        _, err = p.communicate(timeout=1200)
        if p.args[1].endswith("nbexec.py"):
            assert p.returncode == 0, (err or b"").decode(errors="replace")[-3000:]


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """Each notebook run once with the extension, and once by nbconvert (its stderr is the log)."""
    base = _once(tmp_path_factory, "tracefix-nbruns", _build_runs)
    out = {"anomaly": json.loads((base / "anomaly" / "kernel.json").read_text(encoding="utf-8"))}
    for name in CASES:
        out[name] = {"kernel": json.loads((base / name / "kernel.json").read_text(encoding="utf-8")),
                     "log": (base / f"{name}-log" / "nbconvert.log").read_bytes(), "dir": base / name}
    return out


def _build_applied(base: Path, runs) -> None:
    procs = []
    for name in CASES:
        root = base / name
        root.mkdir()
        nb = root / f"{name}.ipynb"
        shutil.copy(NOTEBOOKS / f"{name}.ipynb", nb)
        log = base / f"{name}.log"
        log.write_bytes(runs[name]["log"])
        res = subprocess.run([sys.executable, "-m", "tracefix", "--apply", "--format", "plain", "--root", str(root),
                              str(log)], capture_output=True, env=_env(), timeout=300)
        (base / f"{name}.after").write_bytes(nb.read_bytes())
        (base / f"{name}.apply.json").write_text(json.dumps(
            {"rc": res.returncode, "out": res.stdout.decode(errors="replace") + res.stderr.decode(errors="replace")}))
        procs.append((name, _nbconvert(nb, base / f"{name}.rerun.log")))
    for name, p in procs:
        p.wait(timeout=1200)
        (base / f"{name}.rerun.rc").write_text(str(p.returncode))


@pytest.fixture(scope="session")
def applied(runs, tmp_path_factory):
    """tracefix --apply on each nbconvert log, then the patched notebooks re-executed (in parallel)."""
    base = _once(tmp_path_factory, "tracefix-nbapply", lambda folder: _build_applied(folder, runs))
    out = {}
    for name in CASES:
        res = json.loads((base / f"{name}.apply.json").read_text())
        out[name] = {"root": base / name, "nb": base / name / f"{name}.ipynb",
                     "before": (NOTEBOOKS / f"{name}.ipynb").read_bytes(), "after": (base / f"{name}.after").read_bytes(),
                     "apply_rc": res["rc"], "apply_out": res["out"], "rerun_log": base / f"{name}.rerun.log",
                     "rerun_rc": int((base / f"{name}.rerun.rc").read_text())}
    return out


# --- the extension ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_extension_names_fix_cell_under_the_failing_cell(runs, name):
    fix, fix_line, ran, crash, crash_line, _ = CASES[name]
    k = runs[name]["kernel"]
    outputs = k["cells"][ran]
    kinds = [o["output_type"] for o in outputs]
    assert kinds.count("error") == 1, kinds
    first = kinds.index("error")                  # IPython's own traceback comes first
    text = _text(outputs[first + 1:])
    nb = NOTEBOOKS / f"{name}.ipynb"
    assert f"fix site:   In [{_in_number(nb, fix)}], line {fix_line}" in text, text
    assert f"crash site: In [{_in_number(nb, crash)}], line {crash_line}" in text, text
    assert "patch 1 (recommended" in text and f"In [{_in_number(nb, fix)}]" in text
    # the load cell (loading twice) showed nothing and the cells before the crash ran cleanly
    assert not any(_errors(c) for c in k["cells"][:ran])
    assert _text(k["cells"][0]).strip() == ""
    # %tracefix shows the same diagnosis again
    assert f"fix site:   In [{_in_number(nb, fix)}], line {fix_line}" in _text(k["reshow"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_witness_line_names_cells_as_the_sites_do(runs, name):
    """Not the kernel's file of a cell (``3330693015.py:9``): In [N], line L."""
    outputs = runs[name]["kernel"]["cells"][CASES[name][2]]
    kinds = [o["output_type"] for o in outputs]
    text = _text(outputs[kinds.index("error") + 1:])              # the diagnosis, after IPython's traceback
    seen = [ln for ln in text.splitlines() if "The witness saw:" in ln]
    assert seen, text
    assert not re.search(r"\d+\.py:\d|ipython-input|ipykernel", text), text
    if name == "inplace_residual":
        assert "by add_ at In [3], line 8" in seen[0], seen


@pytest.mark.parametrize("name", sorted(CASES))
def test_tracefix_fix_yields_a_cell_that_runs(runs, name):
    fix, _, ran, _, _, fixed = CASES[name]
    k = runs[name]["kernel"]
    assert k["payload"] is not None, _text(k["fix_magic"])
    assert fixed in k["payload"] + "\n"
    original = "".join(json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())["cells"][fix - 1]["source"])
    assert k["payload"] != original
    assert not _errors(k["fixed_cell"]), _text(k["fixed_cell"])
    assert k["rerun"] or fix == ran
    for outputs in k["rerun"]:
        assert not _errors(outputs), _text(outputs)
    assert _text(k["rerun"][-1] if k["rerun"] else k["fixed_cell"]).count("loss") == 5


def test_unknown_errors_and_unload(runs):
    k = runs["inplace_residual"]["kernel"]
    assert [o["output_type"] for o in k["unknown"]] == ["error"]          # untouched: only IPython's
    assert k["unknown"][0]["ename"] == "KeyError"
    assert not _errors(k["unload"])
    after = k["after_unload"]
    assert [o["output_type"] for o in after] == ["error"], _text(after)   # no diagnosis any more
    assert "scalar outputs" in _text(after)


# --- logs of executed notebooks -------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_nbconvert_log_names_notebook_and_cell(runs, name, tmp_path):
    fix, fix_line, _, crash, crash_line, _ = CASES[name]
    root = runs[name]["dir"]
    log = tmp_path / "nb.log"
    log.write_bytes(runs[name]["log"])
    res = subprocess.run([sys.executable, "-m", "tracefix", "--format", "json", "--no-patch", "--root",
                          str(NOTEBOOKS), str(log)], capture_output=True, env=_env(), timeout=120)
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)["diagnoses"][0]
    site = d["fix_sites"][0]
    assert (site["path"], site["cell"], site["cell_line"]) == (f"{name}.ipynb", fix, fix_line)
    c = d["crash_site"]
    assert (c["path"], c["cell"], c["cell_line"]) == (f"{name}.ipynb", crash, crash_line)
    res = subprocess.run([sys.executable, "-m", "tracefix", "--format", "quickfix", "--no-patch", "--root",
                          str(NOTEBOOKS), str(log)], capture_output=True, env=_env(), timeout=120, text=True,
                         cwd=NOTEBOOKS)
    first = res.stdout.splitlines()[0]
    m = re.match(r"^(.*?):(\d+):(\d+): (\S+): fix here: \((.*?)\)", first)
    assert m, first
    assert m.group(5) == f"{name}.ipynb, cell {fix}, line {fix_line}"
    json_line = (NOTEBOOKS / m.group(1)).read_text(encoding="utf-8").split("\n")[int(m.group(2)) - 1]
    assert site["code"] in json.loads(json_line.strip().rstrip(","))     # an editor lands on the source line
    source = json.loads(json_line.strip().rstrip(","))                  # ... and on the site's column
    assert json_line[int(m.group(3)) - 1:].startswith(json.dumps(source[site["col"]:])[1:12]), (json_line, site)


@pytest.mark.parametrize("name", sorted(CASES))
def test_apply_on_nbconvert_log_makes_the_notebook_run_and_undo_restores_it(applied, name):
    a = applied[name]
    assert a["apply_rc"] == 0, a["apply_out"]
    assert a["after"] != a["before"]
    old, new = json.loads(a["before"]), json.loads(a["after"])
    fix = CASES[name][0]
    changed = [i + 1 for i, (x, y) in enumerate(zip(old["cells"], new["cells"])) if x != y]
    assert changed == [fix]                                   # only the fix cell's source changed
    assert {k: v for k, v in old["cells"][fix - 1].items() if k != "source"} == \
        {k: v for k, v in new["cells"][fix - 1].items() if k != "source"}
    assert a["rerun_rc"] == 0, a["rerun_log"].read_text(errors="replace")[-3000:]
    res = subprocess.run([sys.executable, "-m", "tracefix", "undo", "--root", str(a["root"])],
                         capture_output=True, env=_env(), timeout=60)
    assert res.returncode == 0, res.stderr
    assert a["nb"].read_bytes() == a["before"]


def test_apply_refuses_when_the_cell_changed(runs, tmp_path):
    name = "inplace_residual"
    nb = tmp_path / f"{name}.ipynb"
    data = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))
    data["cells"][4]["source"] = ["for step in range(5):\n", "    pass\n"]    # the crashing cell, edited
    nb.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    before = nb.read_bytes()
    log = tmp_path / "nb.log"
    log.write_bytes(runs[name]["log"])
    res = subprocess.run([sys.executable, "-m", "tracefix", "--apply", "--format", "plain", "--root", str(tmp_path),
                          str(log)], capture_output=True, env=_env(), timeout=120, text=True)
    assert res.returncode == 3, res.stdout + res.stderr
    assert "no notebook cell" in res.stdout + res.stderr
    assert nb.read_bytes() == before


def test_anomaly_mode_in_the_kernel_names_the_fix_cell(runs):
    """nn.Dropout(inplace=True) on a Tanh output: the traceback alone does not settle it.  The witness
    the extension arms in the kernel does (first run: the model cell is In [3]), and so does the
    forward trace that ``%tracefix anomaly on`` makes torch record (cell 2 line 6 of the file)."""
    k = runs["anomaly"]
    first = _text(k["first"])
    assert "The witness saw" in first
    assert "fix site:   In [3], line 6" in first, first
    assert "anomaly detection on" in _text(k["magic"])
    second = _text(k["second"])
    # second run: load In [1], cells In [2..5], magic In [6], cells again In [7..9]; the model cell is In [7]
    assert "fix site:   In [7], line 6" in second, second
    assert "inplace=True" in second and "patch 1 (recommended" in second


def test_terminal_ipython_prints_plain_text_after_the_traceback(tmp_path):
    """A terminal-style IPython shell (not a kernel): plain text, after IPython's own traceback."""
    cells = [c for c in json.loads((NOTEBOOKS / "inplace_residual.ipynb").read_text())["cells"]
             if c["cell_type"] == "code"]
    script = tmp_path / "drive.py"
    script.write_text(
        "import json, sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance(colors='NoColor')\n"
        "shell.run_cell('%load_ext tracefix')\n"
        "for src in json.loads(sys.argv[1]):\n"
        "    shell.run_cell(src, store_history=True)\n"
        "print('=== AGAIN'); shell.run_cell('%tracefix')\n", encoding="utf-8")
    res = subprocess.run([sys.executable, str(script), json.dumps(["".join(c["source"]) for c in cells])],
                         capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300)
    out = res.stdout
    assert "\x1b[" not in out and "╭" not in out                       # plain, no rich panel
    tb = out.index("RuntimeError")
    diag = out.index("inplace-modification: A tensor saved for backward")
    assert tb < diag                                                   # the normal traceback first
    assert "  fix site:   In [2], line 8" in out and "  crash site: In [4], line 6" in out  # load_ext: no In [N]
    assert "  The witness saw: 'out' [16, 8] (output of relu) was changed in place by add_ at In [2], line 8" in out
    assert "+++ b/In [2]" in out and "+        out = out + x  # skip connection" in out
    assert out.split("=== AGAIN", 1)[1].count("fix site:   In [2], line 8") == 1


def test_run_apply_verify_on_nbconvert_keeps_the_patch_when_the_kernel_reached_the_steps(tmp_path):
    """The verify hook ends the kernel after the steps; nbconvert then fails ("Kernel died"): that is
    tracefix's own doing, not the patched notebook's, so it is verified and the patch stays."""
    nb = tmp_path / "inplace_residual.ipynb"
    shutil.copy(NOTEBOOKS / "inplace_residual.ipynb", nb)
    # --verify-timeout 0: the hook ends the kernel right after the steps (else the notebook runs to its end)
    res = subprocess.run([sys.executable, "-m", "tracefix", "run", "--apply", "--verify", "--verify-timeout", "0",
                          "--format", "json", "--",
                          sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--stdout",
                          nb.name], capture_output=True, env=_env(), cwd=tmp_path, timeout=600)
    err = res.stderr.decode(errors="replace")
    report = json.loads(res.stdout)
    assert (res.returncode, report["verification"]) == (0, "verified"), err[-3000:]
    assert report["applied"] == "inplace_residual.ipynb" and "restored" not in report
    assert "out = out + x" in "".join(json.loads(nb.read_text(encoding="utf-8"))["cells"][2]["source"])
    assert "tracefix: verify: steps ok: 2 optimizer steps" in err and "Kernel died" in err
