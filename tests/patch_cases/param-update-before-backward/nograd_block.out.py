import torch

for step in range(3):
    c_loss = critic(x).mean()
    opt_c.zero_grad()
    c_loss.backward()
    with torch.no_grad():  # FIX: param-update-before-backward
        for p in critic.parameters():
            p.clamp_(-0.01, 0.01)
    opt_c.step()
