import torch

w = torch.ones(3, requires_grad=True)
losses = []
for _ in range(2):
    loss = (w * 2).sum()
    loss.backward()
    losses.append(loss.item())  # FIX: numpy-append
