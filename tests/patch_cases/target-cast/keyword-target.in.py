# FIELDS: want=Float got=Long
import torch
import torch.nn.functional as F

logits, labels = torch.randn(3), torch.tensor([0, 1, 1])
loss = F.binary_cross_entropy_with_logits(logits, target=labels["y"] if False else labels)  # FIX: target-cast
