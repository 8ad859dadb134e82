import numpy as np
import torch

x = torch.tensor(np.zeros((2, 3)), dtype=torch.float32)  # FIX: input-source-unsure
