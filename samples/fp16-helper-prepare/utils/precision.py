"""Helpers for memory-efficient training."""
import torch


def prepare_model(model, device):
    """Move the model to the training device and shrink it for training."""
    model = model.to(device)
    model.train()
    return model.half()  # halve activation + weight memory


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def autocast_ctx(device):
    return torch.autocast(device_type=device, dtype=torch.float16)
