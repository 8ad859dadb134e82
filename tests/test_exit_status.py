"""Exit statuses that must hold whatever happens to our output, and the ones of `tracefix run`:
a reader that goes away (`tracefix ... | head`) changes nothing but the output it no longer reads."""
import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import REPO, SAMPLE_LIST, copy_sample
from tracefix.families import families

SAMPLE = next(s for s in SAMPLE_LIST if s.name == "nonscalar-weighted-mse")
TIMEOUT = 120


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEFIX_", "FORCE_COLOR", "NO_COLOR"))}
    return {**env, "PYTHONPATH": str(REPO), **extra}


def no_reader(*args, cwd=None, read: int = 0, close_stderr: bool = False):
    """Run tracefix with a stdout whose reader is gone (after ``read`` bytes): (status, stderr).
    ``close_stderr``: stderr's reader is gone from the start as well."""
    cmd = [sys.executable, "-m", "tracefix", *map(str, args)]
    if read:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=_env())
        proc.stdout.read(read)
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
        return proc.wait(timeout=TIMEOUT), err
    r, w = os.pipe()
    os.close(r)                     # the reader is gone before tracefix writes a byte
    try:
        proc = subprocess.run(cmd, stdout=w, stderr=w if close_stderr else subprocess.PIPE, cwd=cwd, env=_env(),
                              timeout=TIMEOUT)
    finally:
        os.close(w)
    return proc.returncode, proc.stderr or b""


def quiet(err: bytes) -> bool:
    return b"Traceback" not in err and b"Exception ignored" not in err and b"BrokenPipe" not in err


@pytest.fixture
def project(tmp_path):
    return copy_sample(SAMPLE, tmp_path)


# --- 1. the reader going away keeps the status ----------------------------------------------------
@pytest.mark.parametrize("close_stderr", [False, True], ids=["stdout", "stdout+stderr"])
def test_a_patch_that_cannot_be_written_stays_3_without_a_reader(project, close_stderr):
    code, err = no_reader("--format", "plain", "--root", project, "--apply", "--pick", "9", project / "crash.log",
                          close_stderr=close_stderr)
    assert code == 3
    assert quiet(err)
    if not close_stderr:
        assert b"tracefix: " in err          # what stderr says still reaches it


def test_no_known_error_stays_1_without_a_reader(tmp_path):
    (tmp_path / "nothing.log").write_bytes(b"Traceback (most recent call last):\nKeyError: 'x'\n" * 2000)
    for read in (0, 10):
        code, err = no_reader("--format", "plain", tmp_path / "nothing.log", read=read)
        assert code == 1 and quiet(err)


def test_a_diagnosis_stays_0_without_a_reader_on_every_format(project):
    for fmt in ("plain", "json", "rich", "quickfix"):
        code, err = no_reader("--format", fmt, "--root", project, project / "crash.log")
        assert code == 0 and quiet(err), (fmt, err)


def test_the_subcommands_keep_their_status_without_a_reader(tmp_path):
    code, err = no_reader("undo", cwd=tmp_path)          # "nothing to undo" on stdout, status 1
    assert code == 1 and quiet(err)
    code, err = no_reader("list")
    assert code == 0 and quiet(err)


SLOW = """\
import sys
for i in range(200000):
    print("progress line", i)
sys.exit(5)
"""


def test_run_keeps_the_commands_status_when_the_reader_leaves_early(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW)
    code, err = no_reader("run", "--format", "plain", "--", sys.executable, "slow.py", cwd=tmp_path, read=20)
    assert code == 5
    assert quiet(err)


# --- 3. `tracefix run --apply`: what is not 0/3, and the summary after every run that did not succeed --
def run(*args, cwd, **kw):
    return subprocess.run([sys.executable, "-m", "tracefix", "run", *map(str, args)], capture_output=True, cwd=cwd,
                          env=_env(), timeout=TIMEOUT, **kw)


def summary(out: bytes) -> list:
    return [ln for ln in out.decode().splitlines() if ln.startswith(("applied:", "verification:", "exit code:",
                                                                     "command exit code:"))]


@pytest.mark.parametrize("fmt", ["plain", "rich"])
def test_run_apply_on_a_command_that_cannot_start_keeps_127_and_says_so(tmp_path, fmt):
    proc = run("--apply", "--format", fmt, "--", "tracefix-no-such-command-xyz", cwd=tmp_path)
    assert proc.returncode == 127
    assert proc.stderr.decode() == "tracefix: error: tracefix-no-such-command-xyz: command not found\n"
    assert summary(proc.stdout) == ["applied: nothing", "exit code: 127"]


