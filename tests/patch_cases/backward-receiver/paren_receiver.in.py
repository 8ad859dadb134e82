import torch
def step(a, b):
    (a * b).backward()  # FIX: backward-receiver
