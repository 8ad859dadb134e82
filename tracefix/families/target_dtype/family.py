"""target-dtype: a loss got labels (its target) of the wrong dtype; the fix is where they are built."""
from tracefix.families.api import Family

FAMILY = Family(
    name="target_dtype",
    entries=("target-dtype",),
    locate={"target-dtype": "run"},
    fix_kinds=("target-source", "target-source-unsure", "target-cast"),
    gate_words=("target dtype", "found dtype", "desired output type", "scalar type long", "not implemented for"),
    # one loss, one target: a label builder and a cast at the loss call are two ways to one fix
    rival_sites=False,
)
