"""Image-feature classifier trained with SGD and decoupled weight decay."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class HParams:
    lr: float = 0.05
    weight_decay: float = 5e-4
    steps: int = 5
    batch: int = 32


class Trainer:
    def __init__(self, model, hp):
        self.model, self.hp = model, hp
        self.opt = torch.optim.SGD(model.parameters(), lr=hp.lr, momentum=0.9)
        self.decay = [p for n, p in model.named_parameters() if n.endswith("weight")]

    @torch.no_grad()
    def decay_weights(self):
        for p in self.decay:
            p.mul_(1 - self.hp.lr * self.hp.weight_decay)

    def train_step(self, x, y):
        self.model.train()
        loss = F.cross_entropy(self.model(x), y)
        self.decay_weights()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


def main(hp=HParams()):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 10))
    trainer = Trainer(model, hp)
    feats, labels = torch.randn(hp.batch, 64), torch.randint(0, 10, (hp.batch,))
    for step in range(hp.steps):
        print(f"step {step} loss {trainer.train_step(feats, labels):.4f}")


if __name__ == "__main__":
    main()
