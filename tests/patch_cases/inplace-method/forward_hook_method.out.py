import functools

import torch.nn as nn


class Scaler:
    def __init__(self, model, factor):
        self.factor = factor
        model.fc.register_forward_hook(functools.partial(self.scale, "fc"))

    def scale(self, name, module, inputs, output):
        if not module.training:
            return output
        output = output.mul(self.factor)  # FIX: inplace-method
        return output
