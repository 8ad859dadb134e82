import torch


def build_model(cfg):
    net = Net(cfg)
    return net.cuda().half()  # FIX: model-cast
