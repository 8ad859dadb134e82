"""fp16-unscale / bf16-unscale: a GradScaler met half-precision gradients (half trainable parameters)."""
from tracefix.families.api import Family

_CASTS = ("model-cast", "torch-dtype-fp16", "default-dtype", "param-dtype")

FAMILY = Family(
    name="half_unscale",
    entries=("fp16-unscale", "bf16-unscale"),
    locate={"fp16-params": "run_fp16", "bf16-params": "run_bf16"},
    fix_kinds=_CASTS + ("config-dtype", "grad-scaler"),
    gate_words=("unscal", "fp16", "float16", "bfloat", "non_finite"),
    evidence={"half-params": frozenset(_CASTS)},
    # config-dtype is not a rival cast: it is the value a cast reads, so fixing either fixes both
    rival_causes={"cast": _CASTS},
)
