import torch
from utils import clip_weights

for step in range(5):
    fake = G(z).detach()
    c_loss = critic(fake).mean() - critic(real).mean()
    total = c_loss.detach().item()
    opt_c.zero_grad()
    c_loss.backward()
    clip_weights(critic, 0.01)  # FIX: param-update-before-backward
    opt_c.step()
