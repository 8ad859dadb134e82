"""What start-up speed may cost and what it must not: the quick exit of the console entry (no
interpreter teardown) and the cyclic GC paused while patches are made.  The figures themselves are
measured in bench/, not here."""
import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, SAMPLE_LIST, copy_sample

SAMPLE = next(s for s in SAMPLE_LIST if s.name == "nonscalar-weighted-mse")

# An atexit handler stands for the interpreter's teardown: it runs only if the process did not
# leave early.  The code under test runs as the console script does (cli.entry) or as main().
PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("TEARDOWN\\n"))
sys.argv = ["tracefix", *sys.argv[2:]]
from tracefix import cli
getattr(cli, {how!r})()
"""


def probe(how: str, *args, stdin: bytes = None, cwd=None):
    code = PROBE.format(how=how)
    return subprocess.run([sys.executable, "-c", code, "x", *map(str, args)], input=stdin, capture_output=True,
                          cwd=cwd, timeout=120)


@pytest.fixture
def project(tmp_path):
    return copy_sample(SAMPLE, tmp_path)


def test_the_console_entry_leaves_without_teardown_after_a_diagnosis(project):
    entry = probe("entry", "--format", "json", "--root", project, project / "crash.log")
    assert entry.returncode == 0, entry.stderr
    assert b"TEARDOWN" not in entry.stderr
    report = json.loads(entry.stdout)   # the whole output was flushed before leaving
    assert report["diagnoses"][0]["patches"]
    # main() is for callers that go on afterwards: it exits normally
    plain = probe("main", "--format", "json", "--root", project, project / "crash.log")
    assert plain.returncode == 0 and b"TEARDOWN" in plain.stderr
    assert json.loads(plain.stdout) == report


@pytest.mark.parametrize("args, stdin, code", [
    (["--format", "plain"], b"", 1),                                   # empty input
    (["--format", "plain"], b"Traceback (most recent call last):\nValueError: x\n", 1),
    (["--format", "plain", "--pick", "1"], None, 2),                   # --pick without --apply: click's path
    (["--format", "plain", "--root", "{p}", "--apply", "--pick", "9", "{p}/crash.log"], None, 3),
])
def test_the_quick_exit_keeps_every_exit_status_and_message(project, args, stdin, code):
    args = [a.replace("{p}", str(project)) for a in args]
    fast = probe("entry", *args, stdin=stdin if stdin is not None else b"", cwd=project)
    slow = probe("main", *args, stdin=stdin if stdin is not None else b"", cwd=project)
    assert fast.returncode == slow.returncode == code
    assert fast.stdout == slow.stdout
    assert fast.stderr.replace(b"TEARDOWN\n", b"") == slow.stderr.replace(b"TEARDOWN\n", b"")


@pytest.mark.parametrize("how", ["entry", "main"])
@pytest.mark.parametrize("args, code", [
    ([], 0),                                                     # diagnosed
    (["--apply", "--pick", "9"], 3),                             # the patch asked for cannot be written
    (["--no-patch", "{p}/train.py"], 1),                         # no known error in that "log"
])
def test_a_reader_that_goes_away_leaves_the_status_as_it_was(project, how, args, code):
    # `tracefix LOG | head -1`: the rest of the output meets a closed pipe at the final flush
    args = [a.replace("{p}", str(project)) for a in args]
    logs = [] if any(a.endswith(".py") for a in args) else [str(project / "crash.log")]
    cmd = [sys.executable, "-c", PROBE.format(how=how), "x", "--format", "plain", "--root", str(project), *args,
           *logs]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == code
    assert b"Traceback" not in err and b"Exception ignored" not in err


def test_the_collector_is_paused_while_patches_are_made_and_restored_after(project):
    from tracefix.knowledge import load_entries
    from tracefix.pipeline import diagnose, propose_all

    entries = load_entries()
    with open(project / "crash.log", "rb") as fh:
        report = diagnose(fh, entries, project, patches=False)
    runs = []
    track = lambda phase, info: runs.append(info["generation"]) if phase == "start" else None  # noqa: E731
    gc.callbacks.append(track)
    try:
        gc.collect()
        runs.clear()
        # enough garbage for several collections, were the collector on
        for _ in range(3):
            done = propose_all(report, project)
        assert done.diagnoses[0].patches
        assert runs == []
        assert gc.isenabled()
        gc.disable()
        try:
            propose_all(report, project)
            assert not gc.isenabled()      # a caller's own choice is kept
        finally:
            gc.enable()
    finally:
        gc.callbacks.remove(track)


def test_the_console_script_is_the_quick_entry():
    text = (REPO / "pyproject.toml").read_text()
    assert 'tracefix = "tracefix.cli:entry"' in text
    assert "entry()" in (REPO / "tracefix" / "__main__.py").read_text()
