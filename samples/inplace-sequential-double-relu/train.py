"""Small CNN on random 16x16 'digits'."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvBlock(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


def build_cnn(num_classes=10):
    return nn.Sequential(
        ConvBlock(1, 8),
        nn.MaxPool2d(2),
        ConvBlock(8, 16),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, num_classes),
    )


torch.manual_seed(0)
images = torch.randn(32, 1, 16, 16)
labels = torch.randint(0, 10, (32,))

model = build_cnn()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
criterion = nn.CrossEntropyLoss()

model.train()
for step in range(5):
    optimizer.zero_grad()
    loss = criterion(model(images), labels)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
