import torch.nn as nn


def mlp_stage(width, inplace):
    return nn.Sequential(
        nn.Linear(width, width),
        nn.Sigmoid(),
        nn.Hardtanh(0.0, 0.9, inplace=inplace),  # FIX: inplace-kwarg
    )
