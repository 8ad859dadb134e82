"""Fine-tune a tiny token tagger (embedding + MLP) on random data."""
import torch
import torch.nn as nn

from losses import SmoothedTokenLoss

VOCAB, NUM_TAGS, SEQ, DIM = 50, 5, 12, 32


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, DIM), nn.GELU(), nn.Linear(DIM, NUM_TAGS))

    def forward(self, tokens):
        return self.mlp(self.embed(tokens))


def main():
    torch.manual_seed(0)
    tokens = torch.randint(0, VOCAB, (8, SEQ))
    tags = torch.randint(0, NUM_TAGS, (8, SEQ))

    model = Tagger()
    criterion = SmoothedTokenLoss(NUM_TAGS)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    model.train()
    for step in range(5):
        optimizer.zero_grad()
        logits = model(tokens)
        loss = criterion(logits, tags)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")


main()
