import torch

opt_d = torch.optim.Adam(D.parameters())
for x in data:
    d_fake = D(G(x))
    d_fake.mean().backward(retain_graph=True)
    opt_d.step()  # FIX: optimizer-step-between
    (-d_fake.mean()).backward()
