"""WGAN with weight clipping on synthetic 8x8 images.

Modeled on eriklindernoren/PyTorch-GAN, implementations/wgan/wgan.py (MIT licence): argparse
options (n_epochs, latent_dim, n_critic, clip_value, sample_interval), RMSprop for both nets, the
critic loss -mean(D(real)) + mean(D(fake)), clipping the critic's weights, a generator step every
n_critic batches. Written from scratch for tracefix's test bed, following that program's
structure. Injected bug: the critic's weights are clipped in place after its loss's forward and
before loss_D.backward().
"""
import argparse
import logging
import os

import torch

from models import Discriminator, Generator
from utils import clip_weights

parser = argparse.ArgumentParser()
parser.add_argument("--n_epochs", type=int, default=2, help="number of epochs of training")
parser.add_argument("--batch_size", type=int, default=16, help="size of the batches")
parser.add_argument("--lr", type=float, default=0.00005, help="learning rate")
parser.add_argument("--latent_dim", type=int, default=8, help="dimensionality of the latent space")
parser.add_argument("--img_size", type=int, default=8, help="size of each image dimension")
parser.add_argument("--n_critic", type=int, default=2, help="critic steps per generator step")
parser.add_argument("--clip_value", type=float, default=0.01, help="critic weight clip")
parser.add_argument("--sample_dir", default="images")
opt = parser.parse_args()

logging.basicConfig(level=logging.INFO, format="%(message)s")
log = logging.getLogger("wgan")
torch.manual_seed(0)
img_shape = (1, opt.img_size, opt.img_size)
generator = Generator(opt.latent_dim, img_shape)
discriminator = Discriminator(img_shape)
optimizer_G = torch.optim.RMSprop(generator.parameters(), lr=opt.lr)
optimizer_D = torch.optim.RMSprop(discriminator.parameters(), lr=opt.lr)
data = torch.tanh(torch.randn(64, *img_shape))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data), batch_size=opt.batch_size, shuffle=True)
os.makedirs(opt.sample_dir, exist_ok=True)

batches_done = 0
for epoch in range(opt.n_epochs):
    for i, (imgs,) in enumerate(loader):
        optimizer_D.zero_grad()
        z = torch.randn(imgs.shape[0], opt.latent_dim)
        fake_imgs = generator(z).detach()
        loss_D = -torch.mean(discriminator(imgs)) + torch.mean(discriminator(fake_imgs))
        clip_weights(discriminator, opt.clip_value)
        loss_D.backward()
        optimizer_D.step()

        if i % opt.n_critic == 0:
            optimizer_G.zero_grad()
            gen_imgs = generator(z)
            loss_G = -torch.mean(discriminator(gen_imgs))
            loss_G.backward()
            optimizer_G.step()
            log.info("[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f]", epoch, opt.n_epochs,
                     batches_done % len(loader), len(loader), loss_D.item(), loss_G.item())
        batches_done += 1
    torch.save(generator(torch.randn(16, opt.latent_dim)).detach(), os.path.join(opt.sample_dir, "%d.pt" % epoch))

print("done: %d batches" % batches_done)
