import torch
model = model.to(device=dev)  # FIX: model-cast
