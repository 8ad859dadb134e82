import torch


class Model(torch.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.cell = cell
        self.state = torch.zeros(2, 8)

    def forward(self, x):
        out, self.state = self.cell(x, self.state.detach())  # FIX: detach-carried-attr-unsure # WRITE: self.state.detach()
        return out
