import torch
def f(a, b, c):
    c = torch.mul(a, b, )  # FIX: inplace-out
    return c
