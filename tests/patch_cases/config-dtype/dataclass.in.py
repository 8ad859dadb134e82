from dataclasses import dataclass


@dataclass
class TrainConfig:
    amp_dtype: str = "float16"
    param_dtype: str = 'float16'  # FIX: config-dtype
    device: str = "cpu"
