"""Every patch labelled ``safe`` trains: for every sample, apply each safe patch (``--apply --pick N``)
to a fresh copy, re-run ``python train.py`` and expect exit 0 with the loss printed.

``safe`` means: it compiles, the error is gone, and behaviour is what the user meant.  The runs are
shared by one fixture and made two at a time, as tests/conftest.py does for the samples.

The bf16 samples are recordings of a CUDA-only error (samples/README.md): on the CPU wheel their
scripts train without any patch, and an autocast for device 'cuda' is a no-op, so a re-run on CPU
proves nothing about them.  Their safe patches are applied and compiled here, not trained.
"""
import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import SAMPLE_LIST, copy_sample, run_script, run_tracefix

IDS = [s.name for s in SAMPLE_LIST]


def _patches(sample):
    proc = run_tracefix("--format", "json", "--root", sample.dir, stdin=sample.log.read_bytes())
    assert proc.returncode == 0, proc.stderr.decode()
    (diag,) = json.loads(proc.stdout)["diagnoses"]
    return diag["patches"]


def _apply_and_train(job):
    sample, number, dest = job
    root = copy_sample(sample, dest)
    applied = run_tracefix("--format", "plain", "--apply", "--pick", number, "--root", root,
                           stdin=sample.log.read_bytes())
    if applied.returncode != 0 or sample.recorded:
        for path in root.rglob("*.py"):
            compile(path.read_text(encoding="utf-8"), str(path), "exec")
        return applied, None
    return applied, run_script(root)


@pytest.fixture(scope="module")
def safe_runs(tmp_path_factory):
    """sample name -> [(patch number, summary, tracefix --apply result, train.py result)]"""
    jobs, labels = [], []
    for sample in SAMPLE_LIST:
        for number, patch in enumerate(_patches(sample), 1):
            if patch["applicability"] == "safe":
                jobs.append((sample, number, tmp_path_factory.mktemp(f"{sample.name}-{number}")))
                labels.append((sample.name, number, patch["summary"]))
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(_apply_and_train, jobs))
    out = {s.name: [] for s in SAMPLE_LIST}
    for (name, number, summary), (applied, trained) in zip(labels, results):
        out[name].append((number, summary, applied, trained))
    assert sum(map(len, out.values())) >= len(SAMPLE_LIST), "most samples have a safe patch"
    return out


@pytest.mark.torch
@pytest.mark.parametrize("sample", SAMPLE_LIST, ids=IDS)
def test_every_safe_patch_trains(sample, safe_runs):
    for number, summary, applied, trained in safe_runs[sample.name]:
        assert applied.returncode == 0, (number, summary, applied.stderr.decode())
        if sample.recorded:
            continue   # applied and compiled (above); training needs CUDA
        assert trained is not None and trained.returncode == 0, (number, summary, trained.stderr[-2000:])
        assert re.search(r"loss\D{0,20}\d", trained.stdout), (number, summary, trained.stdout)


def test_a_dtype_passed_to_the_factory_that_casts_is_one_chain_not_a_rival():
    """issue 22 item 7: load_model(..., torch_dtype=torch_dtype) hands the factory the dtype it casts
    to, so loading in float32 there fixes the error too: safe, not "unless it comes from here"."""
    sample = next(s for s in SAMPLE_LIST if s.name == "fp16-factory-torch-dtype-kwarg")
    patches = _patches(sample)
    at_call = [p for p in patches if "+++ b/train.py" in p["diff"] and "torch.float32" in p["diff"]]
    assert patches[0]["applicability"] == "safe" and "+++ b/models.py" in patches[0]["diff"]
    assert at_call and all(p["applicability"] == "safe" for p in at_call), at_call
    assert not any("less likely site" in p["reason"] for p in patches)
