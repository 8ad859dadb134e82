"""Lightning-style module: a small convolutional autoencoder for 16x16 images."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitAutoEncoder(nn.Module):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.lr = lr
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(8, 1, 4, stride=2, padding=1), nn.Sigmoid(),
        )

    def forward(self, x):
        return self.decoder(self.encoder(x))

    def training_step(self, batch, batch_idx):
        x = batch
        recon = self(x)
        # pixel-wise reconstruction error
        loss = F.mse_loss(recon, x, reduction="none")
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)
