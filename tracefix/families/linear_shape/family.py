"""linear-shape: an ``nn.Linear`` got inputs whose last dimension is not its ``in_features``."""
from tracefix.families.api import Family

FAMILY = Family(
    name="linear_shape",
    entries=("linear-shape",),
    locate={"linear-shape": "run"},
    fix_kinds=("linear-in-features", "factory-in-features", "flatten-batch"),
    gate_words=("mat1", "mat2", "m1:", "multiplied"),
    # the witness names the Linear whose forward raised: another Linear is contradicted, while a
    # flatten that folded the batch is the reason behind that layer's input
    evidence={"linear-shape": frozenset({"linear-in-features"})},
)
