"""What to say when a leaf-inplace fix site gets no automatic patch."""
from __future__ import annotations

from typing import Optional

from tracefix.records import FixSite


def explain(site: FixSite) -> Optional[str]:
    if site.kind.startswith("leaf-nograd"):
        return (f"{site.path}:{site.line}: run the in-place write under `with torch.no_grad():` (or decorate the "
                "update function with @torch.no_grad()). Do not rewrite it out of place (w = w - lr * w.grad): that "
                "makes a new tensor and the parameter never changes.")
    return None
