"""no-grad-fn: ``backward()`` on a value autograd never recorded (computed under ``no_grad``, or
cut off from the parameters by ``.detach()``); the fix is the scope or the cut, never
``loss.requires_grad_()``."""
from tracefix.families.api import Family

FAMILY = Family(
    name="no_grad_fn",
    entries=("no-grad-fn",),
    locate={"no-grad-fn": "run"},
    fix_kinds=("nograd-block", "nograd-block-mixed", "nograd-decorator", "nograd-decorator-shared",
               "detach-in-loss", "reentrant-checkpoint", "frozen-params"),
    gate_words=("does not require grad", "grad_fn"),
)
