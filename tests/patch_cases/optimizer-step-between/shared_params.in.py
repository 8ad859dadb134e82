import torch

opt_a = torch.optim.Adam(model.actor.parameters())
opt_c = torch.optim.Adam(model.critic.parameters())
for s in data:
    v, q = model(s)
    v.mean().backward(retain_graph=True)
    opt_c.step()  # FIX: optimizer-step-between
    (-q.mean()).backward()
    opt_a.step()
