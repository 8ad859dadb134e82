import torch
torch.set_default_dtype(torch.float32)  # FIX: default-dtype
