import torch

opt_g = torch.optim.Adam(G.parameters())
opt_d = torch.optim.Adam(D.parameters())
for x in data:
    d_fake = D(G(x))
    d_fake.mean().backward(retain_graph=True)
    opt_d.step()  # FIX: optimizer-step-between
    norms = [p.grad.norm() for p in params]
    (-d_fake.mean()).backward()
    opt_g.step()
