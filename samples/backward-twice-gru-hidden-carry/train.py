"""Truncated backpropagation through time over one long synthetic character stream."""
import torch
import torch.nn as nn

from model import CharGRU

torch.manual_seed(0)
VOCAB, BATCH, BPTT = 20, 4, 12
stream = torch.randint(0, VOCAB, (BATCH, 5 * BPTT + 1))

model = CharGRU(VOCAB)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
hidden = model.init_hidden(BATCH)

for step in range(5):
    start = step * BPTT
    inputs, targets = stream[:, start:start + BPTT], stream[:, start + 1:start + BPTT + 1]
    logits, hidden = model(inputs, hidden)
    loss = criterion(logits.reshape(-1, VOCAB), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
