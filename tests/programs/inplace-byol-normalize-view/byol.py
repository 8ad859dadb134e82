"""BYOL: an online network with a predictor, a target network kept as an EMA of it."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


def loss_fn(x, y):
    x = F.normalize(x, dim=-1, p=2)
    y = F.normalize(y, dim=-1, p=2)
    return 2 - 2 * (x * y).sum(dim=-1)


class EMA:
    def __init__(self, beta):
        self.beta = beta

    def update_average(self, old, new):
        if old is None:
            return new
        return old * self.beta + (1 - self.beta) * new


@torch.no_grad()
def update_moving_average(ema_updater, ma_model, current_model):
    for current_params, ma_params in zip(current_model.parameters(), ma_model.parameters()):
        ma_params.copy_(ema_updater.update_average(ma_params, current_params))


def MLP(dim, projection_size, hidden_size=64):
    return nn.Sequential(
        nn.Linear(dim, hidden_size),
        nn.BatchNorm1d(hidden_size),
        nn.ReLU(inplace=True),
        nn.Linear(hidden_size, projection_size),
    )


class NetWrapper(nn.Module):
    """Backbone, then a projector on its (unit-length) representation."""

    def __init__(self, net, rep_dim, projection_size, projection_hidden_size):
        super().__init__()
        self.net = net
        self.projector = MLP(rep_dim, projection_size, projection_hidden_size)

    def get_representation(self, x):
        hidden = self.net(x)
        rep = hidden.flatten(1)
        rep.div_(rep.norm(dim=-1, keepdim=True) + 1e-6)
        return rep

    def forward(self, x, return_projection=True):
        representation = self.get_representation(x)
        if not return_projection:
            return representation
        return self.projector(representation), representation


class BYOL(nn.Module):
    def __init__(self, net, rep_dim, projection_size=16, projection_hidden_size=64,
                 moving_average_decay=0.99):
        super().__init__()
        self.online_encoder = NetWrapper(net, rep_dim, projection_size, projection_hidden_size)
        self.target_encoder = None
        self.target_ema_updater = EMA(moving_average_decay)
        self.online_predictor = MLP(projection_size, projection_size, projection_hidden_size)

    def _get_target_encoder(self):
        if self.target_encoder is None:
            self.target_encoder = copy.deepcopy(self.online_encoder)
            for p in self.target_encoder.parameters():
                p.requires_grad = False
        return self.target_encoder

    def update_moving_average(self):
        assert self.target_encoder is not None, "target encoder has not been created yet"
        update_moving_average(self.target_ema_updater, self.target_encoder, self.online_encoder)

    def forward(self, image_one, image_two, return_embedding=False):
        if return_embedding:
            return self.online_encoder(image_one, return_projection=False)
        online_proj_one, _ = self.online_encoder(image_one)
        online_proj_two, _ = self.online_encoder(image_two)
        online_pred_one = self.online_predictor(online_proj_one)
        online_pred_two = self.online_predictor(online_proj_two)
        with torch.no_grad():
            target_encoder = self._get_target_encoder()
            target_proj_one, _ = target_encoder(image_one)
            target_proj_two, _ = target_encoder(image_two)
        loss_one = loss_fn(online_pred_one, target_proj_two.detach())
        loss_two = loss_fn(online_pred_two, target_proj_one.detach())
        return (loss_one + loss_two).mean()
