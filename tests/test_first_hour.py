"""A new user's first hour (issue 12): labels that hold, restores, exit codes, undo, --pick, help,
messages, and a repository that stands alone."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, SAMPLE_LIST, copy_sample, run_tracefix
from tracefix.record import replace

SAMPLES = {s.name: s for s in SAMPLE_LIST}


def tracefix(*args, cwd=None, stdin=None, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "tracefix", *map(str, args)], cwd=cwd, input=stdin,
                          capture_output=True, timeout=timeout, env=env)


def snapshot(root: Path):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# --- 1. insufficient: reducing at backward() while the loss is used as a number afterwards --------
def _propose(tmp_path, text, line):
    from tracefix.patcher import propose
    from tracefix.records import Diagnosis, FixSite, Traceback

    (tmp_path / "train.py").write_text(text)
    code = text.splitlines()[line - 1]
    site = FixSite(path="train.py", line=line, code=code.strip(), col=len(code) - len(code.lstrip()),
                   kind="backward-receiver", score=1.0)
    diag = Diagnosis("nonscalar-backward", "t", 1.0, Traceback("RuntimeError", "m"), fix_sites=(site,))
    return propose(diag, tmp_path)


LOOP = "import torch\nfor x in data:\n    loss = crit(model(x), y)\n    loss.backward()\n    {use}\n"
NUMBER_USES = ["print(loss.item())", "total += float(loss)", "print(f'{loss:.3f}')",
               "print('loss %.3f' % loss)", "best = min(best, int(loss))", "stop = loss < 0.1",
               "logger.info('loss %s', loss)", "writer.add_scalar('loss', loss.detach().cpu().item(), 1)",
               "print('loss {}'.format(loss))"]


@pytest.mark.parametrize("use", NUMBER_USES)
def test_reducing_only_at_backward_is_insufficient_when_the_loss_is_a_number_later(tmp_path, use):
    patches = _propose(tmp_path, LOOP.format(use=use), 4)
    assert patches
    for p in patches:   # .mean(), .sum() and gradient=ones_like at backward(): the error moves to line 5
        assert p.applicability == "insufficient", (p.summary, use)
        assert "train.py:5" in p.reason and "'loss'" in p.reason, p.reason


@pytest.mark.parametrize("text", [LOOP.format(use="opt.step()"),
                                  # another function's own `loss` is another variable
                                  LOOP.format(use="opt.step()") + "\n\ndef evaluate():\n    loss = crit(y)\n"
                                                                  "    print(loss.item())\n"])
def test_reducing_at_backward_stays_safe_when_the_loss_is_not_read_again(tmp_path, text):
    patches = _propose(tmp_path, text, 4)
    assert patches[0].applicability == "safe" and "loss.mean().backward()" in patches[0].files[0][2]


def test_insufficient_patches_rank_last_and_are_never_written(tmp_path):
    sample = SAMPLES["nonscalar-weighted-mse"]
    root = copy_sample(sample, tmp_path)
    proc = tracefix("--format", "json", "--root", root, stdin=sample.log.read_bytes())
    patches = json.loads(proc.stdout)["diagnoses"][0]["patches"]
    labels = [p["applicability"] for p in patches]
    assert labels[0] == "safe" and "insufficient" in labels
    assert labels == sorted(labels, key=lambda a: a == "insufficient"), labels   # all at the end
    n = labels.index("insufficient") + 1
    before = snapshot(root)
    proc = tracefix("--apply", "--pick", n, "--root", root, "--format", "plain", stdin=sample.log.read_bytes())
    assert proc.returncode == 3
    assert b"insufficient" in proc.stderr and b"loss.item()" in proc.stderr
    assert snapshot(root) == before
    short = tracefix("--format", "plain", "--root", root, stdin=sample.log.read_bytes()).stdout.decode()
    assert f"patch {n} (" not in short and "not applicable; --all shows" in short
    plain = tracefix("--format", "plain", "--all", "--root", root, stdin=sample.log.read_bytes()).stdout.decode()
    assert f"patch {n} (not applicable, insufficient)" in plain
    assert "insufficient because: the loss is also read as a number at train.py:" in plain


# --- 2. a failed --verify restores the files ------------------------------------------------------
TWO_BUGS = (
    "import torch\r\n"
    "import torch.nn as nn\r\n"
    "torch.manual_seed(0)\r\n"
    "model = nn.Linear(4, 1)\r\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\r\n"
    "crit = nn.MSELoss(reduction='none')\r\n"
    "x, y = torch.randn(8, 4), torch.randn(8, 1)\r\n"
    "for step in range(3):\r\n"
    "    opt.zero_grad()\r\n"
    "    loss = crit(model(x), y)\r\n"
    "    loss.backward()\r\n"
    "    opt.step()\r\n"
    "    print('step', step, 'loss', loss.mean().item(), 'lr', opt.param_groups[0]['learning_rate'])"
)


@pytest.mark.torch
def test_failed_verify_restores_the_files_byte_for_byte(tmp_path):
    (tmp_path / "train.py").write_bytes(TWO_BUGS.encode())   # CRLF, no final newline
    os.chmod(tmp_path / "train.py", 0o640)
    before = snapshot(tmp_path)
    proc = tracefix("run", "--apply", "--verify", "--format", "json", "--root", tmp_path, "--",
                    sys.executable, "train.py", cwd=tmp_path)
    report = json.loads(proc.stdout)
    err = proc.stderr.decode()
    assert proc.returncode == 3, err[-3000:]
    assert report["verification"] == "new error" and report["exit_code"] == 3
    assert report["restored"] == "train.py"
    assert report["applied"] == "train.py (taken back: the verification failed)"
    assert [u["type"] for u in report["new_error"]["unrecognized"]] == ["KeyError"]   # the patched run's
    assert snapshot(tmp_path) == before                      # byte for byte, and no .tracefix left
    assert (tmp_path / "train.py").stat().st_mode & 0o777 == 0o640
    line = next(ln for ln in err.splitlines() if "restored byte for byte" in ln)
    assert "KeyError: 'learning_rate'" in line                # why, in the same one line
    assert tracefix("undo", "--root", tmp_path).returncode == 1   # nothing half-done to undo


# --- 3. exit codes --------------------------------------------------------------------------------
def test_run_apply_on_an_unknown_error_is_not_patched(tmp_path):
    proc = tracefix("run", "--apply", "--format", "plain", "--", sys.executable, "-c",
                    "raise KeyError('x')", cwd=tmp_path)
    assert proc.returncode == 3
    assert b"not patched" in proc.stderr
    assert proc.stdout.decode().rstrip().splitlines()[-1] == "exit code: 3"


@pytest.mark.parametrize("argv", [["--bogus"], ["--format", "yaml", "x.log"], ["explain"],
                                  ["--pick", "1", "x.log"], ["--apply", "--pick", "0", "x.log"],
                                  ["run", "--pick", "2", "--", "true"], ["undo", "--nope"],
                                  # a second new user's round: conflicts and misplaced options
                                  ["--apply", "--no-patch", "x.log"], ["--pick", "x", "--apply", "x.log"],
                                  ["--root", "x.log", "x.log"], ["run", "--bogus", "--", "true"],
                                  ["run", "--bogus"], ["run", "--verify", "--", "true"]])
def test_usage_errors_are_one_line_on_stderr(argv, tmp_path):
    shutil.copy(SAMPLES["nonscalar-weighted-mse"].log, tmp_path / "x.log")   # a log that diagnoses
    proc = tracefix(*argv, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracefix: error: "), lines
    assert proc.stdout == b""


# --- 4. repeat and undo ---------------------------------------------------------------------------
def _git(root, *args):
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True,
                          env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                                   GIT_COMMITTER_EMAIL="t@t")).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_second_apply_says_already_applied_and_undo_works_from_inside(tmp_path):
    sample = SAMPLES["inplace-residual-augassign"]
    root = copy_sample(sample, tmp_path)
    (root / "sub").mkdir()
    (root / "sub" / "keep.txt").write_text("x")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "start")
    before = snapshot(root)
    log = sample.log.read_bytes()
    first = tracefix("--apply", "--format", "plain", cwd=root, stdin=log)
    assert first.returncode == 0, first.stderr
    assert (root / ".tracefix" / ".gitignore").read_text().strip().endswith("*")
    assert _git(root, "status", "--porcelain").split() == ["M", "models.py"]   # .tracefix never shows
    second = tracefix("--apply", "--format", "plain", cwd=root, stdin=log)
    assert second.returncode == 0
    assert b"already applied" in second.stderr and b"tracefix undo" in second.stderr
    undo = tracefix("undo", cwd=root / "sub")                  # from inside the project
    assert undo.returncode == 0, undo.stderr
    assert snapshot(root) == before                            # and .tracefix is gone
    again = tracefix("undo", cwd=root / "sub")
    assert again.returncode == 1
    assert str(root / "sub") in again.stdout.decode() and "above" in again.stdout.decode()
    with_root = tracefix("undo", "--root", root, cwd=tmp_path)
    assert with_root.returncode == 1 and str(root / ".tracefix") in with_root.stdout.decode()


# --- 5. --pick -------------------------------------------------------------------------------------
def test_pick_out_of_range_is_grammatical(tmp_path):
    sample = SAMPLES["fp16-build-model-dtype"]
    root = copy_sample(sample, tmp_path)
    proc = tracefix("--apply", "--pick", "2", "--root", root, "--format", "plain", stdin=sample.log.read_bytes())
    assert proc.returncode == 3
    assert b"--pick 2: there is 1 patch" in proc.stderr



@pytest.mark.parametrize("name, unsafe", [("inplace-nograd-helper-normalize", True), ("nonscalar-weighted-mse", False)])
def test_apply_says_on_stderr_when_the_patch_it_wrote_is_unsafe(tmp_path, name, unsafe):
    sample = SAMPLES[name]
    root = copy_sample(sample, tmp_path)
    proc = tracefix("--apply", "--root", root, "--format", "plain", stdin=sample.log.read_bytes())
    assert proc.returncode == 0 and b"applied: " in proc.stdout
    said = re.findall(rb"^tracefix: .* is unsafe: .*\(review it; tracefix undo reverts it\)$", proc.stderr, re.M)
    assert len(said) == (1 if unsafe else 0), proc.stderr
    if unsafe:
        assert b"the patch written to metrics.py is unsafe: 'z' is a parameter of mean_cosine()" in said[0]


def test_quickfix_apply_writes_the_patch_and_paths_are_relative_to_the_current_directory(tmp_path):
    sample = SAMPLES["nonscalar-token-ce-none"]
    root = copy_sample(sample, tmp_path)
    # from the folder above the project: an editor opens these paths from where it ran the command
    shown = tracefix("--root", root.name, "--format", "quickfix", f"{root.name}/crash.log", cwd=tmp_path)
    lines = shown.stdout.decode().splitlines()
    assert shown.returncode == 0 and lines
    for line in lines:
        path = line.split(":", 1)[0]
        assert (tmp_path / path).is_file(), line
    inside = tracefix("--format", "quickfix", "crash.log", cwd=root)
    assert inside.stdout.decode().splitlines()[0].startswith("losses.py:12:")
    before = (root / "losses.py").read_bytes()
    done = tracefix("--root", root, "--format", "quickfix", "--apply", root / "crash.log", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (root / "losses.py").read_bytes() != before
    assert b"tracefix: applied: losses.py" in done.stderr


def test_a_library_only_log_whose_search_finds_nothing_does_not_promise_candidates(tmp_path):
    sample = SAMPLES["nonscalar-token-ce-none"]
    root = copy_sample(sample, tmp_path)
    # the log's own frame paths are where it was recorded: rewrite every train.py frame
    log = re.sub(r'File "[^"]*train\.py"', 'File "/usr/lib/python3/dist-packages/x/t.py"', sample.log.read_text())
    assert "dist-packages/x/t.py" in log
    proc = tracefix("--format", "json", "--root", root, stdin=log.encode())
    (d,) = json.loads(proc.stdout)["diagnoses"]
    if d["fix_sites"]:
        assert any("candidates (apply one with --pick N)" in n for n in d["notes"])
    else:
        assert any("the project was searched, and no fix site was found" in n for n in d["notes"])
        assert not any("candidates" in n for n in d["notes"])

# --- 6. help ---------------------------------------------------------------------------------------
def test_top_level_help_shows_the_default_commands_options():
    out = tracefix("--help").stdout.decode()
    for option in ("--root", "--format", "--apply", "--pick", "--no-patch", "--knowledge"):
        assert re.search(rf"^\s+{option}\b", out, re.M), option
    for command in ("diagnose", "run", "undo", "hook", "explain", "list"):
        assert re.search(rf"^\s+{command}\s", out, re.M), command


def test_readme_quick_start_for_a_new_user():
    readme = (REPO / "README.md").read_text()
    quick = readme[readme.index("## Quick start"):readme.index("## Using it")]
    assert quick.index("python3 -m venv") < quick.index("python3 -m pip install .")
    assert "minutes" in quick and "editable" in quick
    assert "diagnose" in readme and "tracefix hook" in readme and "insufficient" in readme


# --- 7. messages -----------------------------------------------------------------------------------
def test_empty_input_has_its_own_message(tmp_path):
    (tmp_path / "empty.log").write_bytes(b"")
    for proc in (tracefix(tmp_path / "empty.log"), tracefix(stdin=b"")):
        assert proc.returncode == 1
        assert b"the input is empty" in proc.stderr
        assert b"no known PyTorch error" not in proc.stdout + proc.stderr


def test_inplace_function_form_names_the_tensor(tmp_path):
    from tracefix.patcher import propose
    from tracefix.records import Diagnosis, FixSite, Traceback

    (tmp_path / "m.py").write_text("import torch\n\n\ndef f(x):\n    logits = x * 2\n    y = torch.sigmoid_(logits)\n"
                                   "    return y + logits\n")
    site = FixSite(path="m.py", line=6, code="y = torch.sigmoid_(logits)", col=4, kind="inplace-method", score=1)
    (p,) = propose(Diagnosis("inplace-modification", "t", 1.0, Traceback("RuntimeError", "m"), fix_sites=(site,)),
                   tmp_path)
    # both names the in-place call left on one tensor are rebound, so the later read of logits is kept
    assert p.applicability == "safe"
    assert "    y = logits = torch.sigmoid(logits)\n" in p.files[0][2] and "torch is" not in p.reason


def test_rich_title_is_not_cut_mid_word_at_80_columns():
    from tracefix.knowledge import find_entry, load_entries

    entries = load_entries([])
    for sample in {s.id: s for s in SAMPLE_LIST}.values():
        proc = tracefix("--format", "rich", "--no-patch", "--root", sample.dir, sample.log,
                        env=dict(os.environ, COLUMNS="80", NO_COLOR="1"))
        top = proc.stdout.decode().splitlines()[0]
        assert len(top) <= 80
        title = top.strip("╭╮─ ").split(": ", 1)[1]
        full = find_entry(entries, sample.id).title
        if title.endswith("…"):     # shortened: at a word boundary, and no half-shown confidence
            shown = title[:-1]
            assert full.startswith(shown) and full[len(shown)] in " ,;:(", (title, full)
        else:
            assert re.fullmatch(re.escape(full) + r"(  \[\d\.\d\d\])?", title), (title, full)



def test_a_narrow_terminal_wraps_the_diff_rather_than_cropping_the_change(tmp_path):
    sample = SAMPLES["nonscalar-token-ce-none"]
    root = copy_sample(sample, tmp_path)
    proc = tracefix("--format", "rich", "--root", root, root / "crash.log", env=dict(os.environ, COLUMNS="40", NO_COLOR="1"))
    text = "".join(line.strip("│ ") for line in proc.stdout.decode().splitlines())
    assert 'reduction="none"' in text and 'reduction="mean"' in text

# --- 9. the repository stands alone ------------------------------------------------------------------
def test_no_repository_file_points_outside_it():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    files = [REPO / f for f in tracked if not f.endswith(".log")] or \
        [p for p in REPO.rglob("*") if p.is_file() and ".git" not in p.parts and p.suffix != ".log"]
    bad = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if re.search(r"(?<![\w/])/work/|\.\./shared|shared/pytorch-error-formats", line) \
                    and "test_no_repository_file_points_outside_it" not in text:
                bad.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:80]}")
    assert not bad, bad
    assert (REPO / "docs" / "message-formats.md").is_file()


# --- a second new user's round -------------------------------------------------------------------
def test_undo_force_restores_over_a_later_edit(tmp_path):
    sample = SAMPLES["nonscalar-weighted-mse"]
    root = copy_sample(sample, tmp_path)
    before = snapshot(root)
    assert tracefix("--apply", "--root", root, "--format", "plain", stdin=sample.log.read_bytes()).returncode == 0
    patched = next(p for p in root.glob("*.py") if p.read_bytes() != before[p.name])
    with open(patched, "ab") as f:
        f.write(b"# my later edit\n")
    refused = tracefix("undo", "--root", root)
    assert refused.returncode == 3 and b"--force" in refused.stderr
    forced = tracefix("undo", "--force", "--root", root)
    assert forced.returncode == 0, forced.stderr
    assert snapshot(root) == before


ONE_STEP = """import torch
import torch.nn as nn
model = nn.Linear(4, 1)
crit = nn.MSELoss(reduction="none")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range({steps}):
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    loss = crit(model(x), y)
    loss.backward()
    opt.step()
    print("step", step, "loss", float(loss.mean()))
    {after}
