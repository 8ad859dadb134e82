import torch

devices = [("cuda:1" if torch.cuda.is_available() else "cpu")] * 2  # FIX: device-choice
