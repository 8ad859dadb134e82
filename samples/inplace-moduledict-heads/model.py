"""Shared trunk with one head per task."""
import torch.nn as nn


class MultiTaskNet(nn.Module):
    def __init__(self, in_dim, hidden, num_classes):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.GELU(),
            nn.Linear(hidden, hidden),
        )
        self.heads = nn.ModuleDict({
            "label": nn.Linear(hidden, num_classes),
            "score": nn.Sequential(
                nn.ReLU(inplace=True),
                nn.Linear(hidden, 1),
            ),
        })

    def forward(self, x):
        feats = self.trunk(x)
        return {task: head(feats) for task, head in self.heads.items()}
