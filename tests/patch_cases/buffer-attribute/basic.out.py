import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.ones(4), persistent=False)  # FIX: buffer-attribute
