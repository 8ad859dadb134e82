import torch

devices = ["cuda:1"] * 2  # FIX: device-choice
