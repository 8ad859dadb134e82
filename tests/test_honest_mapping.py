"""A log proposes fixes only in the files it came from (issue: monorepos, wrong folders, bare messages)."""
import json
import shutil
import time

import pytest

from conftest import SAMPLE_LIST, run_tracefix

NAMES = [s.name for s in SAMPLE_LIST]


def _diagnoses(log: bytes, root, *extra):
    proc = run_tracefix("--format", "json", "--no-patch", "--root", root, *extra, stdin=log)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return json.loads(proc.stdout)["diagnoses"]


@pytest.mark.parametrize("i", range(len(SAMPLE_LIST)), ids=NAMES)
def test_log_against_another_samples_folder_proposes_nothing(i):
    sample, other = SAMPLE_LIST[i], SAMPLE_LIST[(i + 1) % len(SAMPLE_LIST)]
    for d in _diagnoses(sample.log.read_bytes(), other.dir):
        assert d["fix_sites"] == [], d["fix_sites"]
        assert d["crash_site"] is None
        assert any("does not come from the files under" in n for n in d["notes"]), d["notes"]


@pytest.fixture(scope="module")
def monorepo(tmp_path_factory):
    """Every sample side by side under experiments/, as one repository."""
    root = tmp_path_factory.mktemp("mono")
    (root / ".git").mkdir()
    for s in SAMPLE_LIST:
        shutil.copytree(s.dir, root / "experiments" / s.name, ignore=shutil.ignore_patterns("__pycache__", "*.log"))
    return root


@pytest.mark.parametrize("sample", SAMPLE_LIST, ids=NAMES)
def test_monorepo_picks_the_folder_the_log_came_from(sample, monorepo):
    (d,) = _diagnoses(sample.log.read_bytes(), monorepo)
    here = f"experiments/{sample.name}/"
    assert d["crash_site"]["path"].startswith(here), d["crash_site"]
    assert d["fix_sites"], d["notes"]
    assert all(f["path"].startswith(here) for f in d["fix_sites"]), d["fix_sites"]
    assert f'{d["fix_sites"][0]["path"]}:{d["fix_sites"][0]["line"]}' == here + sample.fix_site
    assert not any("changed since" in n for n in d["notes"]), d["notes"]


def test_bare_message_outside_a_project_searches_nothing_and_is_fast(tmp_path):
    for i in range(3000):
        sub = tmp_path / f"d{i % 60}"
        sub.mkdir(exist_ok=True)
        (sub / f"m{i}.py").write_text("import torch\nloss = crit(x, y)\nloss.backward()\nmodel.half()\n")
    for msg in (b"RuntimeError: grad can be implicitly created only for scalar outputs\n",
                b"ValueError: Attempting to unscale FP16 gradients.\n"):
        t0 = time.monotonic()
        proc = run_tracefix("--format", "json", stdin=msg, cwd=tmp_path)
        elapsed = time.monotonic() - t0
        assert proc.returncode == 0, proc.stderr.decode()
        (d,) = json.loads(proc.stdout)["diagnoses"]
        assert d["fix_sites"] == [] and d["patches"] == []
        assert any("pass --root" in n for n in d["notes"]), d["notes"]
        assert elapsed < 5.0, elapsed        # a loose bound (a loaded CI machine); the speed is the next test's


def test_bare_message_outside_a_project_never_walks_the_folder(tmp_path, monkeypatch):
    """What makes it fast (and safe in $HOME): no index of the folder is built at all."""
    import io

    import tracefix.locator.base as base
    from tracefix.knowledge import load_entries
    from tracefix.pipeline import diagnose

    (tmp_path / "train.py").write_text("model.half()\n")

    def no_walk(*_a, **_k):
        raise AssertionError("the folder was indexed")

    monkeypatch.setattr(base, "FileIndex", no_walk)
    msg = io.BytesIO(b"ValueError: Attempting to unscale FP16 gradients.\n")
    (d,) = diagnose(msg, load_entries(), tmp_path, patches=True).diagnoses
    assert d.fix_sites == () and d.patches == ()
    assert any("pass --root" in n for n in d.notes)


def test_bare_message_in_a_project_gives_candidates_that_apply_only_with_pick(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "train.py").write_text("import torch\nmodel = Net().half()\nscaler = torch.amp.GradScaler('cpu')\n")
    msg = b"ValueError: Attempting to unscale FP16 gradients.\n"
    (d,) = json.loads(run_tracefix("--format", "json", stdin=msg, cwd=tmp_path).stdout)["diagnoses"]
    assert d["fix_sites"][0]["path"] == "train.py" and d["fix_sites"][0]["searched"] is True
    before = (tmp_path / "train.py").read_bytes()
    proc = run_tracefix("--apply", stdin=msg, cwd=tmp_path)
    assert proc.returncode == 3 and b"--pick" in proc.stderr
    assert (tmp_path / "train.py").read_bytes() == before
    proc = run_tracefix("--apply", "--pick", "1", stdin=msg, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert (tmp_path / "train.py").read_bytes() != before


def test_frames_only_inside_libraries_say_so(tmp_path):
    log = (b'Traceback (most recent call last):\n'
           b'  File "/usr/lib/python3.11/site-packages/lightning/fit.py", line 10, in fit\n'
           b'    loss.backward()\n'
           b'RuntimeError: grad can be implicitly created only for scalar outputs\n')
    proc = run_tracefix("--format", "plain", stdin=log, cwd=tmp_path)
    assert b"crash site: inside a library" in proc.stdout
    assert b"pass --root" in proc.stdout
