"""Run settings (mirrors configs/base.yaml)."""

CONFIG = {
    "model": {"in_features": 12, "hidden": [64, 64], "out_features": 1},
    "optim": {"lr": 1e-3, "weight_decay": 0.0, "max_grad_norm": 1.0},
    "precision": "float16",
    "amp": True,
    "device": "cpu",
    "batch_size": 64,
    "steps": 5,
}
