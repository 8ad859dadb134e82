"""Per-pixel classifier: images are turned channels-last and flattened to one row per pixel."""
import torch
import torch.nn as nn

torch.manual_seed(0)
images = torch.randn(8, 3, 6, 6)
labels = (images[:, 0] > 0).long()
head = nn.Linear(3, 2)
optimizer = torch.optim.SGD(head.parameters(), lr=0.1)

for step in range(5):
    pixels = images.permute(0, 2, 3, 1)
    rows = pixels.view(-1, 3)
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(head(rows), labels.view(-1))
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
