import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(4, 8)
        self.hidden = torch.zeros(1, 2, 8)

    def forward(self, x):
        out, self.hidden = self.rnn(x, self.hidden.detach())  # FIX: detach-carried-attr # WRITE: self.hidden.detach()
        return out
