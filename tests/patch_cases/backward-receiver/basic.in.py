import torch

def step(model, x, y, opt):
    out = model(x)
    loss = (out - y) ** 2  # per-element loss
    loss.backward()  # FIX: backward-receiver
    opt.step()
