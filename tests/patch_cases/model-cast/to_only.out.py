import torch
def build():
    net = make_net()  # FIX: model-cast
    return net
