import torch

x = torch.randn(4, 3).double()  # FIX: input-source
