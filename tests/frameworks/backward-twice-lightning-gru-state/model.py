"""A character-level GRU language model as a LightningModule; the hidden state runs on across batches."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F


class CharGRU(L.LightningModule):
    def __init__(self, vocab=16, hidden=32, lr=1e-2):
        super().__init__()
        self.lr = lr
        self.embed = nn.Embedding(vocab, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)
        self.hidden = None

    def training_step(self, batch, batch_idx):
        x, y = batch
        out, self.hidden = self.gru(self.embed(x), self.hidden)
        loss = F.cross_entropy(self.head(out).flatten(0, 1), y.flatten())
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)
