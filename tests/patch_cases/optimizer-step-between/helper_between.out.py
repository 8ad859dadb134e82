import torch


def g_loss_of(fake):
    return -D(fake).mean()


opt_g = torch.optim.Adam(G.parameters())
opt_d = torch.optim.Adam(D.parameters())
for x in data:
    fake = G(x)
    d_fake = D(fake)
    d_fake.mean().backward(retain_graph=True)
    opt_d.step()  # FIX: optimizer-step-between
    d_fake = D(fake)
    loss = g_loss_of(fake) + d_fake.mean()
    loss.backward()
    opt_g.step()
