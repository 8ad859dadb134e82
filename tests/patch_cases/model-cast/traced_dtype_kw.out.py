import torch


def build_model(cfg):
    model = make(cfg)
    return model.to(device=cfg["device"])  # FIX: model-cast
