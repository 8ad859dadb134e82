"""--format github: GitHub Actions workflow commands, an ::error at the crash site and a ::warning
at each fix site carrying the recommended patch; messages and properties escaped as GitHub reads them."""
from __future__ import annotations

import io
import re

from conftest import SAMPLES, run_tracefix
from tracefix.records import Diagnosis, FixSite, Patch, Site, Traceback
from tracefix.render import render_github

COMMAND = re.compile(r"^::(error|warning) ((?:\w+=[^,:]*)(?:,\w+=[^,:]*)*)::(.*)$")


def _props(line):
    m = COMMAND.match(line)
    assert m, line
    return m.group(1), dict(p.split("=", 1) for p in m.group(2).split(",")), m.group(3)


def test_a_sample_log_gives_the_crash_site_and_the_fix_site_with_its_patch():
    sample = SAMPLES / "target-dtype-getitem-bce"
    proc = run_tracefix("--format", "github", "--root", sample, stdin=(sample / "crash.log").read_bytes(), cwd=sample)
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    kind, props, message = _props(lines[0])
    assert (kind, props["file"], props["line"]) == ("error", "train.py", "28")
    assert props["title"] == "tracefix target-dtype%3A crashed here"
    assert message.startswith("RuntimeError: result type Float can't be cast") and "(fix: dataset.py:23)" in message
    kind, props, message = _props(lines[1])
    assert (kind, props["file"], props["line"]) == ("warning", "dataset.py", "23")
    assert "%0A%0APatch (safe): Build the labels as Float" in message
    assert "%0A+        return self.tokens[i], torch.tensor(self.labels[i], dtype=torch.float32)" in message
    assert all(COMMAND.match(ln) for ln in lines)


def test_messages_and_properties_are_escaped():
    d = Diagnosis(entry_id="x-id", title="t", confidence=1.0,
                  traceback=Traceback(exc_type="RuntimeError", message="50% done\r\nsecond line"),
                  crash_site=Site(path="dir,a/b:c.py", line=3, code="", col=0),
                  fix_sites=(FixSite(path="f.py", line=1, code="", col=4, reason="100% sure, really\nyes", kind="k"),),
                  patches=(Patch(summary="s", applicability="unsafe", reason="r", diff="-a\n+b"),))
    out = io.StringIO()
    render_github(out, [d])
    error, warning = out.getvalue().splitlines()
    kind, props, message = _props(error)
    assert props["file"] == "dir%2Ca/b%3Ac.py" and props["col"] == "1"
    assert message == "RuntimeError: 50%25 done (fix: f.py:1)"
    kind, props, message = _props(warning)
    assert props["col"] == "5"
    assert message == "100%25 sure, really%0Ayes%0A%0APatch (unsafe): s%0A-a%0A+b%0Aunsafe because: r"
