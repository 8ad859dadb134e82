import torch
def f(a, b):
    c = torch.empty_like(a)
    c = torch.add(a, b)  # FIX: inplace-out
    return c.exp()
