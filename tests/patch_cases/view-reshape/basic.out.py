import torch

x = torch.randn(2, 3).t()
y = x.reshape(6)  # FIX: view-reshape
