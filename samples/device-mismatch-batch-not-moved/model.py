"""A small MLP classifier."""
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, in_dim, classes):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, 32)
        self.fc2 = nn.Linear(32, classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))
