import torch as th


def update(params, lr):  # FIX: leaf-nograd-def
    for p in params:
        p -= lr * p.grad
