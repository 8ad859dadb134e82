import functools

import torch


@functools.lru_cache()
def batch_loss(x):
    return x.sum()
