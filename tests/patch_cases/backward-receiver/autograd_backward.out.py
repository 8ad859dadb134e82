import torch
def go(out):
    torch.autograd.backward(out.mean())  # FIX: backward-receiver
