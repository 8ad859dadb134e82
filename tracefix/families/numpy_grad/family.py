"""numpy-grad: ``.numpy()`` (or numpy itself, through ``__array__``) on a live or GPU tensor."""
from tracefix.families.api import Family

FAMILY = Family(
    name="numpy_grad",
    entries=("numpy-grad",),
    locate={"numpy-grad": "run"},
    fix_kinds=("numpy-call", "numpy-append", "numpy-arg"),
    gate_words=("numpy", "requires grad", "device type tensor", "cuda tensor"),
)
