"""What to say when a no-grad-fn fix site gets no automatic patch."""
from __future__ import annotations

from typing import Optional

from tracefix.records import FixSite


def explain(site: FixSite) -> Optional[str]:
    if site.kind == "frozen-params":
        return (f"{site.path}:{site.line}: leave trainable the parameters the loss should update (freeze all but "
                "the head or the adapter, not everything), and pass only those to the optimizer. Making the loss "
                "require grad (loss.requires_grad_()) silences the error and trains nothing.")
    if site.kind.startswith("nograd-"):
        return (f"{site.path}:{site.line}: compute the forward and the loss outside the no_grad scope (keep it "
                "around evaluation, metrics and parameter updates only).")
    return None
