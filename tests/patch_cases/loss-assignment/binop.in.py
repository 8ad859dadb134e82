import torch
def step(crit, out, y, w):
    loss = crit(out, y) * w  # FIX: loss-assignment
    loss.backward()
