import torch
def f(a, b):
    c = torch.empty_like(a)
    torch.add(a, b, out=c)  # FIX: inplace-out
    return c.exp()
