import torch.nn as nn


def clip_activations(module, inputs, output):
    output = output.clamp(-1.0, 1.0)  # FIX: inplace-method
    return output


def build(width):
    net = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 1))
    net[0].register_forward_hook(clip_activations)
    return net
