import torch

w = torch.ones(2, requires_grad=True)
with torch.inference_mode():  # FIX: nograd-block-mixed
    loss = (w * 2).sum()
    print("ema")
