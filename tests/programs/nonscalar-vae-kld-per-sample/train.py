"""Variational auto-encoder on synthetic MNIST IDX files.

Modeled on pytorch/examples, vae/main.py (BSD-3-Clause licence): the VAE model, loss_function
(reconstruction BCE + KL divergence), train() / test() with their log lines, Adam, a reconstruction
comparison and random samples saved each epoch. Written from scratch for tracefix's test bed,
following that program's structure. Injected bug: loss_function sums the KL term over dim=1 only,
so it is one value per sample and BCE + KLD is a [batch] tensor; train()'s backward and .item()
and test()'s .item() all need a scalar, so the fix is the KLD line.
"""
import argparse
import logging
import os

import torch
import torch.nn.functional as F
from torch import optim

from data import MNIST, write_synthetic_mnist
from model import VAE

log = logging.getLogger("vae")


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    # KL(q(z|x) || N(0, I)), see Kingma and Welling, appendix B
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1)
    return BCE + KLD


def train(args, model, optimizer, train_loader, epoch):
    model.train()
    train_loss = 0.0
    for batch_idx, (data, _) in enumerate(train_loader):
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            log.info("Train Epoch: %d [%d/%d (%.0f%%)]\tLoss: %.6f", epoch, batch_idx * len(data),
                     len(train_loader.dataset), 100.0 * batch_idx / len(train_loader),
                     loss.item() / len(data))
    log.info("====> Epoch: %d Average loss: %.4f", epoch, train_loss / len(train_loader.dataset))


def test(args, model, test_loader, epoch):
    model.eval()
    test_loss = 0.0
    with torch.no_grad():
        for i, (data, _) in enumerate(test_loader):
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()
            if i == 0:
                n = min(data.size(0), 8)
                comparison = torch.cat([data[:n], recon_batch.view(-1, 1, 28, 28)[:n]])
                torch.save(comparison, os.path.join(args.results, "reconstruction_%d.pt" % epoch))
    test_loss /= len(test_loader.dataset)
    log.info("====> Test set loss: %.4f", test_loss)
    return test_loss


def main():
    parser = argparse.ArgumentParser(description="VAE MNIST Example")
    parser.add_argument("--batch-size", type=int, default=16, metavar="N")
    parser.add_argument("--epochs", type=int, default=2, metavar="N")
    parser.add_argument("--seed", type=int, default=1, metavar="S")
    parser.add_argument("--log-interval", type=int, default=2, metavar="N")
    parser.add_argument("--data", default="data/MNIST/raw")
    parser.add_argument("--results", default="results")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.manual_seed(args.seed)

    if not os.path.exists(os.path.join(args.data, "train-images-idx3-ubyte")):
        write_synthetic_mnist(args.data)
    os.makedirs(args.results, exist_ok=True)
    # the VAE reconstructs pixels in [0, 1]: no mean/std normalization
    train_loader = torch.utils.data.DataLoader(MNIST(args.data, train=True, mean=0.0, std=1.0),
                                               batch_size=args.batch_size, shuffle=True)
    test_loader = torch.utils.data.DataLoader(MNIST(args.data, train=False, mean=0.0, std=1.0),
                                              batch_size=args.batch_size)

    model = VAE()
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(1, args.epochs + 1):
        train(args, model, optimizer, train_loader, epoch)
        test_loss = test(args, model, test_loader, epoch)
        with torch.no_grad():
            sample = model.decode(torch.randn(16, 8))
            torch.save(sample.view(16, 1, 28, 28), os.path.join(args.results, "sample_%d.pt" % epoch))
    print("done: %d epochs, test loss %.2f" % (args.epochs, test_loss))


if __name__ == "__main__":
    main()
