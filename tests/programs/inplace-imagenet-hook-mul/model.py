"""A two-block ResNet for 16x16 images."""
import torch.nn as nn


class BasicBlock(nn.Module):
    def __init__(self, planes):
        super().__init__()
        self.conv1 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


class ResNet(nn.Module):
    def __init__(self, num_classes=4, planes=8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, planes, 3, padding=1, bias=False), nn.BatchNorm2d(planes), nn.ReLU())
        self.layer1 = nn.Sequential(BasicBlock(planes), BasicBlock(planes))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(planes, num_classes)

    def forward(self, x):
        x = self.layer1(self.stem(x))
        return self.fc(self.avgpool(x).flatten(1))
