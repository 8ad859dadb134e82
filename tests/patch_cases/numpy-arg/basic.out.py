import numpy as np
import torch

w = torch.ones(3, requires_grad=True)
scores = torch.sigmoid(w)
show(scores.detach().cpu().numpy())  # FIX: numpy-arg
