"""Sentence classifier: mean-pooled token embeddings and an MLP head, with a validation pass."""
import torch
import torch.nn as nn

VOCAB, EMBED, HIDDEN, CLASSES = 500, 64, 128, 4


class BagOfEmbeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.head = nn.Sequential(
            nn.Linear(EMBED, HIDDEN),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(EMBED, CLASSES),
        )

    def forward(self, tokens):
        pooled = self.embed(tokens).mean(dim=1)
        return self.head(pooled)


def validate(model, tokens, labels, criterion):
    model.eval()
    with torch.no_grad():
        loss = criterion(model(tokens), labels).item()
    model.train()
    return loss


torch.manual_seed(0)
tokens = torch.randint(0, VOCAB, (48, 12))
labels = torch.randint(0, CLASSES, (48,))
model = BagOfEmbeddings()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

for step in range(5):
    batch = slice(step * 8, step * 8 + 8)
    logits = model(tokens[batch])
    loss = criterion(logits, labels[batch])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    print(f"step {step} loss {loss.item():.4f}")
print(f"validation loss {validate(model, tokens[40:], labels[40:], criterion):.4f}")
