import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, lr, wd):
        self.model, self.lr, self.wd = model, lr, wd
        self.opt = torch.optim.SGD(model.parameters(), lr=lr)

    @torch.no_grad()
    def decay_weights(self):
        for p in self.model.parameters():
            p.mul_(1 - self.lr * self.wd)

    def train_step(self, x, y):
        loss = F.cross_entropy(self.model(x), y)

        self.opt.zero_grad()
        loss.backward()
        # decoupled weight decay
        self.decay_weights()  # FIX: param-update-before-backward
        self.opt.step()
        return loss.item()
