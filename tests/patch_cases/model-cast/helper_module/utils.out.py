import torch


def build_model(cfg):
    net = Net(cfg)
    return net.cuda()  # FIX: model-cast
