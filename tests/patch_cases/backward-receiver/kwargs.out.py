import torch
def step(out, y):
    (out - y).pow(2).mean().backward(retain_graph=True)  # FIX: backward-receiver
