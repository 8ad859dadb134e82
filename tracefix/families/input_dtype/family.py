"""input-dtype: data of another dtype (float64 from numpy, ints) than the model's weights reached a
layer; the fix is where the data enters torch, never ``model.double()``."""
from tracefix.families.api import Family

FAMILY = Family(
    name="input_dtype",
    entries=("input-dtype",),
    locate={"input-dtype": "run"},
    fix_kinds=("input-source", "input-source-unsure", "input-cast"),
    gate_words=("same dtype", "should be the same", "expected scalar type", "does not match weight dtype",
                "mixed dtype"),
    rival_sites=False,
)
