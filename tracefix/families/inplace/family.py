"""inplace-modification: a tensor autograd saved was modified in place before backward()."""
from tracefix.families.api import ANY, Family

FAMILY = Family(
    name="inplace",
    entries=("inplace-modification",),
    locate={"inplace": "run"},
    fix_kinds=("inplace-kwarg", "inplace-subscript", "inplace-method", "inplace-augassign", "inplace-out",
               "optimizer-step-between", "param-update-before-backward", "param-step-before-backward"),
    gate_words=("inplace", "in-place"),
    evidence={"inplace-write": ANY, "param-update": ANY},
    rival_causes={"write": ("inplace-", "optimizer-step-between", "param-update-before-backward",
                            "param-step-before-backward")},
    # the forward trace names the operation whose saved input was overwritten
    anomaly_helps=True,
)
