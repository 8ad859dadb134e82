import torch
model = model.to(device=dev, dtype=torch.float16)  # FIX: model-cast
