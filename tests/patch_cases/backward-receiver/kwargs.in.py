import torch
def step(out, y):
    (out - y).pow(2).backward(retain_graph=True)  # FIX: backward-receiver
