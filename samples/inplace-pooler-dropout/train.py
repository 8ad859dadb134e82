"""BERT-style classifier head (dense -> tanh pooler -> dropout -> classifier) on toy data."""
import torch
import torch.nn as nn

torch.manual_seed(0)
HIDDEN, NUM_LABELS = 32, 3


class TinyEncoderClassifier(nn.Module):
    def __init__(self, vocab=200):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, HIDDEN)
        self.encoder = nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.GELU(), nn.LayerNorm(HIDDEN))
        # pooler over the [CLS] position, as in BERT
        self.pooler = nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.Tanh())
        self.dropout = nn.Dropout(p=0.1, inplace=True)  # save a little memory
        self.classifier = nn.Linear(HIDDEN, NUM_LABELS)

    def forward(self, input_ids):
        hidden = self.encoder(self.embeddings(input_ids))
        pooled = self.pooler(hidden[:, 0])
        return self.classifier(self.dropout(pooled))


model = TinyEncoderClassifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4)
loss_fn = nn.CrossEntropyLoss()

input_ids = torch.randint(0, 200, (12, 16))
labels = torch.randint(0, NUM_LABELS, (12,))

model.train()
for step in range(5):
    logits = model(input_ids)
    loss = loss_fn(logits, labels)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step} | loss {loss.item():.4f}")
