"""Model factory for the sequence regressor."""
import torch
import torch.nn as nn


class TransformerRegressor(nn.Module):
    def __init__(self, d_model=32, nhead=4, layers=1):
        super().__init__()
        self.inp = nn.Linear(3, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=64,
                                           dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.out = nn.Linear(d_model, 1)

    def forward(self, x):
        return self.out(self.encoder(self.inp(x))[:, -1])


def build_model(cfg, device):
    model = TransformerRegressor(cfg["d_model"], cfg["nhead"], cfg["layers"])
    return model.to(device=device, dtype=torch.float16)
