"""MLP generator and critic for flattened 8x8 images."""
import torch.nn as nn


class Generator(nn.Module):
    def __init__(self, latent_dim, img_shape):
        super().__init__()
        self.img_shape = img_shape
        n = img_shape[0] * img_shape[1] * img_shape[2]

        def block(in_feat, out_feat):
            return [nn.Linear(in_feat, out_feat), nn.LeakyReLU(0.2, inplace=True)]

        self.model = nn.Sequential(*block(latent_dim, 32), *block(32, 64), nn.Linear(64, n), nn.Tanh())

    def forward(self, z):
        return self.model(z).view(z.size(0), *self.img_shape)


class Discriminator(nn.Module):
    def __init__(self, img_shape):
        super().__init__()
        n = img_shape[0] * img_shape[1] * img_shape[2]
        self.model = nn.Sequential(nn.Linear(n, 64), nn.LeakyReLU(0.2, inplace=True),
                                   nn.Linear(64, 32), nn.LeakyReLU(0.2, inplace=True), nn.Linear(32, 1))

    def forward(self, img):
        return self.model(img.view(img.shape[0], -1))
