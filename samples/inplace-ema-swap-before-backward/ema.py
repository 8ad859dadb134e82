"""Exponential moving average of model weights (in the style of torch_ema)."""
import contextlib

import torch


class EMA:
    def __init__(self, parameters, decay=0.99):
        self.params = list(parameters)
        self.decay = decay
        self.shadow = [p.detach().clone() for p in self.params]
        self.backup = []

    @torch.no_grad()
    def update(self):
        for s, p in zip(self.shadow, self.params):
            s.lerp_(p, 1 - self.decay)

    @contextlib.contextmanager
    def average_parameters(self):
        """Temporarily load the averaged weights into the model."""
        with torch.no_grad():
            self.backup = [p.clone() for p in self.params]
            for p, s in zip(self.params, self.shadow):
                p.copy_(s)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, b in zip(self.params, self.backup):
                    p.copy_(b)
