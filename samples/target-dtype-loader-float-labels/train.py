"""3-class MLP on tabular points; a validation pass after the training steps."""
import torch
import torch.nn as nn

from data import load_rows, make_loader, to_tensors

torch.manual_seed(0)
train_x, train_y = to_tensors(load_rows(96, seed=0))
val_x, val_y = to_tensors(load_rows(48, seed=1))
train_loader = make_loader(train_x, train_y, shuffle=True)
val_loader = make_loader(val_x, val_y, shuffle=False)

model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for step, (xb, yb) in enumerate(train_loader):
    if step == 5:
        break
    optimizer.zero_grad()
    loss = criterion(model(xb), yb)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

model.eval()
with torch.no_grad():
    val_loss = sum(criterion(model(xb), yb).item() for xb, yb in val_loader) / len(val_loader)
print(f"val loss {val_loss:.4f}")
