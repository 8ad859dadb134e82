"""[tool.tracefix] in pyproject.toml: found from the root or its parents, paths against its folder,
command-line options win, and an unknown key or a wrong value is one line on stderr with exit 2."""
from __future__ import annotations

import json
import textwrap

import pytest

from conftest import run_tracefix
from tracefix.exits import Fail
from tracefix.options import project_config

LOG = b"""Traceback (most recent call last):
  File "/home/u/proj/src/train.py", line 2, in <module>
    loss.backward()
RuntimeError: grad can be implicitly created only for scalar outputs
"""


def project(tmp_path, config):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.tracefix]\n" + textwrap.dedent(config))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("loss = 1\nloss.backward()\n")
    (tmp_path / "crash.log").write_bytes(LOG)
    return tmp_path


def test_the_format_and_the_root_come_from_the_project(tmp_path):
    root = project(tmp_path, 'format = "json"\nroot = "src"\n')
    proc = run_tracefix("crash.log", cwd=root)
    assert proc.returncode == 0, proc.stderr.decode()
    (d,) = json.loads(proc.stdout)["diagnoses"]
    assert d["id"] == "nonscalar-backward" and d["crash_site"]["path"] == "train.py"


def test_the_command_line_wins(tmp_path):
    root = project(tmp_path, 'format = "json"\n')
    proc = run_tracefix("--format", "plain", "crash.log", cwd=root)
    assert proc.returncode == 0 and proc.stdout.startswith(b"nonscalar-backward:")


def test_a_config_in_a_parent_folder_is_found(tmp_path):
    root = project(tmp_path, 'format = "json"\n')
    proc = run_tracefix("../crash.log", cwd=root / "src")
    assert proc.returncode == 0 and json.loads(proc.stdout)["diagnoses"]


@pytest.mark.parametrize("config, said", [
    ('formatt = "json"\n', "has no setting 'formatt'"),
    ('format = "html"\n', "format = 'html': one of"),
    ('verify-steps = "2"\n', "verify-steps = '2': wrong type"),
    ('knowledge = "entries"\n', "knowledge = 'entries': wrong type"),
])
def test_a_wrong_setting_is_one_line_and_exit_2(tmp_path, config, said):
    root = project(tmp_path, config)
    proc = run_tracefix("crash.log", cwd=root)
    assert proc.returncode == 2
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and said in lines[0] and "pyproject.toml" in lines[0], lines


def test_paths_are_read_against_the_files_folder_and_steps_are_kept(tmp_path):
    root = project(tmp_path, 'knowledge = ["entries"]\nverify-steps = 5\nverify-timeout = 1.5\n')
    cfg = project_config(str(root / "src"))
    assert cfg == {"knowledge": [str(root / "entries")], "verify-steps": 5, "verify-timeout": 1.5}


def test_no_table_no_settings(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert project_config(str(tmp_path)) == {}


def test_a_table_that_is_not_a_table_fails(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool]\ntracefix = "on"\n')
    with pytest.raises(Fail):
        project_config(str(tmp_path))
