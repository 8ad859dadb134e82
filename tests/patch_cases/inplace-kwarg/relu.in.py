import torch.nn as nn
act = nn.ReLU(inplace=True)  # FIX: inplace-kwarg
