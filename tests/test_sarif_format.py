"""--format sarif: SARIF 2.1.0, valid against the published schema (tests/schemas), a result per
diagnosis at its crash site with the fix sites related, and fixes that rebuild the patched text."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from conftest import SAMPLES, run_tracefix

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))


def _sarif(sample, *extra):
    proc = run_tracefix("--format", "sarif", "--root", sample, *extra, stdin=(sample / "crash.log").read_bytes())
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


@pytest.mark.parametrize("name", ["target-dtype-getitem-bce", "nonscalar-token-ce-none", "device-mismatch-batch-not-moved"])
def test_the_report_is_valid_sarif(name):
    report = _sarif(SAMPLES / name)
    jsonschema.Draft4Validator(SCHEMA).validate(report)
    (run,) = report["runs"]
    (result,) = run["results"]
    assert result["ruleId"] in {r["id"] for r in run["tool"]["driver"]["rules"]}
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"].startswith("file://")


def test_the_fix_rebuilds_the_patched_file_and_the_sites_are_located():
    sample = SAMPLES / "target-dtype-getitem-bce"
    (result,) = _sarif(sample)["runs"][0]["results"]
    crash = result["locations"][0]["physicalLocation"]
    assert (crash["artifactLocation"]["uri"], crash["region"]["startLine"]) == ("train.py", 28)
    fix_site = result["relatedLocations"][0]
    assert (fix_site["physicalLocation"]["artifactLocation"]["uri"], fix_site["physicalLocation"]["region"]["startLine"]) \
        == ("dataset.py", 23)
    assert fix_site["message"]["text"].startswith("fix here: ")
    fix = result["fixes"][0]
    assert fix["description"]["text"].endswith("(safe)")
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "dataset.py"
    text = (sample / "dataset.py").read_text(encoding="utf-8")
    for rep in sorted(change["replacements"], key=lambda r: -r["deletedRegion"]["charOffset"]):
        start, length = rep["deletedRegion"]["charOffset"], rep["deletedRegion"]["charLength"]
        text = text[:start] + rep["insertedContent"]["text"] + text[start + length:]
    assert "return self.tokens[i], torch.tensor(self.labels[i], dtype=torch.float32)\n" in text
    assert text.count("\n") == (sample / "dataset.py").read_text(encoding="utf-8").count("\n")


def test_no_known_error_is_an_empty_run():
    proc = run_tracefix("--format", "sarif", stdin=b"Traceback (most recent call last):\nValueError: nope\n")
    report = json.loads(proc.stdout)
    jsonschema.Draft4Validator(SCHEMA).validate(report)
    assert report["runs"][0]["results"] == []
