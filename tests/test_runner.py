"""``tracefix run`` and the hooks, end to end through the real CLI (``python -m tracefix run``).

The cheap tests run plain Python children; the ``torch`` ones run real PyTorch scripts (about
3-4 s of CPU each): the shipped samples (copied to tmp_path, never changed in place) and a few
small scripts written here.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracefix.hooks import HOOKS_DIR
from tracefix.runner import format_env, hook_env

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
POSIX = os.name == "posix"
posix_only = pytest.mark.skipif(not POSIX, reason="process groups, signals and ptys are POSIX")
TIMEOUT = 300


def _env(**extra) -> dict:
    env = dict(os.environ)
    for k in ("TRACEFIX_ANOMALY", "TRACEFIX_VERIFY_STEPS", "TRACEFIX_WITNESS", "NO_COLOR", "FORCE_COLOR"):
        env.pop(k, None)
    env.update(extra)
    return env


def tracefix_run(args, cwd: Path, **kw) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tracefix", "run", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=TIMEOUT, env=kw.pop("env", _env()), **kw)


def copy_sample(name: str, dest: Path) -> Path:
    target = dest / name
    shutil.copytree(SAMPLES / name, target, ignore=shutil.ignore_patterns("crash.log", "expected.toml"))
    return target


def expected(name: str) -> dict:
    return tomllib.loads((SAMPLES / name / "expected.toml").read_text(encoding="utf-8"))


def site(d: dict) -> str:
    return f"{d['path']}:{d['line']}"


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper is gone for our purpose)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


# --- pass-through and exit codes (no torch) --------------------------------------------------
PASSTHROUGH = r"""
import os, sys
out = b"".join(b"\r %7d%% |\x1b[32m####\x1b[0m| \xff\xfe caf\xc3\xa9\n" % i for i in range(60000))
os.write(1, out)
os.write(2, b"to stderr \x00\x01\n" * 3)
sys.stdout.buffer.write(b"no newline at the end")
"""


def test_output_passes_through_unchanged(tmp_path):
    (tmp_path / "p.py").write_text(PASSTHROUGH)
    direct = subprocess.run([sys.executable, "p.py"], cwd=tmp_path, capture_output=True, timeout=TIMEOUT)
    run = tracefix_run(["--", sys.executable, "p.py"], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert len(direct.stdout) > 2_000_000
    assert run.stdout == direct.stdout
    assert run.stderr == direct.stderr


def test_exit_code_passes_through(tmp_path):
    run = tracefix_run(["--format", "plain", "--", sys.executable, "-c",
                        "import sys; print('about to fail'); sys.exit(7)"], tmp_path)
    assert run.returncode == 7
    assert run.stdout.startswith(b"about to fail\n")
    assert b"exit code: 7" in run.stdout          # the report comes after the child's output


@posix_only
def test_killed_child_gives_128_plus_signal(tmp_path):
    run = tracefix_run(["--format", "plain", "--", sys.executable, "-c",
                        "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], tmp_path)
    assert run.returncode == 128 + signal.SIGKILL


def test_command_not_found(tmp_path):
    run = tracefix_run(["--", "tracefix-no-such-command-xyz"], tmp_path)
    assert run.returncode == 127
    assert b"not found" in run.stderr


FAKE_NONSCALAR = """\
import sys
print("epoch 0 starting")
loss = [0.5, 0.7]
raise RuntimeError("grad can be implicitly created only for scalar outputs")
"""


def test_json_stdout_holds_only_the_report(tmp_path):
    (tmp_path / "train.py").write_text(FAKE_NONSCALAR)
    run = tracefix_run(["--format", "json", "--root", str(tmp_path), "--", sys.executable, "train.py"], tmp_path)
    assert run.returncode == 1, run.stderr[-2000:]
    report = json.loads(run.stdout)                # nothing but the JSON object on stdout
    assert report["exit_code"] == 1
    assert report["verification"] == "not run"
    assert [d["id"] for d in report["diagnoses"]] == ["nonscalar-backward"]
    assert report["diagnoses"][0]["crash_site"]["path"] == "train.py"
    assert b"epoch 0 starting" in run.stderr       # the child's stdout went to stderr
    assert b"RuntimeError: grad can be implicitly created" in run.stderr


PRINT_INSIDE_TRACEBACK = """\
import sys, time
print("epoch 0 starting", flush=True)
sys.stderr.write('Traceback (most recent call last):\\n  File "train.py", line 1, in <module>\\n')
sys.stderr.flush()
time.sleep(0.3)                 # tracefix reads the traceback's first lines on their own
print("step 3 loss 0.25", flush=True)    # ... then this line, written before the rest
sys.stderr.write('    import sys, time\\n'
                 'AssertionError: boom after a step\\n')
