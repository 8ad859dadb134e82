"""DCGAN on a folder of tiny PGM images.

Modeled on pytorch/examples, dcgan/main.py (BSD-3-Clause licence): argparse options, weights_init,
an ImageFolder data set, the (1) update D / (2) update G loop with BCELoss and real/fake labels,
per-epoch checkpoints of netG and netD. Written from scratch for tracefix's test bed, following
that program's structure, with the loss curves of the PyTorch DCGAN tutorial (dcgan_faces_tutorial,
BSD-3-Clause) saved with numpy. Injected bug: the discriminator step scores netD(fake) instead of netD(fake.detach()), so
errD_fake.backward() frees the generator's graph that errG.backward() then needs.
"""
import argparse
import logging
import os
import random

import numpy as np

import torch
import torch.nn as nn
import torch.optim as optim

from data import ImageFolder, write_synthetic_folder
from models import Discriminator, Generator, weights_init

parser = argparse.ArgumentParser()
parser.add_argument("--dataroot", default="data/blobs", help="path to the image folder")
parser.add_argument("--batchSize", type=int, default=16, help="input batch size")
parser.add_argument("--nz", type=int, default=8, help="size of the latent z vector")
parser.add_argument("--ngf", type=int, default=8)
parser.add_argument("--ndf", type=int, default=8)
parser.add_argument("--niter", type=int, default=2, help="number of epochs to train for")
parser.add_argument("--lr", type=float, default=0.0002, help="learning rate")
parser.add_argument("--beta1", type=float, default=0.5, help="beta1 for adam")
parser.add_argument("--outf", default="checkpoints", help="folder for model checkpoints")
parser.add_argument("--manualSeed", type=int, default=999, help="manual seed")
opt = parser.parse_args()

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("dcgan")
os.makedirs(opt.outf, exist_ok=True)
random.seed(opt.manualSeed)
torch.manual_seed(opt.manualSeed)

if not os.path.isdir(opt.dataroot):
    write_synthetic_folder(opt.dataroot)
dataset = ImageFolder(opt.dataroot)
dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize, shuffle=True)
nz, nc = opt.nz, 1

netG = Generator(nz, opt.ngf, nc)
netG.apply(weights_init)
netD = Discriminator(nc, opt.ndf)
netD.apply(weights_init)
criterion = nn.BCELoss()
fixed_noise = torch.randn(opt.batchSize, nz, 1, 1)
real_label, fake_label = 1.0, 0.0

optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

G_losses, D_losses = [], []
for epoch in range(opt.niter):
    for i, (real_cpu, _) in enumerate(dataloader):
        ############################
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        ###########################
        netD.zero_grad()
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        noise = torch.randn(batch_size, nz, 1, 1)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake)
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        ############################
        # (2) Update G network: maximize log(D(G(z)))
        ###########################
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for generator cost
        # Since we just updated D, perform another forward pass of all-fake batch through D
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()

        # Save Losses for plotting later
        G_losses.append(errG.item())
        D_losses.append(errD.item())

        log.info("[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f",
                 epoch, opt.niter, i, len(dataloader), errD.item(), errG.item(), D_x, D_G_z1, D_G_z2)

    with torch.no_grad():
        sample = netG(fixed_noise)
    log.info("epoch %d: fixed-noise sample mean %.4f", epoch, sample.mean().item())
    torch.save(netG.state_dict(), "%s/netG_epoch_%d.pth" % (opt.outf, epoch))
    torch.save(netD.state_dict(), "%s/netD_epoch_%d.pth" % (opt.outf, epoch))

# the loss curves the tutorial plots, kept as arrays
np.savez("%s/losses.npz" % opt.outf, G=np.array(G_losses), D=np.array(D_losses))
print("done: %d epochs, checkpoints in %s" % (opt.niter, opt.outf))
