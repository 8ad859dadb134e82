import torch

rows = [(0.1, 0.2, 1.0), (0.3, 0.1, 0.0)]
labels = torch.tensor([r[2] for r in rows], dtype=torch.long)  # FIX: target-source
