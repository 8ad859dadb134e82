import torch

with torch.no_grad(), open("log.txt", "w") as f:  # FIX: nograd-block
    loss = torch.ones(2).sum()
