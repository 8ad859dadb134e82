"""Programs trained through a real framework (tests/frameworks): one `tracefix run --apply --verify`
each.  Its crash, as the run passed it through, is diagnosed as a plain log (the user's crash site
and fix site, never a frame in site-packages); the run itself shows the witness explaining the
crash from inside the framework's loop and the patched program training."""
import importlib.util
import json
import re
import sys

import pytest

from conftest import REPO, after_crash, crash_log
from test_programs import _copy, _tracefix
from tracefix.families import of_entry

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

FOLDERS = sorted(p.parent for p in (REPO / "tests" / "frameworks").glob("*/expected.toml"))
pytestmark = pytest.mark.torch


def _site(site):
    return f"{site['path']}:{site['line']}"


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
    frames = re.findall(r'File "([^"]+)", line \d+', log)
    framework = [f for f in frames if re.search(rf"site-packages[/\\]{exp['framework']}[/\\]", f)]
    assert len(framework) >= 3, "the traceback must go through the framework's own frames"

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
        first = w["evidence"]["sites"][0]
        assert f"{first['path'].replace(chr(92), '/').rsplit('/', 1)[-1]}:{first['line']}" == exp["witness_site"], \
            w["evidence"]
    assert _site(w["fix_sites"][0]) in {exp["fix_site"], *exp.get("fix_site_also", [])}
    assert r["verification"] == "verified", (r, run.stderr[-2000:])
    steps = re.search(r"verified: (\d+) optimizer steps", r["verification_detail"])
    assert steps and int(steps.group(1)) >= 2, r["verification_detail"]   # the framework's own steps, counted
    assert trained.search(after_crash(run.stderr)), run.stderr[-1500:]                   # and the program ran on to the end
