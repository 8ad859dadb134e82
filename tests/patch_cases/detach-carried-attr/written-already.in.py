import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(4, 8)
        self.hidden = torch.zeros(1, 2, 8)

    def forward(self, x):
        self.hidden = self.hidden  # FIX: detach-carried-attr # WRITE: self.state.detach()
        return x
