import torch
import torch.nn as nn
class Adapter(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(d, dtype=torch.float16))  # FIX: param-dtype
