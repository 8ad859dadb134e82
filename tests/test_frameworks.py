"""Programs trained through a real framework (tests/frameworks): one `tracefix run --apply --verify`
each.  Its crash, as the run passed it through, is diagnosed as a plain log (the user's crash site
and fix site, never a frame in site-packages); the run itself shows the witness explaining the
crash from inside the framework's loop and the patched program training."""
import importlib.util
import json
import re
import subprocess
import sys

import pytest

from conftest import REPO, after_crash, crash_log
from test_programs import ENV, _copy, _tracefix
from tracefix.families import of_entry

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ALL = sorted(p.parent for p in (REPO / "tests" / "frameworks").glob("*/expected.toml"))
RECORDED = [f for f in ALL if tomllib.loads((f / "expected.toml").read_text()).get("recorded")]
FOLDERS = [f for f in ALL if f not in RECORDED]
pytestmark = pytest.mark.torch


def _site(site):
    return f"{site['path']}:{site['line']}"


def witness_first(evidence):
    """The first site of the witness's evidence as ``basename:line`` (expected.toml's witness_site)."""
    first = evidence["sites"][0]
    return f"{first['path'].replace(chr(92), '/').rsplit('/', 1)[-1]}:{first['line']}"


def _assert_through_framework(log, exp):
    framework = [f for f in re.findall(r'File "([^"]+)", line \d+', log)
                 if re.search(rf"site-packages[/\\]{exp['framework']}[/\\]", f)]
    assert len(framework) >= exp.get("framework_frames", 3), "the traceback must go through the framework's own frames"


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_framework_program(folder, tmp_path):
    exp = tomllib.loads((folder / "expected.toml").read_text())
    assert importlib.util.find_spec(exp["framework"]) is not None, f"the test extra installs {exp['framework']}"
    trained = re.compile(exp["trained"], re.M)

    verify = _copy(folder, tmp_path / "verify" / folder.name)
    run = _tracefix("run", "--apply", "--verify", "--format", "json", "--", sys.executable, "train.py", cwd=verify)
    r = json.loads(run.stdout)
    log = crash_log(run.stderr)
    assert r["command_exit_code"] != 0 and not trained.search(log), "the program no longer crashes"
    _assert_through_framework(log, exp)

    plain = _copy(folder, tmp_path / "plain" / folder.name)     # the plain log, against the unpatched project
    report = json.loads(_tracefix("--format", "json", "--root", str(plain), "-", input=log).stdout)
    (d,) = report["diagnoses"]
    assert d["id"] == exp["id"]
    assert _site(d["crash_site"]) == exp["crash_site"]
    assert d["fix_sites"] and _site(d["fix_sites"][0]) in {exp["fix_site"], *exp.get("fix_site_also", [])}
    assert not any("site-packages" in s["path"] for s in d["fix_sites"]), d["fix_sites"]
    assert d["patches"] and d["patches"][0]["applicability"] == "safe", d["patches"]

    (w,) = r["diagnoses"]
    if of_entry(exp["id"]).evidence:      # a family with a witness recorder
        assert w["evidence"] is not None, "the witness must explain the crash inside the framework's loop"
        assert witness_first(w["evidence"]) == exp["witness_site"], w["evidence"]
    assert _site(w["fix_sites"][0]) in {exp["fix_site"], *exp.get("fix_site_also", [])}
    assert r["verification"] == "verified", (r, run.stderr[-2000:])
    steps = re.search(r"verified: (\d+) optimizer steps", r["verification_detail"])
    assert steps and int(steps.group(1)) >= 2, r["verification_detail"]   # the framework's own steps, counted
    assert trained.search(after_crash(run.stderr)), run.stderr[-1500:]                   # and the program ran on to the end


def _frames(log):
    """(basename, line) of the log's frames in the project (not the framework's or torch's), and its last line."""
    frames = re.findall(r'File "([^"]+)", line (\d+)', log)
    user = [(p.rsplit("/", 1)[-1], int(n)) for p, n in frames if "site-packages" not in p]
    return user, log.strip().splitlines()[-1]


def _recorder():
    spec = importlib.util.spec_from_file_location("record_cuda_crash", REPO / "tests" / "frameworks" / "record_cuda_crash.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("folder", RECORDED, ids=[p.name for p in RECORDED])
def test_recorded_framework_program(folder, tmp_path):
    """A program whose error needs CUDA: its recorded log (tests/frameworks/record_cuda_crash.py,
    real frames through the real framework) is diagnosed against the project, the patch is applied,
    and the patched program trains on this CPU."""
    exp = tomllib.loads((folder / "expected.toml").read_text())
    log = (folder / "crash.log").read_text()
    # the log is still what the program gives (with its stand-in): same frames, same error
    assert _frames(_recorder().record(folder)) == _frames(log), "re-record: python tests/frameworks/record_cuda_crash.py"
    _assert_through_framework(log, exp)

    root = _copy(folder, tmp_path / folder.name)
    report = json.loads(_tracefix("--format", "json", "--root", str(root), "-", input=log).stdout)
    (d,) = report["diagnoses"]
    assert d["id"] == exp["id"]
    assert _site(d["crash_site"]) == exp["crash_site"]
    assert d["fix_sites"] and _site(d["fix_sites"][0]) == exp["fix_site"], d["fix_sites"]
    assert not any("site-packages" in s["path"] for s in d["fix_sites"]), d["fix_sites"]
    assert d["patches"] and d["patches"][0]["applicability"] == "safe", d["patches"]
    fixed = root / exp["fix_site"].split(":")[0]
    before = fixed.read_text()
    applied = _tracefix("--format", "json", "--apply", "--root", str(root), "-", input=log)
    assert applied.returncode == 0, applied.stderr
    assert fixed.read_text() != before, "the patch must change the fix site's file"
    trained = subprocess.run([sys.executable, "train.py"], cwd=root, capture_output=True, text=True, env=ENV,
                             timeout=300)
    assert trained.returncode == 0 and re.search(exp["trained"], trained.stdout, re.M), trained.stderr[-2000:]
