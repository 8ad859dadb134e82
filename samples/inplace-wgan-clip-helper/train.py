"""WGAN with weight clipping on a 2-D toy distribution."""
import torch
import torch.nn as nn

from wgan_utils import clip_weights, sample_noise

Z_DIM, CLIP, N_CRITIC = 4, 0.05, 2


def mlp(d_in, d_out):
    return nn.Sequential(nn.Linear(d_in, 32), nn.LeakyReLU(0.2), nn.Linear(32, d_out))


def real_batch(n=64):
    angle = torch.rand(n) * 6.2832
    return torch.stack([angle.cos(), angle.sin()], dim=1) + 0.05 * torch.randn(n, 2)


torch.manual_seed(0)
G, critic = mlp(Z_DIM, 2), mlp(2, 1)
opt_g = torch.optim.RMSprop(G.parameters(), lr=5e-4)
opt_c = torch.optim.RMSprop(critic.parameters(), lr=5e-4)

for step in range(5):
    for _ in range(N_CRITIC):
        fake = G(sample_noise(64, Z_DIM)).detach()
        c_loss = critic(fake).mean() - critic(real_batch()).mean()
        clip_weights(critic, CLIP)
        opt_c.zero_grad()
        c_loss.backward()
        opt_c.step()

    g_loss = -critic(G(sample_noise(64, Z_DIM))).mean()
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    print(f"step {step} loss {c_loss.item():.4f} g_loss {g_loss.item():.4f}")
