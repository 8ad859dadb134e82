import torch

state = torch.load("ckpt.pt", weights_only=True, map_location="cpu")  # FIX: load-map-location
