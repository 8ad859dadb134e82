"""view-contiguous: ``.view()`` on a tensor whose strides cannot take that shape (after a
transpose, permute or expand); the fix is the ``.view`` call."""
from tracefix.families.api import Family

FAMILY = Family(
    name="view_contiguous",
    entries=("view-contiguous",),
    locate={"view-contiguous": "run"},
    fix_kinds=("view-reshape",),
    gate_words=("view size is not compatible",),
)
