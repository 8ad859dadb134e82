import torch
import torch.nn as nn

criterion = nn.CrossEntropyLoss()
out, y = torch.randn(3, 4), torch.tensor([0.0, 1.0, 2.0])
loss = criterion(out, y.long())  # FIX: target-cast
