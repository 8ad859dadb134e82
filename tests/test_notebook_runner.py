"""Notebook runners and the README's set-up (issue 22, item 9): nbconvert's CellExecutionError
wrapper is not shown as an unrecognized error, the extension's text/plain has no colour escapes,
the quick start uses python3, and the jupyter extra installs what its examples need."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                JUPYTER_PLATFORM_DIRS="1", OMP_NUM_THREADS="1")


def _notebook(path: Path, *cells: str) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, str(path))
    return path


def _nbconvert(nb: Path, *extra: str):
    return subprocess.Popen([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                             "--stdout", *extra, nb.name], cwd=nb.parent, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _tracefix(*args, stdin: bytes):
    return subprocess.run([sys.executable, "-m", "tracefix", *map(str, args)], input=stdin, env=_env(),
                          capture_output=True, timeout=120)


CRASH = ("import torch\nx = torch.ones(3, requires_grad=True)\nloss = x * 2", "loss.backward()")


@pytest.mark.torch
def test_nbconvert_wrapper_is_dropped_and_the_extension_text_has_no_escapes(tmp_path):
    # one kernel at a time: kernels started together can collide on their zmq ports under load, and
    # the ZMQError they log would land in the log under test
    _, known_log = _nbconvert(_notebook(tmp_path / "known.ipynb", *CRASH)).communicate(timeout=600)
    _, unknown_log = _nbconvert(_notebook(tmp_path / "unknown.ipynb", "d = {}", "d['missing']")).communicate(timeout=600)
    ext_nb, _ = _nbconvert(_notebook(tmp_path / "ext.ipynb", "%load_ext tracefix", *CRASH),
                           "--allow-errors").communicate(timeout=600)
    assert b"CellExecutionError" in known_log and b"CellExecutionError" in unknown_log

    res = _tracefix("--format", "plain", "--root", tmp_path, stdin=known_log)
    assert res.returncode == 0, res.stderr
    out = res.stdout.decode()
    assert "nonscalar-backward" in out and "known.ipynb, cell 2" in out
    assert "unrecogni" not in out.lower() and "CellExecutionError" not in out
    report = json.loads(_tracefix("--format", "json", "--root", tmp_path, stdin=known_log).stdout)
    assert report["unrecognized"] == [] and report["diagnoses"][0]["id"] == "nonscalar-backward"
    # an unknown error in the cell is still listed: the kernel's KeyError, not nbconvert's wrapper
    report = json.loads(_tracefix("--format", "json", "--root", tmp_path, stdin=unknown_log).stdout)
    assert [u["type"] for u in report["unrecognized"]] == ["KeyError"]

    shown = [o for o in json.loads(ext_nb)["cells"][2]["outputs"] if o["output_type"] == "display_data"]
    assert shown
    plain = "".join("".join(o["data"]["text/plain"]) for o in shown)
    assert "nonscalar-backward" in plain and "\x1b" not in plain
    assert "color" in "".join("".join(o["data"]["text/html"]) for o in shown)   # the HTML keeps its colours


def test_readme_quick_start_uses_python3_and_matches_ci():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quick = readme[readme.index("## Quick start"):readme.index("## Using it")]
    blocks = re.findall(r"```sh\n(.*?)```", quick, re.S)
    assert len(blocks) == 2
    setup, tests = blocks
    assert setup.startswith("python3 -m venv .venv") and "python3 -m pip install ." in setup
    assert not re.search(r"(^|&& )(python|pip|pytest) ", setup + tests, re.M)
    assert "--index-url https://download.pytorch.org/whl/cpu" in tests          # the CPU build, anywhere
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    pip = re.search(r"python3 -m pip install (.*)", ci).group(1)
    assert 'torch==2.13.0 -e ".[test]"' in pip and 'torch==2.13.0 -e ".[test]"' in tests
    assert re.search(r"python3 -m pytest -n 2\b", ci) and tests.rstrip().endswith("python3 -m pytest -n 2")
    notebooks = readme[readme.index("## Notebooks"):]
    assert 'python3 -m pip install ".[jupyter]"' in notebooks


def test_jupyter_extra_installs_what_its_examples_need():
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["jupyter"]
    names = {re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower() for req in extra}
    assert {"ipython", "nbformat", "nbconvert", "ipykernel"} <= names
