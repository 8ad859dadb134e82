import torch

h = torch.zeros(4, 8)  # FIX: factory-device # WRITE: x.device
