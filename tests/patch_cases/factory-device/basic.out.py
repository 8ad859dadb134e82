import torch

h = torch.zeros(4, 8, device=x.device)  # FIX: factory-device # WRITE: x.device
