"""Model construction and the training step, driven by CONFIG."""
import torch
import torch.nn as nn


def build_model(cfg):
    m = cfg["model"]
    dims = [m["in_features"], *m["hidden"]]
    layers = []
    for a, b in zip(dims, dims[1:]):
        layers += [nn.Linear(a, b), nn.Tanh()]
    model = nn.Sequential(*layers, nn.Linear(dims[-1], m["out_features"]))
    return model.to(device=cfg["device"], dtype=getattr(torch, cfg["precision"]))


class Engine:
    def __init__(self, model, cfg):
        self.model, self.cfg = model, cfg
        o = cfg["optim"]
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=o["lr"], weight_decay=o["weight_decay"])
        self.scaler = torch.amp.GradScaler(cfg["device"], enabled=cfg["amp"])

    def step(self, x, y):
        with torch.autocast(self.cfg["device"], dtype=torch.float16, enabled=self.cfg["amp"]):
            loss = nn.functional.huber_loss(self.model(x), y)
        self.optimizer.zero_grad()
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg["optim"]["max_grad_norm"])
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.item()
