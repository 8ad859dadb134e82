"""Weight clipping, the WGAN critic's Lipschitz constraint."""
import torch


@torch.no_grad()
def clip_weights(model, clip_value):
    for p in model.parameters():
        p.clamp_(-clip_value, clip_value)
