"""What to say when an in-place fix site gets no automatic patch."""
from __future__ import annotations

from typing import Optional

from tracefix.records import FixSite


def explain(site: FixSite) -> Optional[str]:
    """Why an in-place fix site gets no automatic patch; None: the generic text will do."""
    if site.kind == "optimizer-step-between":
        return (f"{site.path}:{site.line} updates the parameters in place ({site.code.strip() or 'optimizer.step()'}) "
                "between the forward pass and backward(). Recompute that forward after the step (in a GAN: "
                "run D on the fake batch again after the discriminator's step); moving the step after that "
                "backward() is right only if its optimizer should also get that backward's gradients. "
                "tracefix rewrites this only when it can prove the result unchanged (the next "
                "backward() and the other optimizer's step() in the same block, both optimizers built in this file "
                "over separate models, and nothing in between touching the stepped model or its gradients); "
                "here it could not.")
    if site.kind in ("param-update-before-backward", "param-step-before-backward"):
        return (f"{site.path}:{site.line} ({site.code.strip()}) changes parameters in place between the forward "
                "pass and backward(); move it below that backward(). tracefix moves it only when the two are in "
                "the same block and nothing in between runs a model, reads what it changes, or zeroes the "
                "gradients an optimizer step in it would use; here it could not prove that.")
    what = {"inplace-method": "in-place call", "inplace-augassign": "in-place update",
            "inplace-subscript": "indexed write", "inplace-out": "out= call", "inplace-kwarg": "inplace= argument"}
    if site.kind in what:
        return (f"{site.path}:{site.line}: tracefix cannot rewrite this {what[site.kind]} safely; change it "
                "by hand (an out-of-place form, or a .clone() of the tensor before it is written).")
    return None
