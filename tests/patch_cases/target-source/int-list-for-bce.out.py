# FIELDS: want=Float got=Long
import torch

labels = [1, 0, 1]
y = torch.tensor(labels, dtype=torch.float32)  # FIX: target-source
