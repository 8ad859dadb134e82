import torch

G, D = torch.nn.Linear(2, 3), torch.nn.Linear(3, 1)
fake = G(torch.randn(4, 2))
d_loss = D(fake).mean()  # FIX: detach-shared-unsure # WRITE: fake.detach()
