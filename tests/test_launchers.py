"""Real launchers (issue 21): projects started by a launcher that runs the training script in
processes of its own, which crash there.  `torchrun --nproc_per_node 2` (gloo) trains a
DistributedDataParallel model and both ranks crash; `accelerate launch --cpu` runs an Accelerate
loop.  Each once under `tracefix run --apply --verify -- LAUNCHER ...` (the witness armed in the
launched processes, the patch verified over their optimizer steps), and once the way a job script
runs it: `eval "$(tracefix hook --print-env)"`, then the launcher's output piped into tracefix.
Either way: one diagnosis (the launcher's own wrapper error is not a second one), the witness's
evidence, the fix site in the project."""
import json
import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO, after_crash, crash_log
from test_frameworks import _site, witness_first
from test_programs import ENV, _copy, _tracefix

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

HERE = REPO / "tests" / "launchers"
# each launcher's entry point, with this interpreter (what the `torchrun` and `accelerate` scripts run)
LAUNCHED = {
    "torchrun": (HERE / "inplace-ddp-gated-mlp", 2,
                 [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "train.py"]),
    "accelerate": (HERE / "nonscalar-accelerate-token-loss", 1,
                   [sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "1",
                    "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "train.py"]),
}


def _expected(folder):
    return tomllib.loads((folder / "expected.toml").read_text())


def _check(d, exp):
    assert d["id"] == exp["id"]
    assert _site(d["crash_site"]) == exp["crash_site"]
    assert d["evidence"] is not None, "the witness must explain the crash inside the launched process"
    assert witness_first(d["evidence"]) == exp["witness_site"], d["evidence"]
    assert _site(d["fix_sites"][0]) == exp["fix_site"], d["fix_sites"]


@pytest.mark.torch
@pytest.mark.parametrize("launcher", LAUNCHED)
def test_tracefix_run_around_the_launcher_patches_and_verifies(launcher, tmp_path):
    folder, ranks, cmd = LAUNCHED[launcher]
    exp = _expected(folder)
    root = _copy(folder, tmp_path / folder.name)
    before = (root / exp["fix_site"].split(":")[0]).read_text()
    run = _tracefix("run", "--apply", "--verify", "--format", "json", "--", *cmd, cwd=root)
    report = json.loads(run.stdout)
    log = crash_log(run.stderr)
    assert report["command_exit_code"] != 0, "the launched training must fail first"
    errors = re.findall(r"^(?:\[rank\d\]: )?RuntimeError: (?:one of the variables|grad can be)", log, re.M)
    assert len(errors) >= ranks, "every rank crashes"
    (d,) = report["diagnoses"]            # the ranks' one error: one diagnosis
    assert report["unrecognized"] == [], "the launcher's own error only wraps the script's"
    _check(d, exp)
    assert report["verification"] == "verified", (report, run.stderr[-3000:])
    assert re.search(exp["trained"], after_crash(run.stderr), re.M), run.stderr[-2000:]
    assert (root / exp["fix_site"].split(":")[0]).read_text() != before


@pytest.mark.torch
@pytest.mark.parametrize("launcher", LAUNCHED)
def test_hook_env_exported_for_the_launcher_and_the_log_piped_in(launcher, tmp_path):
    folder, _ranks, cmd = LAUNCHED[launcher]
    root = _copy(folder, tmp_path / folder.name)
    tracefix = f"{shlex.quote(sys.executable)} -m tracefix"
    script = (f'eval "$({tracefix} hook --print-env)" && {shlex.join(cmd)} > run.log 2>&1; '
              f"{tracefix} --format json --no-patch --root . < run.log")
    proc = subprocess.run(["bash", "-c", script], cwd=root, capture_output=True, text=True, env=ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tracefix-witness:" in (root / "run.log").read_text(), "the exported hook arms the witness"
    report = json.loads(proc.stdout)
    (d,) = report["diagnoses"]
    assert report["unrecognized"] == []
    _check(d, _expected(folder))


def test_accelerates_copy_of_a_crash_cut_short_is_not_a_second_error():
    """A real `accelerate launch` log, taken under load: the launcher's RuntimeError copy of the
    script's output starts mid-traceback (`RuntimeError: ^^^^`).  Still one error, the script's."""
    folder = LAUNCHED["accelerate"][0]
    log = HERE / "accelerate-tail-cut.log"
    assert "RuntimeError: ^^^" in log.read_text()
    report = json.loads(_tracefix("--format", "json", "--no-patch", "--root", str(folder), str(log)).stdout)
    assert report["unrecognized"] == []
    (d,) = report["diagnoses"]
    _check(d, _expected(folder))
