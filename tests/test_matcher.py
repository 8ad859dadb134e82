"""Matcher: exact patterns, fuzzy fallback, confidence, and near misses (negative cases first)."""
import pytest

from tracefix.knowledge import load_entries
from tracefix.matcher import BareMessage, match
from tracefix.records import Frame, Traceback

ENTRIES = load_entries()


def diag(message, exc_type="RuntimeError", frames=()):
    return match(Traceback(exc_type=exc_type, message=message, frames=tuple(frames)), ENTRIES)


NEAR_MISSES = [
    # autograd.grad with an input that does not require grad: not a loss without history
    "One of the differentiated Tensors does not require grad",
    # a look-alike of the backward-twice message, not it
    "Trying to backward through a graph that was created with torch.compile's inference mode",
    # an in-place detach of a view, not an in-place write to a leaf
    "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel (DDP) for training",
    "Output 0 of SplitBackward0 is a view and is being modified inplace. This view is the output of a function that returns multiple views. Such functions do not allow the output views to be modified inplace. You should replace the inplace operation by an out-of-place one.",
    "Output 0 of Split is a view and is being modified inplace. This view is the output of a function that returns multiple views.",
    "Mismatch in shape: grad_output[0] has a shape of torch.Size([8, 5]) and output[0] has a shape of torch.Size([]).",
    "unscale_() has already been called on this optimizer since the last update().",
    "expected scalar type Half but found Float",
    '"addmm_impl_cpu_" not implemented for \'Half\'',
    '"triu_tril_cuda_template" not implemented for \'BFloat16\'',
    "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity)",
    "Function 'SolveBackward' returned nan values in its 0th output.",
    # near misses of the ten families of issue 20: shape, channel and class-index errors
    "shape '[-1, 2048]' is invalid for input of size 1000",
    "shapes (8,256) and (128,10) not aligned: 256 (dim 1) != 128 (dim 0)",
    "Given groups=1, weight of size [16, 3, 3, 3], expected input[8, 1, 28, 28] to have 3 channels, but got 1 channels instead",
    "Target 3 is out of bounds.",
    "Expected input batch_size (4) to match target batch_size (1).",
    "CUDA error: device-side assert triggered",
]


@pytest.mark.parametrize("message", NEAR_MISSES)
def test_near_misses_do_not_match(message):
    assert diag(message) is None


def test_gradscaler_frame_does_not_make_unscale():
    frames = [Frame("/x/torch/amp/grad_scaler.py", 473, "step", "self.unscale_(optimizer)")]
    d = diag("grad can be implicitly created only for scalar outputs", frames=frames)
    assert d.entry_id == "nonscalar-backward"


@pytest.mark.parametrize("message,exc_type,entry_id", [
    ("grad can be implicitly created only for scalar outputs", "RuntimeError", "nonscalar-backward"),
    ("grad can be implicitly created only for real scalar outputs but got torch.complex64", "RuntimeError", "nonscalar-backward"),
    ("one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor [8, 4]], which is output 0 of Relu, is at version 1; expected version 0 instead.", "RuntimeError", "inplace-modification"),
    ("Attempting to unscale FP16 gradients.", "ValueError", "fp16-unscale"),
    ('"_amp_foreach_non_finite_check_and_unscale_cuda" not implemented for \'BFloat16\'', "NotImplementedError", "bf16-unscale"),
    ('"_amp_foreach_non_finite_check_and_unscale_cuda" not implemented for \'BFloat16\'', "RuntimeError", "bf16-unscale"),
])
def test_exact_matches_are_confident(message, exc_type, entry_id):
    d = diag(message, exc_type)
    assert d.entry_id == entry_id and d.confidence == 1.0


def test_type_missing_or_wrong_lowers_confidence():
    assert diag("Attempting to unscale FP16 gradients.", None).confidence < 1.0
    assert diag("Attempting to unscale FP16 gradients.", "RuntimeError").confidence < diag(
        "Attempting to unscale FP16 gradients.", None).confidence


def test_fuzzy_retyped_message():
    d = diag("grad can be implicitely created only for scalar output")
    assert d is not None and d.entry_id == "nonscalar-backward"
    assert 0.5 < d.confidence < 1.0


def test_captured_fields():
    d = diag("one of the variables needed for gradient computation has been modified by an inplace operation: "
             "[torch.cuda.FloatTensor [128, 64]], which is output 0 of ReluBackward0, is at version 3; expected version 2 instead.")
    f = dict(d.fields)
    assert f["node"] == "ReluBackward0" and f["version"] == "3" and f["expected_version"] == "2"


def test_bare_predicate():
    bare = BareMessage(ENTRIES)
    assert bare("so I get: grad can be implicitly created only for scalar outputs, help")
    assert not bare("step 10 loss 0.123 grad_norm 1.2")
    assert not bare("Epoch 1: 100%|##########| 10/10")
