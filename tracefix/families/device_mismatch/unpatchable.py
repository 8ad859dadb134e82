"""What to say when a device-mismatch fix site gets no automatic patch."""
from __future__ import annotations

from typing import Optional

from tracefix.records import FixSite


def explain(site: FixSite) -> Optional[str]:
    if site.kind == "model-to-device":
        return (f"{site.path}:{site.line}: move the model to the device its inputs are on (`.to(device)` once the "
                "device is chosen), before the optimizer is built from its parameters.")
    if site.kind in ("to-device-input", "factory-device"):
        return (f"{site.path}:{site.line}: move the tensor to the model's device (`.to(device)`, or "
                "`device=x.device` where it is made).")
    return None
