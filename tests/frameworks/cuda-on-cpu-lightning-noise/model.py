"""A denoising autoencoder: Gaussian noise added to each batch."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitDenoiser(L.LightningModule):
    def __init__(self, sigma=0.1):
        super().__init__()
        self.sigma = sigma
        self.net = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 16))

    def training_step(self, batch, batch_idx):
        (x,) = batch
        noise = torch.randn(x.shape).cuda() * self.sigma
        return F.mse_loss(self.net(x + noise), x)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)
