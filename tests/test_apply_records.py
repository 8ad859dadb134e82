"""What --apply records and says about files it touches: which patch of a traceback is on disk,
symlinks that leave the root (read, never written), and hard links (written, with a caution)."""
import json
import os
import re
from pathlib import Path

from conftest import SAMPLE_LIST, copy_sample, run_tracefix

SAMPLES = {s.name: s for s in SAMPLE_LIST}
# patch 1: reduction='mean' in module.py (safe); patch 3: reduction='sum' there (unsafe)
SEVERAL = "nonscalar-lightning-mse-none"


def _apply(root: Path, *args):
    return run_tracefix("--root", root, "--format", "plain", "--apply", *args, "crash.log", cwd=root)


def _said(proc) -> str:
    return proc.stderr.decode()


# --- which patch is on disk ---------------------------------------------------------------------------
def test_picking_another_patch_of_an_applied_traceback_is_refused_and_names_the_one_on_disk(tmp_path):
    root = copy_sample(SAMPLES[SEVERAL], tmp_path)
    assert _apply(root, "--pick", "3").returncode == 0
    on_disk = (root / "module.py").read_bytes()
    proc = _apply(root, "--pick", "1")
    assert proc.returncode == 3, _said(proc)
    assert "already applied (" not in _said(proc) and b"applied: nothing\n" in proc.stdout
    said = re.search(r"^tracefix: nonscalar-backward: --pick 1: patch 3 \((.*)\) is already applied to "
                     r"module\.py; nothing written \(tracefix undo reverts it.*\)$", _said(proc), re.M)
    assert said and "reduction='sum'" in said.group(1), _said(proc)
    assert (root / "module.py").read_bytes() == on_disk


def test_plain_apply_over_a_picked_patch_names_it_and_keeps_exit_0(tmp_path):
    root = copy_sample(SAMPLES[SEVERAL], tmp_path)
    assert _apply(root, "--pick", "3").returncode == 0
    proc = _apply(root)
    assert proc.returncode == 0, _said(proc)
    assert re.search(r"^tracefix: nonscalar-backward: patch 3 \(.*reduction='sum'.*\) is already applied to "
                     r"module\.py, not the recommended patch 1; nothing written \(tracefix undo reverts it",
                     _said(proc), re.M), _said(proc)


def test_the_same_pick_again_is_already_applied(tmp_path):
    root = copy_sample(SAMPLES[SEVERAL], tmp_path)
    assert _apply(root, "--pick", "3").returncode == 0
    proc = _apply(root, "--pick", "3")
    assert proc.returncode == 0
    assert "nonscalar-backward: already applied to module.py (tracefix undo to revert)" in _said(proc)
    assert b"applied: nothing (already applied)" in proc.stdout


def test_after_undo_the_other_pick_is_written(tmp_path):
    root = copy_sample(SAMPLES[SEVERAL], tmp_path)
    assert _apply(root, "--pick", "3").returncode == 0
    assert run_tracefix("undo", cwd=root).returncode == 0
    proc = _apply(root, "--pick", "1")
    assert proc.returncode == 0, _said(proc)
    assert "reduction='mean'" in (root / "module.py").read_text() or "reduction=\"mean\"" in \
        (root / "module.py").read_text()


def test_a_journal_of_an_older_tracefix_still_reads_as_already_applied(tmp_path):
    root = copy_sample(SAMPLES[SEVERAL], tmp_path)
    assert _apply(root, "--pick", "3").returncode == 0
    journal = root / ".tracefix" / "applied.json"
    data = json.loads(journal.read_text())
    journal.write_text(json.dumps({k: v["files"] for k, v in data.items()}))   # {path: sha256}, no number
    proc = _apply(root, "--pick", "1")
    assert proc.returncode == 0 and "already applied to module.py" in _said(proc)
    assert run_tracefix("undo", cwd=root).returncode == 0
    assert not (root / ".tracefix").exists()                    # its entry was forgotten with the undo


# --- a symlink that leaves the root: read for the diagnosis, never written ----------------------------
def _linked_out(tmp_path: Path) -> Path:
    """The sample nonscalar-weighted-mse with its train.py a symlink to a file outside the root."""
    root = copy_sample(SAMPLES["nonscalar-weighted-mse"], tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "train.py").rename(outside / "train.py")
    (root / "train.py").symlink_to(outside / "train.py")
    return root


def test_a_symlink_leaving_the_root_is_diagnosed_through(tmp_path):
    root = _linked_out(tmp_path)
    proc = run_tracefix("--root", root, "--format", "plain", "crash.log", cwd=root)
    out = proc.stdout.decode()
    assert proc.returncode == 0
    assert re.search(r"crash site: train\.py:37\n\s+loss\.backward\(\)", out), out
    assert re.search(r"fix site: +train\.py:36 ", out), out
    assert "does not read" not in out and "edited since" not in out and "not in a file under" not in out


def test_apply_through_a_symlink_leaving_the_root_is_refused_with_that_reason(tmp_path):
    root = _linked_out(tmp_path)
    target = tmp_path / "outside" / "train.py"
    before = target.read_bytes()
    proc = _apply(root)
    assert proc.returncode == 3
    assert re.search(r"^tracefix: nonscalar-backward: refusing to write 'train\.py': a symlink takes it outside "
                     r"the project root \(to .*outside/train\.py\)$", _said(proc), re.M), _said(proc)
    assert "no fix site was found" not in _said(proc)
    assert target.read_bytes() == before and (root / "train.py").is_symlink()


