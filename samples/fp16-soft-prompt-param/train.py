"""Prompt-tune a frozen toy encoder for sentiment classification (fp16 autocast)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from prompt import SoftPrompt

VOCAB, DIM, SEQ, N_PROMPT = 120, 32, 10, 4


class FrozenEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.mix = nn.Sequential(nn.Linear(DIM, DIM), nn.GELU(), nn.Linear(DIM, DIM))
        self.classifier = nn.Linear(DIM, 2)

    def forward(self, embeds):
        return self.classifier(self.mix(embeds).mean(dim=1))


torch.manual_seed(0)
encoder = FrozenEncoder().requires_grad_(False)
soft_prompt = SoftPrompt(N_PROMPT, DIM)
optimizer = torch.optim.Adam(soft_prompt.parameters(), lr=1e-2)
scaler = torch.amp.GradScaler("cpu")

tokens = torch.randint(0, VOCAB, (16, SEQ))
labels = torch.randint(0, 2, (16,))
for step in range(5):
    with torch.autocast("cpu", dtype=torch.float16):
        logits = encoder(soft_prompt(encoder.embed(tokens)))
        loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    print(f"step {step} loss {loss.item():.4f}")
