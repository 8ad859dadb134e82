import torch

x = torch.randn(2, 3).t()
y = x.view(6)  # FIX: view-reshape
