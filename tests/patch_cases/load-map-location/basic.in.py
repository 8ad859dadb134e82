import torch

state = torch.load("ckpt.pt", weights_only=True)  # FIX: load-map-location
