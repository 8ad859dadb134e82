import torch
from torch.utils.checkpoint import checkpoint

lin = torch.nn.Linear(2, 2)
y = checkpoint(lin, torch.ones(1, 2), use_reentrant=False)  # FIX: reentrant-checkpoint
