"""Without --root, tracefix run from a folder inside the project finds the project (issue 22, item 5):
the nearest folder above with .git, pyproject.toml, setup.py or setup.cfg, when the log's frames
map there and not (all) under the current directory, as `tracefix undo` finds .tracefix/."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLE_LIST, copy_sample

SAMPLE = next(s for s in SAMPLE_LIST if s.name == "fp16-build-model-dtype")   # crash train.py, fix models.py
MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")


def tracefix(*args, cwd, timeout=300):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "tracefix", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)


def project(tmp_path: Path, marker=None) -> Path:
    """The sample in a folder of its own, with a subfolder ``scripts/`` that holds a file of its own."""
    proj = copy_sample(SAMPLE, tmp_path)
    if marker == ".git":
        (proj / ".git").mkdir()
    elif marker:
        (proj / marker).write_text("")
    (proj / "scripts").mkdir()
    (proj / "scripts" / "plot.py").write_text("print('plots')\n")
    assert not any((d / m).exists() for d in proj.parents for m in MARKERS), "a marker above the test folder"
    return proj


@pytest.mark.parametrize("marker", [".git", "pyproject.toml", "setup.cfg"])
def test_diagnose_from_a_subfolder_finds_the_project(tmp_path, marker):
    proj = project(tmp_path, marker)
    sub = proj / "scripts"
    res = tracefix("--format", "json", "../crash.log", cwd=sub)
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)["diagnoses"][0]                 # stdout is JSON alone: the note is on stderr
    assert d["crash_site"]["path"] == "train.py" and d["crash_site"]["line"] == 30
    assert (d["fix_sites"][0]["path"], d["fix_sites"][0]["line"]) == ("models.py", 21)
    assert d["patches"]
    assert f"tracefix: project root: {proj.resolve()} (found {marker})" in res.stderr

    before = (proj / "models.py").read_bytes()
    res = tracefix("--format", "plain", "--apply", "../crash.log", cwd=sub)
    assert res.returncode == 0, res.stderr
    assert "applied: models.py" in res.stdout
    assert "dtype=torch.float16" not in (proj / "models.py").read_text()
    assert sorted(p.name for p in sub.iterdir()) == ["plot.py"]   # nothing written in the subfolder
    res = tracefix("undo", cwd=sub)                               # and undo, from there, finds the backups
    assert res.returncode == 0, res.stderr + res.stdout
    assert (proj / "models.py").read_bytes() == before


def test_without_a_marker_the_current_folder_stays_the_root(tmp_path):
    proj = project(tmp_path)
    before = {p.name: p.read_bytes() for p in proj.iterdir() if p.is_file()}
    res = tracefix("--format", "json", "../crash.log", cwd=proj / "scripts")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)["diagnoses"][0]
    assert d["crash_site"] is None and not d["fix_sites"] and not d["patches"]
    assert "project root" not in res.stderr
    res = tracefix("--format", "plain", "../crash.log", cwd=proj / "scripts")
    assert "crash site: not in a file under --root" in res.stdout and "project root" not in res.stderr
    assert {p.name: p.read_bytes() for p in proj.iterdir() if p.is_file()} == before


def test_a_folder_that_maps_the_frames_itself_stays_the_root(tmp_path):
    """A monorepo with two copies of one experiment: run in one of them, that one is the project
    (from the repository's root the frames would fit both copies)."""
    mono = tmp_path / "mono"
    mono.mkdir()
    (mono / ".git").mkdir()
    exp1 = copy_sample(SAMPLE, mono).rename(mono / "exp1")
    exp2 = copy_sample(SAMPLE, mono).rename(mono / "exp2")
    res = tracefix("--format", "json", "--apply", "crash.log", cwd=exp1)
    assert res.returncode == 0, res.stderr
    assert "project root" not in res.stderr
    assert "dtype=torch.float16" not in (exp1 / "models.py").read_text()
    assert (exp2 / "models.py").read_bytes() == (SAMPLE.dir / "models.py").read_bytes()


def test_the_root_option_is_kept_as_given(tmp_path):
    proj = project(tmp_path, "pyproject.toml")
    res = tracefix("--format", "json", "--root", ".", "../crash.log", cwd=proj / "scripts")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["diagnoses"][0]["crash_site"] is None
    assert "project root" not in res.stderr


@pytest.mark.torch
def test_run_from_a_subfolder_patches_the_project_and_verifies(tmp_path):
    """Real PyTorch: `cd scripts && tracefix run --apply --verify -- python ../train.py`."""
    proj = project(tmp_path, ".git")
    (proj / "crash.log").unlink()
    res = tracefix("run", "--format", "plain", "--apply", "--verify", "--", sys.executable, "../train.py",
                   cwd=proj / "scripts")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert f"tracefix: project root: {proj.resolve()} (found .git)" in res.stderr
    assert "verification: verified" in res.stdout
    assert "models.py" in res.stdout.split("applied:", 1)[1].splitlines()[0]
    assert "dtype=torch.float16" not in (proj / "models.py").read_text()
    assert sorted(p.name for p in (proj / "scripts").iterdir()) == ["plot.py"]
