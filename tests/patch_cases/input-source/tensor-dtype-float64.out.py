import torch

x = torch.tensor([[0.5, 1.5]], dtype=torch.float32)  # FIX: input-source
