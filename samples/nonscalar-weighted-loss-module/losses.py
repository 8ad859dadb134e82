"""Losses for imbalanced classification."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class WeightedLoss(nn.Module):
    """Cross-entropy with inverse-frequency class weights."""

    def __init__(self, class_counts):
        super().__init__()
        counts = torch.as_tensor(class_counts, dtype=torch.float32)
        self.register_buffer("class_weight", counts.sum() / (len(counts) * counts))

    def forward(self, logits, target):
        nll = F.cross_entropy(logits, target, reduction="none")
        return self.class_weight[target] * nll
