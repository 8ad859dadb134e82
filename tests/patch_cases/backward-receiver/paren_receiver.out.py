import torch
def step(a, b):
    (a * b).mean().backward()  # FIX: backward-receiver
