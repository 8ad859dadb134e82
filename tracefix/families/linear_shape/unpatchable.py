"""What to say when a linear-shape fix site gets no automatic patch."""
from __future__ import annotations

from typing import Optional

from tracefix.records import FixSite


def explain(site: FixSite) -> Optional[str]:
    if site.kind == "linear-in-features":
        return (f"{site.path}:{site.line} ({site.code.strip()}): set in_features to the size its input has "
                "(the first number after 'x' in the message), where it is chosen: when a caller passes it to a "
                "layer factory, change it at that call, not in the factory, which builds other layers too.")
    if site.kind == "flatten-batch":
        return (f"{site.path}:{site.line}: flatten from dimension 1 so the batch stays its own dimension "
                "(torch.flatten(x, 1), x.view(x.size(0), -1)).")
    return None
