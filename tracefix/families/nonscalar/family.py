"""nonscalar-backward: backward() or autograd.grad() on a tensor that is not a scalar."""
from tracefix.families.api import Family

FAMILY = Family(
    name="nonscalar",
    entries=("nonscalar-backward",),
    locate={"nonscalar": "run"},
    fix_kinds=("backward-receiver", "loss-assignment", "per-sample-return", "criterion-reduction", "autograd-grad"),
    gate_words=("grad", "scalar"),
    evidence={"nonscalar-loss": frozenset()},
    # links of one chain (the criterion, the loss it makes, its backward): a fix at any of them
    # removes the error, so an alternative's own label stands
    rival_sites=False,
    sequels=(
        r"a Tensor with \d+ elements cannot be converted to Scalar",        # loss.item()
        r"only one element tensors can be converted to Python scalars",     # float(loss)
        r"unsupported format string passed to Tensor\.__format__",          # f"{loss:.4f}"
        r"Boolean value of Tensor with more than one value is ambiguous",   # if loss < best
    ),
)
