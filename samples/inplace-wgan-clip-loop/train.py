"""WGAN (weight clipping) on 1-D Gaussian-mixture samples."""
import torch
import torch.nn as nn


class Critic(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, hidden), nn.LeakyReLU(0.2),
                                 nn.Linear(hidden, hidden), nn.LeakyReLU(0.2),
                                 nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)


def sample_real(n):
    centers = torch.tensor([-2.0, 2.0])[torch.randint(0, 2, (n,))]
    return (centers + 0.3 * torch.randn(n)).unsqueeze(1)


torch.manual_seed(0)
clip_value = 0.02
generator = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))
critic = Critic()
opt_g = torch.optim.RMSprop(generator.parameters(), lr=1e-4)
opt_c = torch.optim.RMSprop(critic.parameters(), lr=1e-4)

for step in range(5):
    real = sample_real(128)
    fake = generator(torch.randn(128, 2))

    loss_c = critic(fake.detach()).mean() - critic(real).mean()
    with torch.no_grad():
        for p in critic.parameters():
            p.clamp_(-clip_value, clip_value)
    opt_c.zero_grad()
    loss_c.backward()
    opt_c.step()

    loss_g = -critic(fake).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    print(f"step {step} loss {loss_c.item():.5f} loss_g {loss_g.item():.5f}")
