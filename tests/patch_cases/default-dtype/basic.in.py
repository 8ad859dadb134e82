import torch
torch.set_default_dtype(torch.half)  # FIX: default-dtype
