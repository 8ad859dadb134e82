import torch

y = torch.zeros(4).to("cpu", dtype=torch.float32)  # FIX: target-source
