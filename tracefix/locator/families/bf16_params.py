"""bf16-unscale: GradScaler met bfloat16 gradients (the scaler itself, or bf16 trainable parameters)."""
from tracefix.locator.dtype import HalfParams


def run(ctx) -> None:
    HalfParams(ctx, bf16=True).run()
