import torch

y = torch.tensor([0.0, 2.0, 1.0])  # FIX: target-source-unsure
