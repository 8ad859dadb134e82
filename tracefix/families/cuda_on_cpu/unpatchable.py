"""What to say when a cuda-on-cpu fix site gets no automatic patch."""
from __future__ import annotations

from typing import Optional

from tracefix.records import FixSite


def explain(site: FixSite) -> Optional[str]:
    if site.kind == "cuda-call":
        return (f"{site.path}:{site.line}: choose the device once, "
                '`device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`, and move with '
                "`.to(device)` instead of `.cuda()` (everywhere the program calls it).")
    return None
