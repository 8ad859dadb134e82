from collections import namedtuple

import torch


class Vgg16(torch.nn.Module):
    """The loss network: VGG-16's first four blocks, sliced at relu1_2, relu2_2, relu3_3 and
    relu4_3. The test bed has no download, so the weights are a fixed random initialisation
    (seeded) with VGG's layout and small widths; they are frozen, as the pretrained ones are."""

    def __init__(self, requires_grad=False, width=8, seed=1234):
        super(Vgg16, self).__init__()
        g = torch.manual_seed(seed)
        chans = [3, width, width * 2, width * 4, width * 8]
        convs = {1: 2, 2: 2, 3: 3, 4: 3}
        self.slice1 = torch.nn.Sequential()
        self.slice2 = torch.nn.Sequential()
        self.slice3 = torch.nn.Sequential()
        self.slice4 = torch.nn.Sequential()
        slices = [self.slice1, self.slice2, self.slice3, self.slice4]
        for i, block in enumerate(slices, 1):
            if i > 1:
                block.add_module("pool", torch.nn.MaxPool2d(kernel_size=2, stride=2))
            c_in = chans[i - 1]
            for j in range(convs[i]):
                block.add_module(f"conv{i}_{j + 1}", torch.nn.Conv2d(c_in, chans[i], kernel_size=3, padding=1))
                block.add_module(f"relu{i}_{j + 1}", torch.nn.ReLU(inplace=True))
                c_in = chans[i]
        del g
        if not requires_grad:
            for param in self.parameters():
                param.requires_grad = False

    def forward(self, X):
        h = self.slice1(X)
        h_relu1_2 = h
        h = self.slice2(h)
        h_relu2_2 = h
        h = self.slice3(h)
        h_relu3_3 = h
        h = self.slice4(h)
        h_relu4_3 = h
        vgg_outputs = namedtuple("VggOutputs", ['relu1_2', 'relu2_2', 'relu3_3', 'relu4_3'])
        out = vgg_outputs(h_relu1_2, h_relu2_2, h_relu3_3, h_relu4_3)
        return out
