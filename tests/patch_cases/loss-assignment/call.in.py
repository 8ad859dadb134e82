import torch.nn.functional as F
def step(out, y):
    loss = F.mse_loss(out, y, reduction="none")  # FIX: loss-assignment
    loss.backward()