@pytest.mark.skipif(os.name != "posix", reason="signals")
@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_run_apply_on_a_command_stopped_by_a_signal_keeps_128_plus_n_with_the_summary(tmp_path, sig, code):
    kill = f"import os, signal; print('started', flush=True); os.kill(os.getpid(), signal.{sig})"
    proc = run("--apply", "--format", "plain", "--", sys.executable, "-c", kill, cwd=tmp_path)
    assert proc.returncode == code
    assert proc.stdout.decode().startswith("started\n")
    assert summary(proc.stdout) == ["applied: nothing", f"exit code: {code}"]
    assert f"stopped by {sig} (exit code {code})" in proc.stderr.decode()
    as_json = run("--apply", "--format", "json", "--", sys.executable, "-c", kill, cwd=tmp_path)
    report = json.loads(as_json.stdout)
    assert as_json.returncode == code == report["exit_code"] == report["command_exit_code"]
    assert report["applied"] == "nothing" and report["verification"] == "not run"


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_run_apply_verify_stopped_by_the_user_prints_the_summary_and_keeps_143(tmp_path):
    (tmp_path / "sleeper.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-m", "tracefix", "run", "--apply", "--verify", "--format", "plain", "--",
                             sys.executable, "sleeper.py"], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"started\n"
        proc.send_signal(signal.SIGTERM)
        out, _err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143
    assert summary(out) == ["applied: nothing", "verification: not run", "exit code: 143"]


def test_run_apply_on_a_keyboard_interrupt_keeps_the_commands_status_and_prints_json(tmp_path):
    # a launcher that reports the user's Ctrl-C as a traceback and exit 1
    script = ("import sys; sys.stderr.write('Traceback (most recent call last):\\n  File \"x.py\", line 1, in <module>\\n"
              "KeyboardInterrupt\\n'); sys.exit(1)")
    proc = run("--apply", "--format", "json", "--", sys.executable, "-c", script, cwd=tmp_path)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["exit_code"] == 1 and report["applied"] == "nothing"
    plain = run("--apply", "--format", "plain", "--", sys.executable, "-c", script, cwd=tmp_path)
    assert plain.returncode == 1 and summary(plain.stdout) == ["applied: nothing", "exit code: 1"]


SLOW_VERIFY = """\
import os
import time

import torch

crit = torch.nn.MSELoss(reduction="none")
x = torch.randn(4, 2, requires_grad=True)
loss = crit(x, torch.zeros(4, 2))
if "TRACEFIX_VERIFY_STEPS" in os.environ:
    print("verifying", flush=True)
    time.sleep(60)
loss.backward()
"""


