"""fp16-unscale / bf16-unscale: a GradScaler met half-precision gradients (half trainable parameters)."""
