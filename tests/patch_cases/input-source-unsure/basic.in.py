import numpy as np
import torch

x = torch.tensor(np.zeros((2, 3)))  # FIX: input-source-unsure
