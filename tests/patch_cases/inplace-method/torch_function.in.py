import torch


def head(x):
    logits = x @ x.T
    torch.sigmoid_(logits)  # FIX: inplace-method
    return logits