sys.exit(1)
"""


def test_a_line_on_stdout_does_not_cut_the_traceback_on_stderr(tmp_path):
    """Two pipes are read in the order they are ready, not written: the stdout line must not
    land inside the stderr traceback that tracefix diagnoses."""
    (tmp_path / "train.py").write_text(PRINT_INSIDE_TRACEBACK)
    # (plain: the child's stdout and stderr are two pipes; json sends both to one, in their order)
    run = tracefix_run(["--format", "plain", "--root", str(tmp_path), "--", sys.executable, "train.py"], tmp_path)
    out = run.stdout.decode()
    # an error no entry knows: only a whole traceback says which exception ended the program
    assert "unrecognized: AssertionError: boom after a step" in out, out + run.stderr.decode()[-2000:]
    assert out.startswith("epoch 0 starting\nstep 3 loss 0.25\n")       # passed through
    assert out.rstrip().endswith("exit code: 1")


def test_tail_keeps_each_channel_whole():
    from tracefix.runner import Tail

    tail = Tail(limit=128)
    tail.feed(b"Traceback (most recent call last):\n", 2)
    tail.feed(b"step 3", 1)
    err = b'  File "t.py", line 1\nValueError: x\n'
    tail.feed(err, 2)
    whole = b"Traceback (most recent call last):\n" + err
    assert tail.getvalue() == b"step 3\n" + whole     # stdout's first, a line end added; stderr's whole
    tail.feed(b"y" * 300, 1)                           # each channel keeps its own last `limit` bytes
    assert tail.getvalue() == (b"step 3" + b"y" * 300)[-128:] + b"\n" + whole


def test_json_on_success_is_an_empty_report(tmp_path):
    run = tracefix_run(["--format", "json", "--", sys.executable, "-c", "print('fine')"], tmp_path)
    assert run.returncode == 0
    report = json.loads(run.stdout)
    assert report["diagnoses"] == [] and report["exit_code"] == 0
    assert run.stderr == b"fine\n"


@posix_only
def test_child_sees_a_terminal_and_bytes_stay_unchanged(tmp_path):
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "tracefix", "run", "--format", "plain", "--", sys.executable, "-c",
                             "import sys; print('isatty=%s' % sys.stdout.isatty()); print('a\\nb', end='')"],
                            cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=_env())
    os.close(slave)
    out = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:          # EIO: every writer is gone
            break
        if not data:
            break
        out += data
    os.close(master)
    assert proc.wait(timeout=TIMEOUT) == 0
    assert b"isatty=True" in out
    # our terminal turns "\n" into "\r\n" once; the child's pty must not do it a second time
    assert b"a\r\nb" in out and b"\r\r\n" not in out


# --- signals ----------------------------------------------------------------------------------
SLEEPER = """\
import os, subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open("pids.tmp", "w") as fh:
    fh.write(f"{os.getpid()} {grandchild.pid}")
