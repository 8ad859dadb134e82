"""Every patch labelled ``safe`` trains: for every sample, apply each safe patch (``--apply --pick N``)
to a fresh copy, re-run ``python train.py`` and expect exit 0 with the loss printed.

``safe`` means: it compiles, the error is gone, and behaviour is what the user meant.  The runs are
shared (``safe_runs`` in tests/conftest.py: each made once, whichever xdist worker asks first); a
copy with the bytes that ``tracefix run --apply --verify`` verified counts that run.

The bf16 samples are recordings of a CUDA-only error (samples/README.md): on the CPU wheel their
scripts train without any patch, and an autocast for device 'cuda' is a no-op, so a re-run on CPU
proves nothing about them.  Their safe patches are applied and compiled here, not trained.
"""
import re

import pytest

from conftest import SAMPLE_LIST, sample_patches

IDS = [s.name for s in SAMPLE_LIST]


@pytest.mark.torch
@pytest.mark.parametrize("sample", SAMPLE_LIST, ids=IDS)
def test_every_safe_patch_trains(sample, safe_runs):
    for number, summary, applied, trained, _files in safe_runs[sample.name]:
        assert applied.returncode == 0, (number, summary, applied.stderr.decode())
        if sample.recorded:
            continue   # applied and compiled (above); training needs CUDA
        assert trained is not None and trained.returncode == 0, (number, summary, trained.stderr[-2000:])
        assert re.search(r"loss\D{0,20}\d", trained.stdout), (number, summary, trained.stdout)


def test_a_dtype_passed_to_the_factory_that_casts_is_one_chain_not_a_rival():
    """issue 22 item 7: load_model(..., torch_dtype=torch_dtype) hands the factory the dtype it casts
    to, so loading in float32 there fixes the error too: safe, not "unless it comes from here"."""
    sample = next(s for s in SAMPLE_LIST if s.name == "fp16-factory-torch-dtype-kwarg")
    patches = sample_patches(sample)
    at_call = [p for p in patches if "+++ b/train.py" in p["diff"] and "torch.float32" in p["diff"]]
    assert patches[0]["applicability"] == "safe" and "+++ b/models.py" in patches[0]["diff"]
    assert at_call and all(p["applicability"] == "safe" for p in at_call), at_call
    assert not any("less likely site" in p["reason"] for p in patches)
