"""fp16-unscale: GradScaler met float16 gradients, because trainable parameters are float16."""
from tracefix.locator.dtype import HalfParams


def run(ctx) -> None:
    HalfParams(ctx, bf16=False).run()
