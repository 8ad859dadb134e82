import torch
def go(out):
    torch.autograd.backward(out)  # FIX: backward-receiver