"""


@pytest.mark.torch
def test_a_new_error_after_the_patch_is_shown_before_the_final_exit_code_line(tmp_path):
    (tmp_path / "train.py").write_text(ONE_STEP.format(steps=3, after="assert step < 0, 'boom after a step'"))
    before = snapshot(tmp_path)
    proc = tracefix("run", "--apply", "--verify", "--format", "plain", "--", sys.executable, "train.py",
                    cwd=tmp_path)
    out = proc.stdout.decode().rstrip().splitlines()
    assert proc.returncode == 3
    assert out[-1] == "exit code: 3"
    assert "different error: AssertionError: boom after a step" in out[-2]
    assert "no known PyTorch error" not in proc.stdout.decode()
    assert snapshot(tmp_path) == before


@pytest.mark.torch
def test_verify_says_when_the_command_ended_before_the_steps_it_asked_for(tmp_path):
    (tmp_path / "train.py").write_text(ONE_STEP.format(steps=1, after="pass"))
    proc = tracefix("run", "--apply", "--verify", "--format", "plain", "--", sys.executable, "train.py",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert b"verification: verified" in proc.stdout
    assert b"before 2 optimizer steps" in proc.stderr


def test_run_names_the_signal_that_stopped_the_command(tmp_path):
    proc = tracefix("run", "--format", "plain", "--", sys.executable, "-c",
                    "import os, signal; os.kill(os.getpid(), signal.SIGTERM)", cwd=tmp_path)
    assert proc.returncode == 143
    assert b"stopped by SIGTERM (exit code 143)" in proc.stderr


def test_run_without_a_traceback_speaks_of_the_commands_output(tmp_path):
    proc = tracefix("run", "--format", "plain", "--", sys.executable, "-c", "import sys; sys.exit(5)",
                    cwd=tmp_path)
    assert proc.returncode == 5
    assert b"no known PyTorch error found in the command's output" in proc.stdout


def test_a_log_from_an_edited_copy_says_which_file_may_be_meant(tmp_path):
    sample = SAMPLES["nonscalar-weighted-mse"]
    root = copy_sample(sample, tmp_path)
    train = root / "train.py"
    train.write_text("# a\n# b\n" + train.read_text())          # every line moved down
    proc = tracefix("--format", "plain", "--root", root, stdin=sample.log.read_bytes())
    out = " ".join(proc.stdout.decode().split())
    assert "train.py there may be the log's train.py" in out and "edited since" in out
    assert "fix site: none" in out


def test_a_bare_message_in_a_project_finds_the_criterion_as_a_candidate(tmp_path):
    sample = SAMPLES["nonscalar-token-ce-none"]
    root = copy_sample(sample, tmp_path)
    (root / "pyproject.toml").write_text("[project]\nname = 'tagger'\n")
    msg = b"RuntimeError: grad can be implicitly created only for scalar outputs\n"
    out = json.loads(tracefix("--format", "json", "--root", root, stdin=msg).stdout)
    (d,) = out["diagnoses"]
    first = d["fix_sites"][0]
    assert (first["path"], first["code"]) == ("losses.py", 'self.crit = nn.CrossEntropyLoss(reduction="none", label_smoothing=smoothing)')
    assert first["searched"] is True
    before = snapshot(root)
    refused = tracefix("--apply", "--format", "plain", "--root", root, stdin=msg)
    assert refused.returncode == 3 and b"--pick" in refused.stderr
    assert snapshot(root) == before
    # a backward() whose loss is of unknown origin is no evidence: nothing is proposed from it
    (root / "losses.py").write_text((root / "losses.py").read_text().replace('reduction="none", ', ""))
    out = json.loads(tracefix("--format", "json", "--root", root, stdin=msg).stdout)
    assert out["diagnoses"][0]["fix_sites"] == []


def test_the_fix_site_shown_first_is_the_one_the_recommended_patch_changes(tmp_path):
    from tracefix.pipeline import Report, propose_all
    from tracefix.records import Diagnosis, FixSite, Traceback

    text = ("def closure():\n    optimizer.zero_grad()\n    residual = net(x) - y\n"
            "    loss = residual ** 2\n    loss.backward()\n    return loss\n")
    (tmp_path / "train.py").write_text(text)
    back = FixSite(path="train.py", line=5, code="loss.backward()", col=4, kind="backward-receiver", score=0.9)
    assign = FixSite(path="train.py", line=4, code="loss = residual ** 2", col=11, kind="loss-assignment", score=0.6)
    diag = Diagnosis("nonscalar-backward", "t", 1.0, Traceback("RuntimeError", "m"), fix_sites=(back, assign))
    (d,) = propose_all(Report((diag,), ()), tmp_path).diagnoses
    assert d.patches[0].applicability == "safe" and d.patches[0].origin == ("train.py", 4)
    assert [s.line for s in d.fix_sites] == [4, 5]         # the recommended patch's site comes first
    assert all(p.applicability == "insufficient" for p in d.patches if p.origin == ("train.py", 5))


def test_equally_likely_sites_get_one_patch_that_fixes_them_all(tmp_path):
    from tracefix.patcher import propose, settled
    from tracefix.patcher.writing import apply
    from tracefix.records import Diagnosis, FixSite, Traceback

    (tmp_path / "models.py").write_text("import torch.nn as nn\n\n\ndef build():\n    model = nn.Linear(4, 2)\n"
                                        "    model = model.half()\n    return model\n")
    (tmp_path / "train.py").write_text("import torch\nfrom models import build\n\nmodel = build().to(dtype=torch.half)\n"
                                       "scaler = torch.amp.GradScaler('cpu')\n")
    a = FixSite(path="models.py", line=6, code="model = model.half()", col=18, kind="model-cast", score=0.9)
    b = FixSite(path="train.py", line=4, code="model = build().to(dtype=torch.half)", col=16, kind="model-cast",
                score=0.9)
    diag = Diagnosis("fp16-unscale", "t", 1.0, Traceback("ValueError", "m"), fix_sites=(a, b), rival_sites=True)
    patches = propose(diag, tmp_path)
    first = patches[0]
    assert first.applicability == "safe" and set(first.covers) == {("models.py", 6), ("train.py", 4)}
    parts = [p for p in patches[1:] if p.origin in first.covers and "remove the fp16 cast" in p.summary]
    assert len(parts) == 2 and all(p.applicability == "unsafe" and "fixes only" in p.reason for p in parts)
    assert settled(replace(diag, patches=patches))                       # --apply may write it
    assert not settled(replace(diag, patches=patches[1:]))               # one of them alone: not settled
    apply(first, tmp_path)
    assert "half" not in (tmp_path / "models.py").read_text() and "half" not in (tmp_path / "train.py").read_text()
    for rel in ("models.py", "train.py"):
        compile((tmp_path / rel).read_text(), rel, "exec")



LORA = """import torch
import torch.nn as nn


