"""``tracefix run --apply --verify``: ``verified`` only when the patched program trains and then
runs on without an error, to its end or to the time bound (real PyTorch scripts in tmp dirs).

The steps alone are not enough: a loss reduced for backward() only still breaks the evaluation
that follows the training loop; a program whose parameters never change does not train.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch
TIMEOUT = 300

# A per-sample criterion used by the training loop and by an evaluation after it.  The criterion
# fix (reduction="mean") covers both uses; `.mean()` at backward() covers the training loop only.
SHARED_CRITERION = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr={lr})
crit = nn.MSELoss(reduction="none")


def evaluate():
    total = 0.0
    with torch.no_grad():
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        total += crit(model(x), y).item()
    return total


for step in range({steps}):
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    opt.zero_grad()
    loss = crit(model(x){scale}, y)
    loss.backward()
    opt.step()
    {pause}
print("eval", evaluate())
"""
# The evaluation has its own per-sample criterion, which no fix of the training loss reaches.
OWN_EVAL_CRITERION = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
crit = nn.MSELoss(reduction="none")


def evaluate():
    l1 = nn.L1Loss(reduction="none")
    with torch.no_grad():
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        return float(l1(model(x), y))


for step in range(3):
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    opt.zero_grad()
    loss = crit(model(x), y)
    loss.backward()
    opt.step()
