import torch.nn as nn


def block(d_in, d_out):
    return nn.Sequential(nn.Linear(d_in, d_out), nn.ReLU())


# FIELDS: rows=4 got=16 expected=32 out=4
b = block(
    16,  # FIX: factory-in-features # WRITE: 16
    4,
)
