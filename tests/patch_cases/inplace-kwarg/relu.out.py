import torch.nn as nn
act = nn.ReLU(inplace=False)  # FIX: inplace-kwarg