os.replace("pids.tmp", "pids")
time.sleep(600)
"""


@posix_only
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signals_reach_the_child_group_and_leave_no_orphan(tmp_path, sig):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    proc = subprocess.Popen([sys.executable, "-m", "tracefix", "run", "--format", "plain", "--",
                             sys.executable, "sleeper.py"], cwd=tmp_path, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids_file = tmp_path / "pids"
    try:
        deadline = time.monotonic() + 60
        while not pids_file.exists():
            assert proc.poll() is None, "tracefix ended early"
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.05)
        child, grandchild = map(int, pids_file.read_text().split())
        assert alive(child) and alive(grandchild)
        proc.send_signal(sig)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 128 + sig
    deadline = time.monotonic() + 10
    while (alive(child) or alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the child outlived tracefix"
    assert not alive(grandchild), "the child's own child was orphaned"


# --- hook environment ------------------------------------------------------------------------
def test_hook_print_env_formats():
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "tracefix", "hook", "--print-env", *args],
                              capture_output=True, text=True, timeout=TIMEOUT, env=_env(PYTHONPATH="/opt/x"))

    sh = cli("--anomaly", "--verify-steps", "3")
    assert sh.returncode == 0
    assert sh.stdout.splitlines() == [f"export PYTHONPATH={HOOKS_DIR}{os.pathsep}/opt/x",
                                      "export TRACEFIX_ANOMALY=1", "export TRACEFIX_VERIFY_STEPS=3",
                                      "export TRACEFIX_WITNESS=1"]
    assert cli().stdout.splitlines() == [f"export PYTHONPATH={HOOKS_DIR}{os.pathsep}/opt/x",
                                         "export TRACEFIX_WITNESS=1"]          # the witness is on by default
    ps = cli("--anomaly", "--no-witness", "--shell", "powershell").stdout.splitlines()
    assert ps == [f'$env:PYTHONPATH = "{HOOKS_DIR}{os.pathsep}/opt/x"', '$env:TRACEFIX_ANOMALY = "1"']
    cmd = cli("--verify-steps", "2", "--shell", "cmd").stdout.splitlines()
    assert cmd[1] == "set TRACEFIX_VERIFY_STEPS=2" and cmd[0].startswith("set ") and str(HOOKS_DIR) in cmd[0]


def test_format_env_quotes_values():
    env = {"A": "x y$z", "B": 'q"uo`te'}
    assert format_env(env, "sh").splitlines() == ["export A='x y$z'", "export B='q\"uo`te'"]
    assert format_env(env, "powershell").splitlines() == ['$env:A = "x y`$z"', '$env:B = "q`"uo``te"']
    assert format_env(env, "cmd").splitlines()[0] == 'set "A=x y$z"'


def test_hook_env_keeps_pythonpath():
    assert hook_env(base={})["PYTHONPATH"] == str(HOOKS_DIR)
    env = hook_env(True, 4, base={"PYTHONPATH": "a" + os.pathsep + "b"})
    assert env == {"PYTHONPATH": os.pathsep.join([str(HOOKS_DIR), "a", "b"]),
                   "TRACEFIX_ANOMALY": "1", "TRACEFIX_VERIFY_STEPS": "4"}
    assert hook_env(base={"PYTHONPATH": env["PYTHONPATH"]})["PYTHONPATH"] == env["PYTHONPATH"]   # not twice


def test_hook_is_lazy_and_chains_the_shadowed_sitecustomize(tmp_path):
    other = tmp_path / "site_dir"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED_SITECUSTOMIZE'] = 'yes'\n")
    env = _env(**hook_env(anomaly=True, verify_steps=2, base={"PYTHONPATH": str(other)}))
    probe = ("import os, sys; print(os.environ.get('CHAINED_SITECUSTOMIZE'), 'torch' in sys.modules, "
             "sys.modules['sitecustomize'].__file__)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    chained, torch_loaded, ours = out.stdout.split()
    assert chained == "yes"                          # the user's sitecustomize still ran
    assert torch_loaded == "False"                   # nothing imported torch eagerly
    assert Path(ours).resolve().parent == HOOKS_DIR


# --- real torch ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def verify_apply_run(tmp_path_factory):
    name = "nonscalar-weighted-mse"
    work = copy_sample(name, tmp_path_factory.mktemp("apply"))
    run = tracefix_run(["--apply", "--verify", "--format", "json", "--root", str(work), "--",
                        sys.executable, "train.py"], work)
    return name, work, run


@pytest.mark.torch
def test_apply_verify_nonscalar_reports_verified(verify_apply_run):
    name, work, run = verify_apply_run
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    assert report["command_exit_code"] == 1          # the first run crashed ...
    assert report["verification"] == "verified"     # ... the patched one trained
    assert report["exit_code"] == 0                  # tracefix's own outcome: patched and verified
    assert report["applied"] == "train.py"
    (diag,) = report["diagnoses"]
    assert diag["id"] == expected(name)["id"]
    assert site(diag["fix_sites"][0]) == expected(name)["fix_site"]
    assert b"tracefix: verify: steps ok: 2 optimizer steps" in run.stderr
    assert report["verification_detail"].startswith("verified: 2 optimizer steps, gradients non-zero and parameters "
                                                    "changed, ran to the end (exit 0) in ")


@pytest.mark.torch
def test_apply_verify_nonscalar_patched_the_copy_only(verify_apply_run):
    name, work, _run = verify_apply_run
    original = (SAMPLES / name / "train.py").read_text()
    patched = (work / "train.py").read_text()
    assert patched != original
    line = int(expected(name)["fix_site"].split(":")[1])
    assert ".mean()" in patched.splitlines()[line - 1]


@pytest.mark.torch
def test_anomaly_rerun_finds_the_true_culprit(tmp_path):
    name = "inplace-residual-augassign"
    work = copy_sample(name, tmp_path)
    # --no-witness: the witness's evidence would make the anomaly re-run unnecessary (test_witness.py)
    run = tracefix_run(["--anomaly", "--no-witness", "--format", "json", "--root", str(work), "--",
                        sys.executable, "train.py"], work)
    assert run.returncode == 1, run.stderr[-3000:]
    assert b"anomaly mode is slow" in run.stderr
    report = json.loads(run.stdout)
    (diag,) = report["diagnoses"]
    assert diag["id"] == expected(name)["id"]
    assert site(diag["crash_site"]) == expected(name)["crash_site"]
    assert site(diag["fix_sites"][0]) == expected(name)["fix_site"]
    assert (work / "models.py").read_text() == (SAMPLES / name / "models.py").read_text()   # not edited


PKG_LAYERS = """\
import torch
import torch.nn as nn


