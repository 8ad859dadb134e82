import numpy as np
import torch

X = torch.from_numpy(np.random.rand(8, 3)).float()  # FIX: input-source
