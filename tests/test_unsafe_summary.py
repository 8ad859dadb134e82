"""A written patch labelled unsafe says why in the report's summary on stdout, from the log and
under `tracefix run` (issue 22 item 1), not only in a note on stderr."""
import json
import subprocess
import sys

from conftest import SAMPLE_LIST, copy_sample, run_tracefix

SAMPLE = {s.name: s for s in SAMPLE_LIST}["inplace-modulelist-scale-block"]


def _reason(root):
    diag = json.loads(run_tracefix("--format", "json", "--root", root, stdin=SAMPLE.log.read_bytes()).stdout)
    first = diag["diagnoses"][0]["patches"][0]
    assert first["applicability"] == "unsafe" and first["reason"], first
    return first["reason"]


def test_apply_from_the_log_names_the_unsafe_reason_on_stdout(tmp_path):
    root = copy_sample(SAMPLE, tmp_path)
    reason = _reason(root)
    done = run_tracefix("--apply", "--format", "plain", "--root", root, stdin=SAMPLE.log.read_bytes())
    assert done.returncode == 0, done.stderr
    summary = [ln for ln in done.stdout.decode().splitlines() if ln.startswith("unsafe: ")]
    assert len(summary) == 1 and reason in summary[0] and ".py: " in summary[0], done.stdout.decode()[-600:]


def test_run_apply_names_the_unsafe_reason_on_stdout(tmp_path):
    root = copy_sample(SAMPLE, tmp_path)
    reason = _reason(root)
    replay = [sys.executable, "-c", "import sys; sys.stderr.write(open('crash.log').read()); sys.exit(1)"]
    done = subprocess.run([sys.executable, "-m", "tracefix", "run", "--apply", "--format", "plain", "--no-witness",
                           "--root", str(root), "--", *replay], cwd=root, capture_output=True, text=True, timeout=120)
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("exit code:"), lines[-3:]
    assert any(ln.startswith("unsafe: ") and reason in ln for ln in lines), done.stdout[-600:]
    as_json = subprocess.run([sys.executable, "-m", "tracefix", "run", "--format", "json", "--no-witness",
                              "--root", str(root), "--", *replay], cwd=root, capture_output=True, text=True,
                             timeout=120)
    assert "unsafe" not in json.loads(as_json.stdout)       # nothing written: no unsafe summary
