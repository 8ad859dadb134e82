import torch

x = torch.randn(4, 3).float()  # FIX: input-source