print("val", evaluate())
"""


def _env() -> dict:
    env = dict(os.environ)
    for k in ("TRACEFIX_ANOMALY", "TRACEFIX_VERIFY_STEPS", "TRACEFIX_VERIFY_TIMEOUT", "TRACEFIX_WITNESS",
              "NO_COLOR", "FORCE_COLOR"):
        env.pop(k, None)
    env["OMP_NUM_THREADS"] = "1"
    return env


def _tracefix(cwd: Path, *args, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracefix", *args], cwd=cwd, input=stdin, capture_output=True,
                          env=_env(), timeout=TIMEOUT)


def _verify(work: Path, *options) -> tuple:
    proc = _tracefix(work, "run", "--apply", "--verify", *options, "--format", "json", "--root", str(work), "--",
                     sys.executable, "train.py")
    return proc, json.loads(proc.stdout), proc.stderr.decode(errors="replace")


def _snapshot(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "train.py").write_bytes(text.encode())
    return tmp_path


def _backward_only_patch(work: Path) -> int:
    """The number of the patch that reduces the loss at backward() only (`loss.mean().backward()`)."""
    crash = subprocess.run([sys.executable, "train.py"], cwd=work, capture_output=True, env=_env(), timeout=TIMEOUT)
    assert crash.returncode == 1, crash.stderr[-2000:]
    report = json.loads(_tracefix(work, "--format", "json", "--root", str(work), stdin=crash.stderr).stdout)
    (diag,) = report["diagnoses"]
    numbers = [n for n, p in enumerate(diag["patches"], 1) if "+    loss.mean().backward()" in p["diff"]]
    assert numbers, [p["summary"] for p in diag["patches"]]
    return numbers[0]


@pytest.mark.parametrize("case", ["backward-only patch, shared criterion", "evaluation's own criterion"])
def test_steps_that_train_then_an_evaluation_that_fails_are_not_verified(tmp_path, case):
    if case.startswith("backward-only"):
        work = _write(tmp_path, SHARED_CRITERION.format(lr=0.1, steps=3, scale="", pause="pass"))
        options = ("--pick", str(_backward_only_patch(tmp_path)))
        sequel = "a Tensor with 8 elements cannot be converted to Scalar"        # crit(...).item()
    else:
        work = _write(tmp_path, OWN_EVAL_CRITERION)
        options = ()
        sequel = "only one element tensors can be converted to Python scalars"  # float(l1(...))
    before = _snapshot(work)
    proc, report, err = _verify(work, *options)
    assert proc.returncode == 3, err[-3000:]
    if case.startswith("backward-only"):
        # the locator sees the later .item() use, so this patch is insufficient and never written
        assert report["verification"] == "not run" and "insufficient" in err
        assert _snapshot(work) == before
        return
    assert report["verification"] == "still failing" and report["exit_code"] == 3   # the family's sequel
    assert "verified" not in report["verification_detail"]
    assert sequel in report["verification_detail"] and "after 2 optimizer steps had trained" in report[
        "verification_detail"]
    assert "tracefix: verify: steps ok: 2 optimizer steps" in err               # the steps did run and train
    assert report["restored"] == "train.py"
    assert report["applied"] == "train.py (taken back: the verification failed)"
    assert _snapshot(work) == before                                            # byte for byte, no .tracefix left
    assert "tracefix: verified" not in err


def test_a_fix_that_covers_the_evaluation_too_is_verified_to_the_end(tmp_path):
    work = _write(tmp_path, SHARED_CRITERION.format(lr=0.1, steps=3, scale="", pause="pass"))
    proc, report, err = _verify(work)
    assert proc.returncode == 0, err[-3000:]
    assert report["verification"] == "verified" and report["exit_code"] == 0 and "restored" not in report
    assert 'reduction="mean"' in (work / "train.py").read_text()               # the patch stays
    detail = report["verification_detail"]
    assert detail.startswith("verified: 2 optimizer steps, gradients non-zero and parameters changed, "
                             "ran to the end (exit 0) in ")
    assert f"tracefix: {detail}" in err                                         # said in one line
    assert re.search(r"^eval \d", err, re.M)                                   # the evaluation ran (JSON: output on stderr)


def test_a_program_that_trains_past_the_time_bound_is_stopped_and_verified(tmp_path):
    # 100 000 steps of 50 ms: without the bound, more than an hour
    work = _write(tmp_path, SHARED_CRITERION.format(lr=0.1, steps=100_000, scale="", pause="__import__('time').sleep(0.05)"))
    proc, report, err = _verify(work, "--verify-timeout", "5")
    assert proc.returncode == 0, err[-3000:]
    assert report["verification"] == "verified", err[-3000:]
    detail = report["verification_detail"]
    assert detail.startswith("verified: 2 optimizer steps, gradients non-zero and parameters changed, then no error "
                             "until stopped at the time bound, 5 s after the steps")
    assert "tracefix: verify: time bound: ran on 5s after the 2 optimizer steps without an error" in err
    assert 'reduction="mean"' in (work / "train.py").read_text()


@pytest.mark.parametrize("lr, scale, reason", [
    (0.0, "", "gradients were non-zero, but no optimizer step changed a parameter"),
    (0.1, " * 0.0", "every gradient was zero or missing at each optimizer step"),
], ids=["learning-rate-0", "zero-gradients"])
def test_a_program_whose_parameters_do_not_change_is_not_verified(tmp_path, lr, scale, reason):
    work = _write(tmp_path, SHARED_CRITERION.format(lr=lr, steps=3, scale=scale, pause="pass"))
    before = _snapshot(work)
    proc, report, err = _verify(work)
    assert proc.returncode == 3, err[-3000:]
    assert report["verification"] == "not training" and report["exit_code"] == 3
    assert reason in report["verification_detail"]
    assert "tracefix: verify: steps ok" not in err and "tracefix: verified" not in err
    assert report["restored"] == "train.py" and _snapshot(work) == before
    line = next(ln for ln in err.splitlines() if "restored byte for byte" in ln)
    assert reason in line                                                       # why, in the same line


def test_verify_timeout_needs_verify_and_reaches_the_hook_env(tmp_path):
    usage = _tracefix(tmp_path, "run", "--apply", "--verify-timeout", "5", "--", sys.executable, "-c", "pass")
    assert usage.returncode == 2 and b"--verify-timeout" in usage.stderr
    env = _tracefix(tmp_path, "hook", "--print-env", "--no-witness", "--verify-steps", "3", "--verify-timeout", "7.5")
    assert env.returncode == 0 and env.stdout.decode().splitlines()[1:] == [
        "export TRACEFIX_VERIFY_STEPS=3", "export TRACEFIX_VERIFY_TIMEOUT=7.5"]


# Parameters updated by hand, no torch.optim (pytorch/examples word_language_model's loop).
HAND_SGD = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
crit = nn.MSELoss(reduction="none")
lr = {lr}

for step in range(6):
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    model.zero_grad()
    loss = crit(model(x), y)
    loss.backward()
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
print("done: loss", float(crit(model(x), y).mean()))
"""


def test_a_program_that_updates_its_parameters_by_hand_is_verified(tmp_path):
    work = _write(tmp_path, HAND_SGD.format(lr=0.1))
    proc, report, err = _verify(work)
    assert proc.returncode == 0, err[-3000:]
    assert report["verification"] == "verified", err[-3000:]
    detail = report["verification_detail"]
    assert detail.startswith("verified: 2 parameter updates by the program's own code, gradients non-zero and "
                             "parameters changed, ran to the end (exit 0)"), detail
    assert 'reduction="mean"' in (work / "train.py").read_text()
    assert re.search(r"^done: loss \d", err, re.M)


def test_a_program_whose_hand_update_changes_nothing_is_not_verified(tmp_path):
    work = _write(tmp_path, HAND_SGD.format(lr=0.0))
    before = _snapshot(work)
    proc, report, err = _verify(work)
    assert proc.returncode == 3, err[-3000:]
    assert report["verification"] == "not training"
    assert "no parameter changed between backward passes" in report["verification_detail"]
    assert report["restored"] == "train.py" and _snapshot(work) == before
