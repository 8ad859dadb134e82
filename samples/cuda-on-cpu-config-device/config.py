"""Run settings."""
import torch

DEVICE = torch.device("cuda")
BATCH_SIZE = 16
LR = 1e-2
