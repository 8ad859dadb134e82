"""Sentence classifier: embeddings -> GRU -> attention pooling -> linear."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from pooling import AttentionPool, MeanPool


class SentenceClassifier(nn.Module):
    def __init__(self, vocab, dim, classes, pool):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.pool = AttentionPool(dim) if pool == "attn" else MeanPool()
        self.fc = nn.Linear(dim, classes)

    def forward(self, tokens):
        states, _ = self.rnn(self.embed(tokens))
        return self.fc(self.pool(states))


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--vocab", type=int, default=100)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--pool", choices=["attn", "mean"], default="attn")
    p.add_argument("--lr", type=float, default=1e-3)
    return p.parse_args()


def main():
    args = parse_args()
    torch.manual_seed(0)
    tokens = torch.randint(0, args.vocab, (16, 10))
    labels = torch.randint(0, 2, (16,))
    model = SentenceClassifier(args.vocab, args.dim, 2, args.pool)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    model.train()
    for step in range(5):
        loss = F.cross_entropy(model(tokens), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
