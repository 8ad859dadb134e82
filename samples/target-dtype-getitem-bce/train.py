"""Bag-of-embeddings sentiment classifier with a single logit and BCEWithLogitsLoss."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from dataset import VOCAB, ReviewDataset


class BagClassifier(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.head = nn.Linear(dim, 1)

    def forward(self, tokens):
        return self.head(self.embed(tokens)).squeeze(1)


torch.manual_seed(0)
loader = DataLoader(ReviewDataset(80, length=12, seed=0), batch_size=16, shuffle=True)
model = BagClassifier(VOCAB, 16)
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for step, (tokens, labels) in enumerate(loader):
    optimizer.zero_grad()
    logits = model(tokens)
    loss = criterion(logits, labels)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
