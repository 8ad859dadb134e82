import torch
import torch.nn as nn

model = nn.Linear(3, 1)
x = torch.zeros(2, 3, dtype=torch.float64)
out = model(x)  # FIX: input-cast
