import torch as th


@th.no_grad()
def update(params, lr):  # FIX: leaf-nograd-def
    for p in params:
        p -= lr * p.grad
