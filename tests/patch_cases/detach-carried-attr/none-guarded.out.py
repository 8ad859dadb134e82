import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(4, 8)
        self.hidden = None

    def forward(self, x):
        out, self.hidden = self.rnn(x, (None if self.hidden is None else self.hidden.detach()))  # FIX: detach-carried-attr # WRITE: None if self.hidden is None else self.hidden.detach()
        return out
