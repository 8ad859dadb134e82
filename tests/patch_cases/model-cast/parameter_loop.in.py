import torch

net = build()
for p in net.parameters():
    p.data = p.data.half()  # FIX: model-cast
opt = torch.optim.SGD(net.parameters(), lr=0.1)
