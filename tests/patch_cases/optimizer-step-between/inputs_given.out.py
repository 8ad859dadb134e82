import torch

opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
for x in data:
    out = disc(gen(x))
    opt_d.zero_grad()
    out.mean().backward(retain_graph=True)
    opt_g.zero_grad()
    (-out).mean().backward(inputs=list(gen.parameters()))
    opt_d.step()  # FIX: optimizer-step-between
    opt_g.step()
