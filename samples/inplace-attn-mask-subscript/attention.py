"""Single-head self-attention block with key padding mask."""
import math

import torch
import torch.nn as nn


class SelfAttentionBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.scale = 1.0 / math.sqrt(dim)

    def forward(self, x, key_padding_mask):
        # x: [batch, seq, dim]; key_padding_mask: [batch, seq], True = padding
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        scores = (q @ k.transpose(-2, -1)) * self.scale
        attn = scores.softmax(dim=-1)
        # padded keys must not receive any attention
        attn[key_padding_mask.unsqueeze(1).expand_as(attn)] = 0.0
        out = attn @ v
        return x + self.proj(out)
