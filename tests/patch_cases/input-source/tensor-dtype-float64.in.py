import torch

x = torch.tensor([[0.5, 1.5]], dtype=torch.float64)  # FIX: input-source
