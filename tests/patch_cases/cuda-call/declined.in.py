import torch

x = torch.zeros(2).cuda()  # FIX: cuda-call
