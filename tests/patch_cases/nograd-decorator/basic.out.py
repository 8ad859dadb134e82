import torch


# the loss on one batch
def batch_loss(model, x):
    return model(x).sum()
