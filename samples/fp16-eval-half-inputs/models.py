import torch.nn as nn


class SmallNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2))
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))
