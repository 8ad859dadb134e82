"""Seeding and a small attribute-dict config."""
import json
import os
import random

import torch


def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)


def setup_logging(config):
    work_dir = config.system.work_dir
    os.makedirs(work_dir, exist_ok=True)
    with open(os.path.join(work_dir, "config.json"), "w") as f:
        f.write(json.dumps(config.to_dict(), indent=4))


class CfgNode:
    """A lightweight configuration class, nested attribute access."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def to_dict(self):
        return {k: v.to_dict() if isinstance(v, CfgNode) else v for k, v in self.__dict__.items()}

    def merge_from_args(self, args):
        """Updates the config from --key=value strings, e.g. --trainer.max_iters=20."""
        for arg in args:
            keyval = arg.split("=")
            assert len(keyval) == 2, "expecting each override arg to be of form --arg=value, got %s" % arg
            key, val = keyval
            assert key[:2] == "--"
            keys = key[2:].split(".")
            obj = self
            for k in keys[:-1]:
                obj = getattr(obj, k)
            old = getattr(obj, keys[-1])
            setattr(obj, keys[-1], type(old)(val))
