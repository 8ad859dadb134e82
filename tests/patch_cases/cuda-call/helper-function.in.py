import lightning as L
import torch


class Denoiser(L.LightningModule):
    def training_step(self, batch, batch_idx):
        def noisy(x):
            return x + torch.randn(x.shape).cuda()  # FIX: cuda-call
        return noisy(batch).pow(2).mean()
