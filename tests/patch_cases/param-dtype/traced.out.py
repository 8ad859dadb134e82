import torch
import torch.nn as nn
from config import PARAM_DTYPE


class Gate(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.g = nn.Parameter(torch.ones(d, dtype=torch.float32))  # FIX: param-dtype
