"""Train a one-block transformer to classify variable-length sequences."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention import SelfAttentionBlock

torch.manual_seed(0)
DIM, SEQ, BATCH = 16, 10, 8


class TinyTransformer(nn.Module):
    def __init__(self, vocab=30, num_classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, DIM, padding_idx=0)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, DIM))
        self.block = SelfAttentionBlock(DIM)
        self.head = nn.Linear(DIM, num_classes)

    def forward(self, tokens):
        pad = tokens.eq(0)
        h = self.block(self.embed(tokens) + self.pos, pad)
        keep = (~pad).unsqueeze(-1).float()
        return self.head((h * keep).sum(1) / keep.sum(1))  # masked mean-pool


# random sequences, padded with 0 at the end
lengths = torch.randint(3, SEQ + 1, (BATCH,))
tokens = torch.randint(1, 30, (BATCH, SEQ))
tokens = tokens.masked_fill(torch.arange(SEQ).unsqueeze(0) >= lengths.unsqueeze(1), 0)
labels = (lengths > SEQ // 2).long()

model = TinyTransformer()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(5):
    opt.zero_grad()
    loss = F.cross_entropy(model(tokens), labels)
    loss.backward()
    opt.step()
    print(f"step={step} loss={loss.item():.4f}")
