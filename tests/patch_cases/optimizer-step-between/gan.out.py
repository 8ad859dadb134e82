import torch
import torch.nn.functional as F

G, D = Generator(), Discriminator()
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4)
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4)

for real in loader:
    fake = G(torch.randn(16, 8))
    d_real, d_fake = D(real), D(fake)
    d_loss = F.softplus(-d_real).mean() + F.softplus(d_fake).mean()
    opt_d.zero_grad()
    d_loss.backward(retain_graph=True)

    # generator update, reusing the discriminator output
    g_loss = F.softplus(-d_fake).mean()
    opt_g.zero_grad()
    g_loss.backward(inputs=[p for group in opt_g.param_groups for p in group["params"] if p.requires_grad])
    opt_d.step()  # FIX: optimizer-step-between
    opt_g.step()
