import torch.nn.functional as F
def step(out, y):
    loss = F.mse_loss(out, y, reduction="none").mean()  # FIX: loss-assignment
    loss.backward()
