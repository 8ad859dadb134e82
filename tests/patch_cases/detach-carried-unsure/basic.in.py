import torch

rnn = torch.nn.GRU(4, 8)
hidden = torch.zeros(1, 2, 8)
for _ in range(3):
    out, hidden = rnn(torch.randn(5, 2, 4), hidden)  # FIX: detach-carried-unsure # WRITE: hidden.detach()
    out.sum().backward()
