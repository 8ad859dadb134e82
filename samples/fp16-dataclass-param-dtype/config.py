"""Experiment configuration."""
from dataclasses import dataclass


@dataclass
class TrainConfig:
    vocab_size: int = 200
    embed_dim: int = 32
    hidden: int = 64
    num_classes: int = 3
    seq_len: int = 16
    batch_size: int = 8
    lr: float = 3e-4
    amp_dtype: str = "float16"
    param_dtype: str = "float16"
    device: str = "cpu"
    steps: int = 5
