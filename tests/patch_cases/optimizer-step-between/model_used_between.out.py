import torch

opt_g = torch.optim.Adam(G.parameters())
opt_d = torch.optim.Adam(D.parameters())
for x in data:
    d_fake = D(G(x))
    d_fake.mean().backward(retain_graph=True)
    opt_d.step()  # FIX: optimizer-step-between
    d_fake = D(G(x))
    g_loss = -d_fake.mean() + D(x).mean()
    g_loss.backward()
    opt_g.step()
