import torch

PARAM_DTYPE = torch.float32  # FIX: config-dtype
