# FIELDS: want=Float got=Long
import torch

labels = [1, 0, 1]
y = torch.tensor(labels)  # FIX: target-source
