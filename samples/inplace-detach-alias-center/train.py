"""Self-predictive representation learning with a stop-gradient target."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self, in_dim=16, dim=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, dim), nn.ReLU())

    def forward(self, x):
        return self.net(x)


def feature_targets(feats):
    """Stop-gradient targets, centred over the batch to avoid collapse."""
    t = feats.detach()
    t.sub_(t.mean(dim=0, keepdim=True))
    return t


def augment(x, noise=0.1):
    return x + noise * torch.randn_like(x)


torch.manual_seed(0)
data = torch.randn(128, 16)
encoder = Encoder()
predictor = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
params = list(encoder.parameters()) + list(predictor.parameters())
opt = torch.optim.Adam(params, lr=1e-3)

for step in range(5):
    z1 = encoder(augment(data))
    z2 = encoder(augment(data))
    loss = F.mse_loss(predictor(z1), feature_targets(z2)) + \
        F.mse_loss(predictor(z2), feature_targets(z1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