# a folder of the project that is a symlink leaving the root (`pkg -> ../common/pkg`)
PKG_LOSSES = ('import torch.nn as nn\n\n\nclass TokenLoss(nn.Module):\n    def __init__(self):\n'
              '        super().__init__()\n        self.crit = nn.CrossEntropyLoss(reduction="none")\n\n'
              '    def forward(self, logits, tags):\n        return self.crit(logits, tags)\n')
PKG_TRAIN = ('import torch\nfrom pkg.losses import TokenLoss\n\ncriterion = TokenLoss()\n'
             'logits = torch.randn(4, 3, requires_grad=True)\nloss = criterion(logits, torch.tensor([0, 1, 2, 0]))\n'
             'loss.backward()\n')
PKG_LOG = ('Traceback (most recent call last):\n  File "/home/u/proj/train.py", line 7, in <module>\n'
           '    loss.backward()\n'
           '  File "/usr/lib/python3.11/site-packages/torch/_tensor.py", line 623, in backward\n'
           '    torch.autograd.backward(\nRuntimeError: grad can be implicitly created only for scalar outputs\n')


def _linked_folder(tmp_path: Path) -> Path:
    root, shared = tmp_path / "proj", tmp_path / "shared" / "pkg"
    shared.mkdir(parents=True)
    root.mkdir()
    (shared / "__init__.py").write_text("")
    (shared / "losses.py").write_text(PKG_LOSSES)
    (shared / "loop").symlink_to(shared)            # a cycle the index must not follow forever
    (root / "pkg").symlink_to(shared)
    (root / "train.py").write_text(PKG_TRAIN)
    (root / "crash.log").write_text(PKG_LOG)
    return root


def test_a_symlinked_folder_leaving_the_root_is_searched_and_its_files_never_written(tmp_path):
    root = _linked_folder(tmp_path)
    shown = run_tracefix("--root", root, "--format", "json", "crash.log", cwd=root)
    site = json.loads(shown.stdout)["diagnoses"][0]["fix_sites"][0]
    assert (site["path"], site["line"]) == ("pkg/losses.py", 7)
    before = (tmp_path / "shared" / "pkg" / "losses.py").read_bytes()
    proc = _apply(root)
    assert proc.returncode == 3
    assert "refusing to write 'pkg/losses.py': a symlink takes it outside the project root" in _said(proc)
    assert (tmp_path / "shared" / "pkg" / "losses.py").read_bytes() == before
    assert (root / "train.py").read_text() == PKG_TRAIN      # no other patch written instead


# --- the note on a same-named file that is not the log's: true of that file ---------------------------
LOG = ('Traceback (most recent call last):\n'
       '  File "/home/u/proj/train.py", line 3, in {func}\n'
       '    loss.backward()\n'
       '  File "/usr/lib/python3.11/site-packages/torch/_tensor.py", line 623, in backward\n'
       '    torch.autograd.backward(\n'
       'RuntimeError: grad can be implicitly created only for scalar outputs\n')


def _note(tmp_path: Path, func: str) -> str:
    proc = run_tracefix("--root", tmp_path, "--format", "json", stdin=LOG.format(func=func).encode())
    assert proc.returncode == 0, proc.stderr
    return " ".join(json.loads(proc.stdout)["diagnoses"][0]["notes"])


def test_the_note_says_the_line_reads_the_code_but_in_another_function(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nloss = torch.ones(3, requires_grad=True) * 2\n"
                                       "loss.backward()\n")
    note = _note(tmp_path, "main")
    assert "train.py:3 reads 'loss.backward()', but not in main() as the log shows" in note, note
    assert "does not read" not in note and "edited since" not in note


def test_the_note_says_what_the_line_reads_when_it_differs(tmp_path):
    (tmp_path / "train.py").write_text("import torch\n\nloss = torch.ones(3, requires_grad=True) * 2\n"
                                       "loss.backward()\n")
    note = _note(tmp_path, "<module>")
    assert ("train.py:3 reads 'loss = torch.ones(3, requires_grad=True) * 2', not 'loss.backward()' as the "
            "log shows (edited since") in note, note


def test_the_note_says_a_broken_link_cannot_be_read(tmp_path):
    (tmp_path / "train.py").symlink_to(tmp_path / "gone.py")
    note = _note(tmp_path, "<module>")
    assert "train.py cannot be read (a broken symlink" in note and "edited since" not in note, note


# --- hard links: written atomically, and said ---------------------------------------------------------
def test_apply_to_a_hard_linked_file_says_the_other_links_keep_the_old_text(tmp_path):
    root = copy_sample(SAMPLES["nonscalar-weighted-mse"], tmp_path)
    other = tmp_path / "other.py"
    os.link(root / "train.py", other)
    before = other.read_bytes()
    proc = _apply(root)
    assert proc.returncode == 0 and b"applied: train.py" in proc.stdout, _said(proc)
    assert re.search(r"^tracefix: nonscalar-backward: train\.py had 2 hard links; the patch replaced this one "
                     r"only, so the other links still hold the old text \(tracefix undo does not join them "
                     r"again\)$", _said(proc), re.M), _said(proc)
    assert other.read_bytes() == before and (root / "train.py").read_bytes() != before
    assert run_tracefix("undo", cwd=root).returncode == 0
    assert (root / "train.py").read_bytes() == before


def test_apply_to_a_file_with_one_link_says_nothing_of_links(tmp_path):
    root = copy_sample(SAMPLES["nonscalar-weighted-mse"], tmp_path)
    proc = _apply(root)
    assert proc.returncode == 0 and b"applied: train.py" in proc.stdout
    assert "hard link" not in _said(proc)
