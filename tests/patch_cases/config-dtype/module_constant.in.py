import torch

PARAM_DTYPE = torch.bfloat16  # FIX: config-dtype
