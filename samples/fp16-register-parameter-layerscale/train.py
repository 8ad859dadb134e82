"""Deep residual MLP classifier trained with fp16 autocast and loss scaling."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from blocks import ResidualMLP


class Net(nn.Module):
    def __init__(self, in_dim=20, dim=48, depth=4, classes=5):
        super().__init__()
        self.stem = nn.Linear(in_dim, dim)
        self.blocks = nn.Sequential(*(ResidualMLP(dim) for _ in range(depth)))
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def train(steps=5, device="cpu"):
    torch.manual_seed(0)
    net = Net().to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 12)
    x = torch.randn(96, 20, device=device)
    y = torch.randint(0, 5, (96,), device=device)
    for step in range(steps):
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            loss = F.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    train()
