"""Small CNN on synthetic 8x8 images; a validation pass after the training steps."""
import torch
import torch.nn as nn

from steps import batch_loss

torch.manual_seed(0)
images = torch.randn(96, 1, 8, 8)
labels = (images.mean(dim=(1, 2, 3)) > 0).long()
train_x, train_y, val_x, val_y = images[:64], labels[:64], images[64:], labels[64:]

model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for step in range(5):
    batch = slice(step * 12, step * 12 + 12)
    optimizer.zero_grad()
    loss, correct = batch_loss(model, train_x[batch], train_y[batch])
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} correct {correct}/12")

model.eval()
with torch.no_grad():
    val_loss, val_correct = batch_loss(model, val_x, val_y)
print(f"val loss {val_loss.item():.4f} acc {val_correct / len(val_y):.2f}")