class Gate(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        h = torch.sigmoid(self.proj(x))
        h.mul_(2.0)  # sigmoid saved its output for backward
        return h
"""
PKG_TRAIN = """\
import torch

from pkg.layers import Gate

torch.manual_seed(0)
model = Gate(8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    opt.step()
"""


@pytest.mark.torch
def test_anomaly_with_python_dash_m(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "layers.py").write_text(PKG_LAYERS)
    (pkg / "train.py").write_text(PKG_TRAIN)
    run = tracefix_run(["--anomaly", "--no-witness", "--format", "json", "--root", str(tmp_path), "--",
                        sys.executable, "-m", "pkg.train"], tmp_path,
                       env=_env(PYTHONPATH=os.pathsep.join([str(tmp_path / "elsewhere"), str(REPO)])))  # kept
    assert run.returncode == 1, run.stderr[-3000:]
    assert b"Traceback of forward call that caused the error" in run.stderr
    (diag,) = json.loads(run.stdout)["diagnoses"]
    assert diag["id"] == "inplace-modification"
    assert site(diag["crash_site"]) == "pkg/train.py:11"
    assert site(diag["fix_sites"][0]) == "pkg/layers.py:12"


ENDLESS = """\
import time
import torch

class MySGD(torch.optim.SGD):          # a subclass with its own step
    def step(self, closure=None):
        return super().step(closure)

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = MySGD(model.parameters(), lr=0.01)
for step in range(10_000):             # 10 000 x 60 ms: 10 minutes without the hook
    opt.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    opt.step()
    print(f"step {step} done", flush=True)
    time.sleep(0.06)
"""


@pytest.mark.torch
def test_verify_hook_stops_a_long_training_loop(tmp_path):
    (tmp_path / "endless.py").write_text(ENDLESS)
    env = _env(**hook_env(verify_steps=3, verify_timeout=0))     # 0: stop right after the steps
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "endless.py"], cwd=tmp_path, capture_output=True, env=env,
                         timeout=120)            # without the hook: 10 minutes, a TimeoutExpired failure
    elapsed = time.monotonic() - t0
    assert out.returncode == 0, out.stderr[-3000:]
    assert (b"tracefix: verify: steps ok: 3 optimizer steps (3 backward passes); gradients non-zero, parameters "
            b"changed; stopping now (time bound 0)") in out.stderr
    assert b"tracefix: verify: time bound: " in out.stderr
    # stopped right after the third step's optimizer step, before its print
    assert out.stdout.decode().splitlines() == ["step 0 done", "step 1 done"]
    assert elapsed < 60


@pytest.mark.parametrize("cmd, apply, code", [([sys.executable, "-c", "pass"], False, 0),
                                              ([sys.executable, "-c", "pass"], True, 0),
                                              (["tracefix-no-such-command"], True, 127)])
def test_json_has_the_same_keys_when_there_is_nothing_to_diagnose(tmp_path, cmd, apply, code):
    args = ["--format", "json"] + (["--apply"] if apply else []) + ["--", *cmd]
    proc = tracefix_run(args, tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == code
    assert report["exit_code"] == code and report["command_exit_code"] == code
    assert report["verification"] == "not run" and report["diagnoses"] == []
    assert ("applied" in report) == apply and report.get("applied", "nothing") == "nothing"
    assert ("error" in report) == (code == 127)


def test_tracefix_starts_its_own_line_after_output_left_open_and_leaves_a_success_alone(tmp_path):
    failing = tracefix_run(["--", sys.executable, "-c", "import sys; sys.stdout.write('no newline'); sys.exit(1)"], tmp_path)
    assert failing.returncode == 1
    assert failing.stdout.startswith(b"no newline\n") and b"no newlinetracefix" not in failing.stdout
    err = tracefix_run(["--", sys.executable, "-c", "import sys; sys.stderr.write('half a line'); sys.exit(1)"], tmp_path)
    assert err.stderr.startswith(b"half a line\n")
    ok = tracefix_run(["--", sys.executable, "-c", "import sys; sys.stdout.write('done')"], tmp_path)
    assert ok.returncode == 0 and ok.stdout == b"done" and ok.stderr == b""


# --- a verification whose steps were reached, in a process the command waits for -------------------
NONSCALAR_TRAIN = """\
import torch

crit = torch.nn.MSELoss(reduction="none")
x = torch.randn(4, 2, requires_grad=True)
loss = crit(x, torch.zeros(4, 2))
loss.backward()
"""
# Stands for `jupyter nbconvert --execute`: the first run's kernel crashes with the error; in the
# verify run the kernel reaches the steps, the hook says so and ends it, and nbconvert then fails
# on the dead kernel.  AGAIN: the error comes back in another process after the line.
LAUNCHER = """\
import os
import sys

crash = ("Traceback (most recent call last):\\n  File \\"%s\\", line 6, in <module>\\n    loss.backward()\\n"
         "RuntimeError: grad can be implicitly created only for scalar outputs\\n" % os.path.abspath("train.py"))
if os.environ.get("TRACEFIX_VERIFY_STEPS"):
    sys.stderr.write("\\ntracefix: verify: steps ok: 2 optimizer steps (2 backward passes); gradients non-zero, "
                     "parameters changed; running on for at most 60s\\n"
                     "tracefix: verify: time bound: ran on 60s after the 2 optimizer steps without an error\\n")
    sys.stderr.write(crash if os.environ.get("AGAIN") else "Traceback (most recent call last):\\n"
                     "  File \\"/opt/nbclient/client.py\\", line 1009, in run\\n"
                     "nbclient.exceptions.DeadKernelError: Kernel died\\n")
else:
    sys.stderr.write(crash)
sys.exit(1)
"""


@pytest.mark.parametrize("again", [False, True], ids=["launcher-fails-after", "error-comes-back"])
def test_verify_trusts_the_hooks_line_when_only_the_launcher_failed_after_it(tmp_path, again):
    (tmp_path / "train.py").write_text(NONSCALAR_TRAIN)
    (tmp_path / "launcher.py").write_text(LAUNCHER)
    run = tracefix_run(["--apply", "--verify", "--no-witness", "--format", "json", "--root", str(tmp_path), "--",
                        sys.executable, "launcher.py"], tmp_path, env=_env(AGAIN="1" if again else ""))
    report = json.loads(run.stdout)
    if again:       # the line alone does not hide an error that came back
        assert run.returncode == 3 and report["verification"] == "still failing"
        assert (tmp_path / "train.py").read_text() == NONSCALAR_TRAIN
        return
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert report["verification"] == "verified" and report["applied"] == "train.py" and "restored" not in report
    assert 'reduction="mean"' in (tmp_path / "train.py").read_text()       # the working patch stays
    assert (b"verified: 2 optimizer steps, gradients non-zero and parameters changed, then no error until stopped "
            b"at the time bound") in run.stderr
    assert b"the command then exited with status 1 because --verify ended the process that trained" in run.stderr


KERNEL_LIKE = """\
import os, sys
import sitecustomize                      # tracefix's hook (hook_env put its folder first)
copy = os.dup(2)                          # what ipykernel does: keep the real stderr, point fd 2 elsewhere
os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
class OutStream:
    _original_stdstream_copy = copy
    def write(self, text): pass           # to the notebook, over zmq: lost when the process ends
    def flush(self): pass
sys.stderr = OutStream()
sitecustomize._end_verified(2, {"backward": 2, "step": 2})
"""


def test_verify_hook_line_reaches_the_real_stderr_of_a_jupyter_kernel(tmp_path):
    (tmp_path / "kernel.py").write_text(KERNEL_LIKE)
    out = subprocess.run([sys.executable, "kernel.py"], cwd=tmp_path, capture_output=True,
                         env=_env(**hook_env(verify_steps=2)), timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith(b"\ntracefix: verify: time bound: stopped 2 optimizer steps in (2 backward passes); "
                                 b"no error so far; ending this Jupyter kernel now")
