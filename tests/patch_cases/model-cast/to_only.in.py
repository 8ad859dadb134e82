import torch
def build():
    net = make_net().to(torch.float16)  # FIX: model-cast
    return net
