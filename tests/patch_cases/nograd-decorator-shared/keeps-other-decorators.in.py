import functools

import torch


@functools.lru_cache()
@torch.inference_mode()  # FIX: nograd-decorator-shared
def batch_loss(x):
    return x.sum()
