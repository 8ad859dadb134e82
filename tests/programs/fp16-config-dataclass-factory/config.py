"""Run configuration: one dataclass filled from the command line, and the precision names it accepts."""
from dataclasses import dataclass, fields
from typing import Optional

import torch

# precision name -> the dtype autocast computes in (and the GradScaler is needed for "fp16")
DTYPES = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


@dataclass
class TrainConfig:
    train_file: str = "data/train.csv"
    validation_file: str = "data/validation.csv"
    max_length: int = 32
    pad_to_max_length: bool = False
    per_device_train_batch_size: int = 8
    per_device_eval_batch_size: int = 16
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    num_train_epochs: int = 2
    max_train_steps: Optional[int] = None
    gradient_accumulation_steps: int = 1
    num_warmup_steps: int = 2
    max_grad_norm: float = 1.0
    output_dir: Optional[str] = "out"
    seed: int = 42
    precision: str = "fp16"
    # model
    hidden_size: int = 32
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 64
    hidden_dropout_prob: float = 0.1

    @classmethod
    def from_args(cls, args):
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)})

    @property
    def autocast_dtype(self):
        return DTYPES[self.precision]

    @property
    def use_fp16(self):
        return self.precision == "fp16"
