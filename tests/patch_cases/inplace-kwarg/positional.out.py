import torch.nn as nn
net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(False))  # FIX: inplace-kwarg
