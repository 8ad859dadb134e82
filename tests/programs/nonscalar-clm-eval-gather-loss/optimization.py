"""get_scheduler(): the learning-rate schedules of transformers.optimization, as LambdaLR."""
import math

from torch.optim.lr_scheduler import LambdaLR

SCHEDULER_TYPES = ["linear", "cosine", "constant", "constant_with_warmup"]


def get_scheduler(name, optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if name == "constant":
            return 1.0
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        if name == "constant_with_warmup":
            return 1.0
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        if name == "cosine":
            return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
        return max(0.0, 1.0 - progress)  # linear

    return LambdaLR(optimizer, lr_lambda)
