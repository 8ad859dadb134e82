# FIELDS: want=Float got=Double
import numpy as np
import torch

y = torch.from_numpy(np.array([0.0, 1.0]))  # FIX: target-source
