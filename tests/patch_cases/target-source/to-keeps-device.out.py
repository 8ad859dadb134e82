import torch

y = torch.zeros(4).to("cpu", dtype=torch.long)  # FIX: target-source
