"""get_scheduler() in the manner of transformers.optimization: LambdaLR schedules with warmup."""
import math

from torch.optim.lr_scheduler import LambdaLR

SCHEDULER_TYPES = ["linear", "cosine", "constant", "constant_with_warmup"]


def get_scheduler(name, optimizer, num_warmup_steps=0, num_training_steps=None):
    def lr_lambda(current_step):
        if name == "constant":
            return 1.0
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        if name == "constant_with_warmup":
            return 1.0
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        if name == "linear":
            return max(0.0, 1.0 - progress)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    if name not in SCHEDULER_TYPES:
        raise ValueError(f"unknown scheduler {name!r}, choose one of {SCHEDULER_TYPES}")
    return LambdaLR(optimizer, lr_lambda)
