import torch

net = build()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
