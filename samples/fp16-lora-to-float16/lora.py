"""A minimal LoRA implementation: y = W x + (alpha / r) * B A x."""
import math

import torch
import torch.nn as nn


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r=4, alpha=8):
        super().__init__()
        self.base = base
        self.base.requires_grad_(False)  # frozen pretrained weight
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


def inject_lora(model: nn.Module, target_names=("q_proj", "v_proj"), r=4):
    """Replace the named nn.Linear children with LoRA-wrapped versions."""
    for name, child in list(model.named_children()):
        if name in target_names and isinstance(child, nn.Linear):
            setattr(model, name, LoRALinear(child, r=r))
        else:
            inject_lora(child, target_names, r)
    return model
