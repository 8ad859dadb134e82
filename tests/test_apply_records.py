"""What --apply records and says about files it touches: which patch of a traceback is on disk,
symlinks that leave the root (read, never written), and hard links (written, with a caution)."""
import json
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
