"""Notebook files without a kernel: virtual module, layout-preserving write-back, recorded bf16 log, imports."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tracefix.notebook import LayoutError, build, load_json, write_back

HERE = Path(__file__).resolve().parent
NOTEBOOKS = HERE / "notebooks"


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _nb(sources, **layout) -> bytes:
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                     "source": s} for s in sources],
          "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    nl = layout.pop("final", "\n")
    return (json.dumps(nb, **layout) + nl).encode("utf-8")


@pytest.mark.parametrize("layout", [dict(indent=1, ensure_ascii=False), dict(indent=2, sort_keys=True),
                                    dict(indent=4, ensure_ascii=True, final=""), dict(separators=(",", ":"))])
@pytest.mark.parametrize("as_list", [True, False])
def test_write_back_changes_only_the_patched_line(layout, as_list):
    src = ["%time x = 1\n", "h = torch.relu(a)  # café\n", "h += 1"]
    data = _nb([src if as_list else "".join(src), ["!ls\n", "y = 2"]], **dict(layout))
    v = build(load_json(data))
    assert write_back(data, v.text, v.text) == data                      # unchanged: byte-identical
    new = v.text.replace("h += 1", "h = h + 1")
    out = write_back(data, v.text, new)
    cells = json.loads(out)["cells"]
    assert "".join(cells[0]["source"]) == "%time x = 1\nh = torch.relu(a)  # café\nh = h + 1"
    assert isinstance(cells[0]["source"], list) is as_list
    assert cells[1]["source"] == ["!ls\n", "y = 2"]                       # magics kept as written
    assert out.replace(b"h = h + 1", b"h += 1") == data                   # nothing else moved


def test_write_back_refuses_layouts_it_cannot_reproduce_and_magic_edits():
    data = _nb([["x = 1"]], indent=1).replace(b'"cells"', b'"cells" ')   # odd spacing
    v = build(load_json(data))
    with pytest.raises(LayoutError):
        write_back(data, v.text, v.text.replace("x = 1", "x = 2"))
    data = _nb([["%matplotlib inline\n", "x = 1"]], indent=1)
    v = build(load_json(data))
    with pytest.raises(LayoutError):
        write_back(data, v.text, v.text.replace("pass  # tracefix", "print(1)  # tracefix"))


def test_virtual_module_parses_with_magics_and_keeps_cell_lines():
    data = _nb([["%%bash\n", "echo hi"], ["import torch\n", "x = !ls\n", "torch?\n", "y = 1"],
                ["def f(:\n"], ["%%time\n", "z = 3"]], indent=1)
    v = build(load_json(data))
    import ast
    ast.parse(v.text)
    assert [c.raw[-1] for c in v.cells] == ["echo hi", "y = 1", "def f(:", "z = 3"]
    cell, line = v.at(v.cells[1].start + 3)
    assert (cell.index, line, cell.lines[line - 1]) == (1, 4, "y = 1")


def test_bf16_recorded_log_names_the_scaler_cell_and_applies(tmp_path):
    """bf16 cannot crash on CPU: the log is a recording (same frames as samples/bf16-amp-gradscaler)."""
    shutil.copy(NOTEBOOKS / "bf16_scaler.ipynb", tmp_path / "bf16_scaler.ipynb")
    before = (tmp_path / "bf16_scaler.ipynb").read_bytes()
    log = str(NOTEBOOKS / "bf16_scaler.log")
    res = subprocess.run([sys.executable, "-m", "tracefix", "--format", "json", "--no-patch", "--root",
                          str(tmp_path), log], capture_output=True, env=_env(), timeout=120)
    d = json.loads(res.stdout)["diagnoses"][0]
    assert d["id"] == "bf16-unscale"
    site = d["fix_sites"][0]
    assert (site["path"], site["cell"], site["cell_line"]) == ("bf16_scaler.ipynb", 2, 4)
    assert (d["crash_site"]["cell"], d["crash_site"]["cell_line"]) == (3, 7)
    # quickfix points an editor at the raw .ipynb text: the JSON line, and the column inside its string
    qf = subprocess.run([sys.executable, "-m", "tracefix", "--format", "quickfix", "--no-patch", "--root",
                         str(tmp_path), log], capture_output=True, env=_env(), timeout=120, text=True, cwd=tmp_path)
    path, line, col = qf.stdout.splitlines()[0].split(":")[:3]
    raw = (tmp_path / path).read_text(encoding="utf-8").split("\n")[int(line) - 1]
    assert raw[int(col) - 1:].startswith("torch.amp.GradScaler("), raw
    res = subprocess.run([sys.executable, "-m", "tracefix", "--apply", "--root", str(tmp_path), log],
                         capture_output=True, env=_env(), timeout=120)
    assert res.returncode == 0, res.stderr
    cells = json.loads((tmp_path / "bf16_scaler.ipynb").read_text())["cells"]
    assert cells[1]["source"][-1] == "scaler = torch.amp.GradScaler(device, enabled=False)"
    compile("".join(cells[1]["source"]), "cell", "exec")
    res = subprocess.run([sys.executable, "-m", "tracefix", "undo", "--root", str(tmp_path)],
                         capture_output=True, env=_env(), timeout=60)
    assert (tmp_path / "bf16_scaler.ipynb").read_bytes() == before


def test_cli_imports_no_jupyter_package():
    # main(), not the console entry: that one leaves the process before this probe could look
    code = ("import sys; sys.argv = ['tracefix', '--format', 'json', '--root', %r, %r]\n"
            "from tracefix.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "bad = [m for m in ('IPython', 'nbformat', 'nbclient', 'ipykernel', 'jupyter_client', 'torch') "
            "if m in sys.modules]\nprint('IMPORTED', bad, file=sys.stderr)"
            % (str(NOTEBOOKS), str(NOTEBOOKS / "bf16_scaler.log")))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, env=_env(), timeout=120, text=True)
    assert "IMPORTED []" in res.stderr, res.stderr
    assert '"bf16-unscale"' in res.stdout


@pytest.mark.parametrize("layout", ["colab", "kernelpath", "papermill"])
def test_other_notebook_traceback_layouts_map_to_the_cell(layout, tmp_path):
    """Colab's ``<ipython-input-N-…> in <cell line: 1>()``, an ipykernel temp-file path, papermill.

    Hand-written from those tools' layouts (the frames of tests/notebooks/inplace_residual.ipynb).
    """
    shutil.copy(NOTEBOOKS / "inplace_residual.ipynb", tmp_path / "inplace_residual.ipynb")
    log = NOTEBOOKS / "logs" / f"inplace_residual.{layout}.log"
    res = subprocess.run([sys.executable, "-m", "tracefix", "--format", "json", "--no-patch", "--root",
                          str(tmp_path), str(log)], capture_output=True, env=_env(), timeout=120)
    d = json.loads(res.stdout)["diagnoses"][0]
    site = d["fix_sites"][0]
    assert (site["path"], site["cell"], site["cell_line"]) == ("inplace_residual.ipynb", 3, 8)
    assert (d["crash_site"]["cell"], d["crash_site"]["cell_line"]) == (5, 6)


@pytest.mark.parametrize("layout", [dict(indent=1, ensure_ascii=False), dict(indent=2, ensure_ascii=True)])
@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_quickfix_position_of_a_cell_saved_as_one_string(tmp_path, layout, eol):
    from tracefix.notebook import json_position

    src = eol.join(["# modèle — déjà vu", "class Block:", "    def f(self, out):", "        out.mul_(0.5)  # é"])
    path = tmp_path / "nb.ipynb"
    path.write_bytes(_nb([["x = 1\n", "y = 2"], src], **layout))
    line, col = json_position(path, 1, 4, 8)
    raw = path.read_text(encoding="utf-8").split("\n")[line - 1]
    assert raw.lstrip().startswith('"source": "# mod')                  # the cell's "source" line, not line 1
    assert raw[col:].startswith("out.mul_(0.5)")                        # ... at the code's column
    other = path.read_text(encoding="utf-8").split("\n")[json_position(path, 0, 2, 0)[0] - 1]
    assert json.loads(other.strip().rstrip(",")) == "y = 2"             # a cell saved as a list, as before


def test_quickfix_on_a_notebook_whose_cells_are_strings_lands_on_the_source_line(tmp_path):
    data = json.loads((NOTEBOOKS / "inplace_residual.ipynb").read_text(encoding="utf-8"))
    for cell in data["cells"]:
        cell["source"] = "".join(cell["source"])
    (tmp_path / "inplace_residual.ipynb").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    log = NOTEBOOKS / "logs" / "inplace_residual.kernelpath.log"
    qf = subprocess.run([sys.executable, "-m", "tracefix", "--format", "quickfix", "--no-patch", "--root",
                         str(tmp_path), str(log)], capture_output=True, env=_env(), timeout=120, text=True, cwd=tmp_path)
    lines = qf.stdout.splitlines()
    assert len(lines) == 2, qf.stdout + qf.stderr
    for out, code in zip(lines, ("out += x", "loss.backward()")):
        path, line, col = out.split(":")[:3]
        raw = (tmp_path / path).read_text(encoding="utf-8").split("\n")[int(line) - 1]
        assert raw.lstrip().startswith('"source": "') and raw[int(col) - 1:].startswith(code), (out, raw)


# A saved notebook's error output, as IPython 8 stores it: one string per traceback part, coloured.
_RED, _GREEN, _RESET = "\x1b[0;31m", "\x1b[0;32m", "\x1b[0m"
_MSG = ("one of the variables needed for gradient computation has been modified by an inplace operation: "
        "[torch.FloatTensor [16, 8]], which is output 0 of Relu, is at version 1; expected version 0 instead.")
SAVED_ERROR = {
    "output_type": "error", "ename": "RuntimeError", "evalue": _MSG,
    "traceback": [
        f"{_RED}---------------------------------------------------------------------------{_RESET}",
        f"{_RED}RuntimeError{_RESET}                              Traceback (most recent call last)",
        f"Cell {_GREEN}In[4], line 6{_RESET}\n\x1b[1;32m      5\x1b[0m opt\x1b[38;5;241m.\x1b[39mzero_grad()\n"
        f"{_GREEN}----> 6{_RESET} \x1b[43mloss\x1b[49m\x1b[38;5;241;43m.\x1b[39;49m\x1b[43mbackward\x1b[49m()\n"
        "\x1b[1;32m      7\x1b[0m opt\x1b[38;5;241m.\x1b[39mstep()\n",
        f"File {_GREEN}/opt/conda/lib/python3.11/site-packages/torch/_tensor.py:623{_RESET}, in "
        f"\x1b[0;36mTensor.backward\x1b[0;34m(self, gradient){_RESET}\n{_GREEN}--> 623{_RESET} torch.autograd.backward(\n",
        f"{_RED}RuntimeError{_RESET}: {_MSG}",
    ],
}


def _saved_notebook(folder: Path) -> Path:
    data = json.loads((NOTEBOOKS / "inplace_residual.ipynb").read_text(encoding="utf-8"))
    code = [c for c in data["cells"] if c["cell_type"] == "code"]
    for n, cell in enumerate(code, 1):
        cell["execution_count"] = n
    code[-1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["loss 1.2\n"]}, SAVED_ERROR]
    path = folder / "saved.ipynb"
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("root", [False, True], ids=["cwd", "root"])
def test_a_saved_notebook_given_as_the_log_is_read_as_its_error_outputs(tmp_path, root):
    _saved_notebook(tmp_path)
    args = ["--root", "."] if root else []
    res = subprocess.run([sys.executable, "-m", "tracefix", "--format", "json", "--no-patch", *args, "saved.ipynb"],
                         capture_output=True, env=_env(), timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    (d,) = report["diagnoses"]                                     # once, not again from "evalue"
    assert d["exception"]["message"].startswith("one of the variables") and "\\u001b" not in res.stdout.decode()
    assert (d["crash_site"]["cell"], d["crash_site"]["cell_line"]) == (5, 6)    # frames, mapped to cells
    site = d["fix_sites"][0]
    assert (site["path"], site["cell"], site["cell_line"], site["searched"]) == ("saved.ipynb", 3, 8, False)


def test_a_saved_notebook_log_reads_a_shell_cells_traceback_and_says_when_there_is_no_error(tmp_path):
    (tmp_path / "train.py").write_text("import torch\ncrit = torch.nn.MSELoss(reduction='none')\n"
                                       "loss = crit(torch.ones(3, requires_grad=True), torch.zeros(3))\n"
                                       "loss.backward()\n", encoding="utf-8")
    tb = ["Traceback (most recent call last):\n", f'  File "{tmp_path / "train.py"}", line 4, in <module>\n',
          "    loss.backward()\n", "RuntimeError: grad can be implicitly created only for scalar outputs\n"]
    nb = {"cells": [{"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "!python train.py",
                     "outputs": [{"output_type": "stream", "name": "stderr", "text": tb}]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "shell.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "tracefix", "--format", "json", "--no-patch", "--root", ".",
                          "shell.ipynb"], capture_output=True, env=_env(), timeout=120, cwd=tmp_path)
    (d,) = json.loads(res.stdout)["diagnoses"]
    assert d["id"] == "nonscalar-backward" and d["fix_sites"][0]["path"] == "train.py"
    nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "done\n"}]
    (tmp_path / "clean.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "tracefix", "--format", "plain", "clean.ipynb"], capture_output=True,
                         env=_env(), timeout=120, cwd=tmp_path, text=True)
    assert res.returncode == 1 and "clean.ipynb: the notebook holds no error output" in res.stderr


def test_a_witness_line_from_a_kernel_names_the_cell_not_the_kernels_file(tmp_path):
    shutil.copy(NOTEBOOKS / "inplace_residual.ipynb", tmp_path / "inplace_residual.ipynb")
    log = (NOTEBOOKS / "logs" / "inplace_residual.kernelpath.log").read_text(encoding="utf-8")
    msg = log.rstrip("\n").rsplit("\n", 1)[1].split(": ", 1)[1]
    summary = "'out' [16, 8] (output of relu) was changed in place by add_ at 3051976450.py:8 in 0 (Block)"
    data = {"v": 1, "kind": "inplace-write", "exc": "RuntimeError", "msg": msg[:200], "summary": summary,
            "sites": [{"role": "write", "path": "/tmp/ipykernel_4711/3051976450.py", "line": 8,
                       "code": "out += x  # skip connection", "detail": "add_: version 0 -> 1", "module": "0"},
                      {"role": "backward", "path": "/tmp/ipykernel_4711/2861953432.py", "line": 6,
                       "code": "loss.backward()", "detail": "", "module": ""}]}
    (tmp_path / "run.log").write_text(f"{log.rstrip()}\ntracefix-witness: {summary}\n"
                                      f"tracefix-witness-data: {json.dumps(data)}\n", encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "tracefix", "--format", "plain", "--no-patch", "--root", ".",
                          "run.log"], capture_output=True, env=_env(), timeout=120, cwd=tmp_path, text=True)
    assert ("The witness saw: 'out' [16, 8] (output of relu) was changed in place by add_ at "
            "inplace_residual.ipynb, cell 3, line 8 in 0 (Block)") in res.stdout, res.stdout + res.stderr
    assert "fix site:   inplace_residual.ipynb, cell 3, line 8" in res.stdout
