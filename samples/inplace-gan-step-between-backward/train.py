"""Tiny DCGAN-style GAN on 8x8 'images' with a PatchGAN discriminator."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
Z_DIM = 8


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(Z_DIM, 16 * 4 * 4)
        self.up = nn.Sequential(nn.ConvTranspose2d(16, 1, 4, stride=2, padding=1), nn.Tanh())

    def forward(self, z):
        return self.up(F.relu(self.fc(z)).view(-1, 16, 4, 4))


class PatchDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
            nn.Conv2d(8, 1, 3, padding=1),  # one logit per patch
        )

    def forward(self, img):
        return self.net(img)


G, D = Generator(), PatchDiscriminator()
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
real = torch.rand(16, 1, 8, 8) * 2 - 1

for step in range(5):
    fake = G(torch.randn(16, Z_DIM))
    d_real, d_fake = D(real), D(fake)

    # discriminator update
    d_loss = F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real)) + \
        F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))
    opt_d.zero_grad()
    d_loss.backward(retain_graph=True)
    opt_d.step()

    # generator update, reusing the discriminator output from above
    g_loss = F.binary_cross_entropy_with_logits(d_fake, torch.ones_like(d_fake))
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    print(f"step {step} d_loss {d_loss.item():.4f} g_loss {g_loss.item():.4f}")
