import torch

y = torch.tensor([0.0, 2.0, 1.0], dtype=torch.long)  # FIX: target-source-unsure
