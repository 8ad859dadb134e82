"""leaf-inplace: an in-place write to a leaf tensor that requires grad (a parameter), with
gradients on: a hand-written update or an initialisation.  The fix runs it under ``no_grad``."""
from tracefix.families.api import Family

FAMILY = Family(
    name="leaf_inplace",
    entries=("leaf-inplace",),
    locate={"leaf-inplace": "run"},
    fix_kinds=("leaf-nograd-def", "leaf-nograd-block"),
    gate_words=("leaf variable", "in-place operation"),
)
