"""GAN on points of a noisy ring: a discriminator step, then a generator step, each batch."""
import math

import torch
import torch.nn as nn

from models import discriminator, generator

torch.manual_seed(0)
Z = 4
netG, netD = generator(Z), discriminator()
criterion = nn.BCEWithLogitsLoss()
optD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))


def real_batch(n):
    angle = torch.rand(n) * 2 * math.pi
    return torch.stack([angle.cos(), angle.sin()], dim=1) + 0.05 * torch.randn(n, 2)


for step in range(5):
    real = real_batch(32)
    fake = netG(torch.randn(32, Z))

    # (1) discriminator: real -> 1, fake -> 0
    d_real = netD(real)
    d_fake = netD(fake)
    loss_d = criterion(d_real, torch.ones_like(d_real)) + criterion(d_fake, torch.zeros_like(d_fake))
    optD.zero_grad()
    loss_d.backward()
    optD.step()

    # (2) generator: make the discriminator call the fakes real
    d_gen = netD(fake)
    loss_g = criterion(d_gen, torch.ones_like(d_gen))
    optG.zero_grad()
    loss_g.backward()
    optG.step()
    print(f"step {step} loss_d {loss_d.item():.4f} loss_g {loss_g.item():.4f}")