class LoRALinear(nn.Module):
    def __init__(self, base, r=4, dtype=torch.float16):
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features, dtype=dtype) * 0.01)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, dtype=dtype))
"""


def test_two_half_parameters_on_adjacent_lines_get_one_patch_for_both(tmp_path):
    from tracefix.patcher import propose, settled
    from tracefix.records import Diagnosis, FixSite, Traceback

    (tmp_path / "lora.py").write_text(LORA)
    lines = LORA.splitlines()
    sites = tuple(FixSite(path="lora.py", line=n, code=lines[n - 1].strip(), col=lines[n - 1].index("dtype=dtype"),
                          kind="param-dtype", score=0.8) for n in (10, 9))
    diag = Diagnosis("fp16-unscale", "t", 1.0, Traceback("ValueError", "m"), fix_sites=sites, rival_sites=True)
    patches = propose(diag, tmp_path)
    first = patches[0]
    assert first.applicability == "safe" and set(first.covers) == {("lora.py", 9), ("lora.py", 10)}
    assert first.files[0][2].count("dtype=torch.float32") == 2
    assert first.summary.count("Create the parameter in float32") == 1
    assert all(p.applicability == "unsafe" and "fixes only" in p.reason for p in patches[1:])
    assert settled(replace(diag, patches=patches))

def test_merging_two_edits_of_one_text():
    from tracefix.patcher.text import merge_edit

    base = "a\nb\nc\nd\ne\n"
    assert merge_edit(base, "a\nB\nc\nd\ne\n", "a\nb\nc\nD\ne\n") == "a\nB\nc\nD\ne\n"
    assert merge_edit(base, "a\nb\nc\nD\ne\n", "A\nb\nc\nd\ne\n") == "A\nb\nc\nD\ne\n"
    assert merge_edit(base, "a\nx\ny\nb\nc\nd\ne\n", "a\nb\nc\nd\n") == "a\nx\ny\nb\nc\nd\n"
    assert merge_edit(base, base, "a\nb\nC\nd\ne\n") == "a\nb\nC\nd\ne\n"
    assert merge_edit(base, "a\nB\nc\nd\ne\n", "a\nb\nC\nd\ne\n") == "a\nB\nC\nd\ne\n"  # adjacent lines
    assert merge_edit(base, "a\nB\nc\nd\ne\n", "a\nB2\nc\nd\ne\n") is None      # the same line: refused
    assert merge_edit(base, "a\nB\nc\nd\ne\n", "a\nb\nx\nc\nd\ne\n") is None   # an insertion beside it: refused


def test_a_fix_of_a_less_likely_rival_site_is_not_called_safe(tmp_path):
    from tracefix.patcher import propose
    from tracefix.records import Diagnosis, FixSite, Traceback

    (tmp_path / "model.py").write_text("def forward(self, x):\n    u = self.up(x)\n    u += self.shift\n"
                                       "    g = torch.sigmoid(self.gate(x))\n    h = u * g\n    g *= 0.5\n"
                                       "    return h + g\n")
    likely = FixSite(path="model.py", line=6, code="g *= 0.5", col=4, kind="inplace-augassign", score=0.8)
    decoy = FixSite(path="model.py", line=3, code="u += self.shift", col=4, kind="inplace-augassign", score=0.3)
    rivals = Diagnosis("inplace-modification", "t", 1.0, Traceback("RuntimeError", "m"),
                       fix_sites=(likely, decoy), rival_sites=True)
    patches = propose(rivals, tmp_path)
    assert patches[0].origin == ("model.py", 6) and patches[0].applicability == "safe"
    other = next(p for p in patches if p.origin == ("model.py", 3))
    assert other.applicability == "unsafe" and "less likely site than model.py:6" in other.reason
    # links of one chain (nonscalar): every link's fix removes the error, its own label stands
    chain = replace(rivals, rival_sites=False)
    assert next(p for p in propose(chain, tmp_path) if p.origin == ("model.py", 3)).applicability == "safe"
