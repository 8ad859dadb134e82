"""An MLP classifier whose training and validation share one step."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitClassifier(L.LightningModule):
    def __init__(self, num_classes=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, num_classes))

    @torch.no_grad()
    def shared_step(self, batch):
        x, y = batch
        logits = self.net(x)
        return F.cross_entropy(logits, y), (logits.argmax(-1) == y).float().mean()

    def training_step(self, batch, batch_idx):
        loss, acc = self.shared_step(batch)
        self.log("train_acc", acc)
        return loss

    def validation_step(self, batch, batch_idx):
        loss, acc = self.shared_step(batch)
        self.log("val_loss", loss)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)
