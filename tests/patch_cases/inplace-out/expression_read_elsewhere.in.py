import torch


class Noise(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("eps", torch.zeros(n))

    def forward(self, x):
        return x + torch.randn(x.shape, out=self.eps)  # FIX: inplace-out

    def last_noise(self):
        return self.eps.clone()