@pytest.mark.torch
@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_a_verification_stopped_by_the_user_keeps_143_and_the_patch(tmp_path):
    (tmp_path / "train.py").write_text(SLOW_VERIFY)
    proc = subprocess.Popen([sys.executable, "-m", "tracefix", "run", "--apply", "--verify", "--format", "plain", "--",
                             sys.executable, "train.py"], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        while proc.stdout.readline() not in (b"verifying\n", b""):
            pass
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err.decode()[-2000:]
    assert summary(out) == ["applied: train.py", "verification: not run", "command exit code: 1", "exit code: 143"]
    assert b"the patch stays written, unverified (tracefix undo takes it back)" in err
    assert "reduction=\"mean\"" in (tmp_path / "train.py").read_text()
    undo = subprocess.run([sys.executable, "-m", "tracefix", "undo"], cwd=tmp_path, env=_env(), timeout=TIMEOUT)
    assert undo.returncode == 0 and (tmp_path / "train.py").read_text() == SLOW_VERIFY


# --- 4. a word that is neither a file nor a command -------------------------------------------------
COMMANDS_HINT = "(not a file; commands are: diagnose, list, explain, undo, run, hook, mcp)"


def tracefix(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tracefix", *map(str, args)], capture_output=True, cwd=cwd,
                          env=_env(), timeout=TIMEOUT)


@pytest.mark.parametrize("word, hint", [
    ("frobnicate", COMMANDS_HINT),
    ("udno", "(not a file; did you mean 'undo'? commands are: diagnose, list, explain, undo, run, hook, mcp)"),
    ("expalin", "(not a file; did you mean 'explain'? commands are: diagnose, list, explain, undo, run, hook, mcp)"),
])
def test_an_unknown_command_is_pointed_out_on_the_one_error_line(tmp_path, word, hint):
    for args in ([word], [word, "--format", "plain"], ["diagnose", word]):
        r = tracefix(*args, cwd=tmp_path)
        err = r.stderr.decode()
        assert r.returncode == 2 and r.stdout == b""
        assert err == f"tracefix: error: {word}: cannot read: No such file or directory {hint}\n", err


# every built-in entry, sorted (the registry's families serve them)
KNOWN = ", ".join(sorted(e for fam in families() for e in fam.entries))


@pytest.mark.parametrize("args, line", [
    # an option click does not know after the mistyped command: the command is what is wrong
    (["udno", "--force"], "tracefix: error: udno: not a file; did you mean 'undo'? commands are: diagnose, list, "
                          "explain, undo, run, hook, mcp\n"),
    (["explain", "inplace"], "tracefix: error: unknown id 'inplace'; did you mean 'inplace-modification' or 'leaf-inplace'? known: "
                             f"{KNOWN}\n"),
    (["explain", "nonscaler"], "tracefix: error: unknown id 'nonscaler'; did you mean 'nonscalar-backward'? known: "
                               f"{KNOWN}\n"),
])
def test_a_mistyped_command_or_id_is_named_with_its_likely_meaning(tmp_path, args, line):
    r = tracefix(*args, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.decode() == line


@pytest.mark.parametrize("name", ["crash.log", "logs/crash", "nosuchdir/undo"])
def test_a_missing_log_that_looks_like_a_path_gets_no_command_hint(tmp_path, name):
    r = tracefix(name, cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1
    assert "not a file" not in err and "did you mean" not in err and "commands are" not in err


def test_the_hint_costs_the_normal_path_no_import(project):
    code = ("import sys; sys.argv = ['tracefix', '--no-patch', '--format', 'plain', '--root', %r, %r]\n"
            "from tracefix.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('DIFFLIB', 'difflib' in sys.modules, file=sys.stderr)" % (str(project), str(project / "crash.log")))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=TIMEOUT)
    assert "DIFFLIB False" in r.stderr, r.stderr


# --- 2. a failed verification's JSON names the patched run's error, the same one too --------------
STILL_FAILING = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
crit = nn.MSELoss(reduction="none")
x, y = torch.randn(8, 4), torch.randn(8, 1)
for step in range(3):
    opt.zero_grad()
    loss = crit(model(x), y)
    loss.backward()
    opt.step()
    extra = crit(model(x), y).mean() * torch.ones(4)
    extra.backward()
"""


@pytest.mark.torch
def test_still_failing_has_new_error_in_json_and_no_different_error_in_plain(tmp_path):
    # the recommended patch (reduction='mean') is written and fixes line 12; the re-run then stops at
    # line 15 with the same error: "still failing"
    (tmp_path / "train.py").write_text(STILL_FAILING)
    run = ["run", "--apply", "--verify", "--root", tmp_path, "--", sys.executable, "train.py"]
    proc = tracefix(*run[:3], "--format", "json", *run[3:], cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr.decode()[-3000:]
    report = json.loads(proc.stdout)
    assert report["verification"] == "still failing" and report["exit_code"] == 3
    assert report["applied"] == "train.py (taken back: the verification failed)"
    assert report["restored"] == "train.py"
    assert report["diagnoses"][0]["crash_site"]["line"] == 12
    again = report["new_error"]["diagnoses"]
    assert [d["id"] for d in again] == ["nonscalar-backward"]
    assert "backward() at train.py:15" in again[0]["evidence"]["summary"]   # the patched run's crash
    # (the verify hook's own frame is not taken for the user's code, from a checkout either)
    assert again[0]["crash_site"]["line"] == 15
    assert report["new_error"]["unrecognized"] == []
    assert (tmp_path / "train.py").read_text() == STILL_FAILING

    plain = tracefix(*run[:3], "--format", "plain", *run[3:], cwd=tmp_path)
    out = plain.stdout.decode()
    assert plain.returncode == 3
    assert "verification: still failing" in out and "different error" not in out
    assert out.rstrip().splitlines()[-1] == "exit code: 3"


def test_run_quickfix_keeps_the_commands_output_off_stdout(tmp_path):
    # stdout holds only `path:line:col: ...` lines for the editor; the command's lines go to stderr
    (tmp_path / "loud.py").write_text("for i in range(200):\n    print('line', i)\nraise SystemExit(4)\n")
    r = tracefix("run", "--format", "quickfix", "--", sys.executable, "loud.py", cwd=tmp_path)
    assert r.returncode == 4
    assert b"line 199" not in r.stdout and b"line 199" in r.stderr
