"""The first screen (issue 22 item 4): by default rich and plain show the crash site, the fix site,
the recommended patch with its diff and each alternative on one line; --all shows every site's
reason and every patch's diff; json always has everything."""
import json
import os
import subprocess
import sys

from conftest import SAMPLE_LIST, copy_sample, run_tracefix

SAMPLE = {s.name: s for s in SAMPLE_LIST}["nonscalar-weighted-mse"]


def _diffs(text: str) -> int:
    return sum(1 for ln in text.splitlines() if ln.strip().startswith("--- a/"))


def test_default_shows_one_diff_and_all_shows_every_patch(tmp_path):
    root = copy_sample(SAMPLE, tmp_path)
    log = SAMPLE.log.read_bytes()
    patches = json.loads(run_tracefix("--format", "json", "--root", root, stdin=log).stdout)["diagnoses"][0]["patches"]
    assert len(patches) >= 3, patches
    short = run_tracefix("--format", "plain", "--root", root, stdin=log).stdout.decode()
    full = run_tracefix("--format", "plain", "--all", "--root", root, stdin=log).stdout.decode()
    assert _diffs(short) == 1 and _diffs(full) == sum(1 for p in patches if p["diff"])
    assert "patch 1 (recommended, safe)" in short and "Why:" not in short and "Why:" in full
    # every alternative that could be written is listed on one line; the insufficient ones are counted
    for i, p in enumerate(patches[1:], 2):
        listed = [ln for ln in short.splitlines() if ln.startswith(f"  patch {i} (")]
        assert len(listed) == (p["applicability"] != "insufficient"), (i, p["applicability"], short)
    left = sum(p["applicability"] == "insufficient" for p in patches)
    if left:
        assert f"({left} more patch" in short
    assert "--all shows" in short and "--all shows" not in full
    assert len(short.splitlines()) < len(full.splitlines()) and len(short.splitlines()) <= 40
    # the other fix sites: one line of places in the short form, a reason each with --all
    sites = json.loads(run_tracefix("--format", "json", "--root", root, stdin=log).stdout)["diagnoses"][0]["fix_sites"]
    if len(sites) > 1:
        also = [ln for ln in short.splitlines() if ln.startswith("  also:")]
        assert len(also) == 1 and f"{sites[1]['path']}:{sites[1]['line']}" in also[0]
        assert sum(ln.startswith("  also:") for ln in full.splitlines()) == min(len(sites) - 1, 4)


def test_rich_short_form_holds_one_diff(tmp_path):
    root = copy_sample(SAMPLE, tmp_path)
    env = dict(os.environ, COLUMNS="120", NO_COLOR="1")
    args = [sys.executable, "-m", "tracefix", "--format", "rich", "--root", str(root)]
    short = subprocess.run(args, input=SAMPLE.log.read_bytes(), capture_output=True, env=env, timeout=120)
    full = subprocess.run(args + ["--all"], input=SAMPLE.log.read_bytes(), capture_output=True, env=env, timeout=120)
    assert short.returncode == full.returncode == 0, short.stderr
    assert _diffs(short.stdout.decode().replace("│", " ")) == 1
    assert _diffs(full.stdout.decode().replace("│", " ")) > 1


def test_run_takes_all(tmp_path):
    """`tracefix run --all` passes the option to the report (the command replays a recorded crash)."""
    root = copy_sample(SAMPLE, tmp_path)
    replay = [sys.executable, "-c", "import sys; sys.stderr.write(open('crash.log').read()); sys.exit(1)"]
    cmd = [sys.executable, "-m", "tracefix", "run", "--format", "plain", "--no-witness", "--root", str(root)]
    short = subprocess.run(cmd + ["--", *replay], cwd=root, capture_output=True, text=True, timeout=120)
    full = subprocess.run(cmd + ["--all", "--", *replay], cwd=root, capture_output=True, text=True, timeout=120)
    assert "nonscalar-backward" in short.stdout and "nonscalar-backward" in full.stdout
    assert _diffs(short.stdout) == 1 and _diffs(full.stdout) > 1, full.stdout
