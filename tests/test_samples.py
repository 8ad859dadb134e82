"""End to end on the shipped samples: real scripts, real tracebacks, real PyTorch 2.13.0.

For every sample: the script still crashes the way its log says; tracefix names the right entry,
crash site and fix site; --apply writes a patch after which the script trains; undo restores it.
"""
import json
import re
import sys

import pytest

from conftest import (SAMPLE_LIST, SAMPLES, copy_sample, crash_log, python_files, registered_entries,
                      run_script, run_tracefix)
from tracefix.families import of_entry
from tracefix.paths import is_library_path

IDS = [s.name for s in SAMPLE_LIST]
LIVE = [s for s in SAMPLE_LIST if not s.recorded]


def test_there_are_samples_for_every_entry():
    assert {s.id for s in SAMPLE_LIST} == set(registered_entries())
    # no sample names an entry that no registered family serves
    assert {p.parent.name for p in SAMPLES.glob("*/expected.toml")} == {s.name for s in SAMPLE_LIST}


def _user_frames(text):
    """(basename, line, code) of frames outside libraries (torch, tracefix's witness), and the final
    exception line."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in .*\n\s+(.*)', text)
    user = [(p.replace("\\", "/").rsplit("/", 1)[-1], int(n), c.strip()) for p, n, c in frames
            if not is_library_path(p) and "/torch/" not in p]
    last = [ln for ln in text.splitlines() if re.match(r"^\w+(Error|Exception)", ln)]
    return user, last[-1] if last else None


@pytest.mark.torch
@pytest.mark.parametrize("sample", LIVE, ids=[s.name for s in LIVE])
def test_log_is_still_what_torch_prints(sample, sample_runs):
    _copy, proc = sample_runs[sample.name]
    assert json.loads(proc.stdout)["command_exit_code"] != 0, "the sample must crash"
    assert _user_frames(crash_log(proc.stderr)) == _user_frames(sample.log.read_text())


def _json_diagnosis(sample, root, *extra):
    proc = run_tracefix("--format", "json", "--root", root, *extra, stdin=sample.log.read_bytes())
    assert proc.returncode == 0, proc.stderr.decode()
    report = json.loads(proc.stdout)
    assert len(report["diagnoses"]) == 1, report
    return report["diagnoses"][0]


@pytest.mark.parametrize("sample", SAMPLE_LIST, ids=IDS)
def test_diagnosis_names_entry_crash_site_and_fix_site(sample):
    d = _json_diagnosis(sample, sample.dir, "--no-patch")
    assert d["id"] == sample.id
    assert d["crash_site"] is not None
    assert f'{d["crash_site"]["path"]}:{d["crash_site"]["line"]}' == sample.crash_site
    assert d["fix_sites"], d
    top = d["fix_sites"][0]
    assert f'{top["path"]}:{top["line"]}' == sample.fix_site, d["fix_sites"]


@pytest.mark.torch
@pytest.mark.parametrize("sample", SAMPLE_LIST, ids=IDS)
def test_apply_makes_it_train_and_undo_restores(sample, tmp_path, safe_runs):
    root = copy_sample(sample, tmp_path)
    before = {p: p.read_bytes() for p in root.rglob("*.py")}
    proc = run_tracefix("--format", "plain", "--apply", "--root", root, stdin=sample.log.read_bytes())
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    changed = [p for p in before if p.read_bytes() != before[p]]
    assert changed, "the patch must change a file"
    # the same bytes as a safe patch's copy that already ran (tests/conftest.py safe_runs): that run counts
    same = [trained for *_, trained, files in safe_runs[sample.name] if files == python_files(root)]
    run = same[0] if same and same[0] is not None else run_script(root)
    assert run.returncode == 0, run.stderr[-3000:]
    assert re.search(r"loss\D{0,20}\d", run.stdout), run.stdout
    patched = {p: p.read_bytes() for p in before}
    run_tracefix("--format", "json", "--apply", "--root", root, stdin=sample.log.read_bytes())
    assert {p: p.read_bytes() for p in before} == patched, "applying twice must change nothing"
    undo = run_tracefix("undo", "--root", root)
    assert undo.returncode == 0, undo.stderr.decode()
    assert {p: p.read_bytes() for p in before} == before


def _run_json(root, *args):
    proc = run_tracefix("run", "--format", "json", "--root", root, *args, "--", sys.executable, "train.py",
                        cwd=root, timeout=300)
    return proc, json.loads(proc.stdout)


@pytest.mark.torch
@pytest.mark.parametrize("sample", LIVE, ids=[s.name for s in LIVE])
def test_run_apply_verify_reports_verified(sample, sample_runs):
    """`tracefix run` (witness on) names the culprit first, patches it, and the re-run trains."""
    _root, proc = sample_runs[sample.name]
    report = json.loads(proc.stdout)
    assert report["command_exit_code"] != 0, "the command must crash first"
    assert report["exit_code"] == 0
    assert [d["id"] for d in report["diagnoses"]] == [sample.id]
    (d,) = report["diagnoses"]
    if of_entry(sample.id).evidence:      # a family with a witness recorder: it must explain the crash
        assert d["evidence"] is not None, "the witness must explain the crash"
    top = d["fix_sites"][0]
    assert f'{top["path"]}:{top["line"]}' == sample.fix_site, d["fix_sites"]
    assert report["verification"] == "verified", (report, proc.stderr[-2000:])
    assert proc.returncode == 0


# Under the witness an in-place error is explained without anomaly mode (sample_runs covers that):
# with the witness off, the anomaly re-run's forward trace must name the true culprit on its own.
# A few kinds of in-place error, as each costs two runs: a saved activation changed by a later
# in-place module, an augmented assignment on a residual, an optimizer step between two backwards.
ANOMALY = [s for s in LIVE if s.name in ("inplace-sequential-double-relu", "inplace-residual-augassign",
                                         "inplace-gan-step-between-backward")]


@pytest.mark.torch
@pytest.mark.parametrize("sample", ANOMALY, ids=[s.name for s in ANOMALY])
def test_run_anomaly_puts_the_true_culprit_first(sample, tmp_path):
    root = copy_sample(sample, tmp_path)
    assert "Traceback of forward call" not in sample.log.read_text()   # the shipped log has no forward trace
    proc, report = _run_json(root, "--anomaly", "--no-witness")
    assert "anomaly re-run: the forward trace located" in proc.stderr.decode(), proc.stderr.decode()[-2000:]
    (d,) = report["diagnoses"]
    top = d["fix_sites"][0]
    assert f'{top["path"]}:{top["line"]}' == sample.fix_site, d["fix_sites"]
