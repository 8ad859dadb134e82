"""Soft prompt tuning (Lester et al., 2021): learn a few virtual token embeddings."""
import torch
import torch.nn as nn


class SoftPrompt(nn.Module):
    def __init__(self, n_tokens, dim, init_std=0.02):
        super().__init__()
        self.n_tokens = n_tokens
        self.embedding = nn.Parameter(torch.randn(n_tokens, dim, dtype=torch.float16) * init_std)

    def forward(self, token_embeds):
        prompt = self.embedding.unsqueeze(0).expand(token_embeds.shape[0], -1, -1)
        return torch.cat([prompt, token_embeds], dim=1)
