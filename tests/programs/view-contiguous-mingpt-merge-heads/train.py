"""Character-level GPT on a small generated text, with periodic evaluation and checkpoints.

Modeled on karpathy/minGPT, projects/chargpt/chargpt.py with mingpt/model.py, mingpt/trainer.py
and mingpt/utils.py (MIT licence): CfgNode configs overridable from the command line, a
CharDataset, the GPT with CausalSelfAttention and pre-LayerNorm Blocks, configure_optimizers with
decayed and undecayed groups, the Trainer with an on_batch_end callback that logs, samples and
saves. Written from scratch for tracefix's test bed, following that program's structure.
Injected bug: CausalSelfAttention.forward in model.py re-assembles the heads with y.transpose(1, 2).view(B, T, C), without the .contiguous() minGPT has
between them; the transposed tensor cannot be viewed, so the crash is that line, reached from the
trainer's forward pass, and the fix is the .view there.
"""
import logging
import os
import sys

import torch
from torch.utils.data import Dataset

from model import GPT
from trainer import Trainer
from utils import CfgNode as CN
from utils import set_seed, setup_logging

log = logging.getLogger("chargpt")


def get_config():
    C = CN()
    C.system = CN(seed=3407, work_dir="./out/chargpt")
    C.data = CN(block_size=16)
    C.model = GPT.get_default_config()
    C.trainer = Trainer.get_default_config()
    C.trainer.learning_rate = 5e-4
    C.trainer.max_iters = 12
    C.eval_interval = 4
    return C


class CharDataset(Dataset):
    """Emits batches of characters."""

    def __init__(self, config, data):
        chars = sorted(list(set(data)))
        self.stoi = {ch: i for i, ch in enumerate(chars)}
        self.itos = {i: ch for i, ch in enumerate(chars)}
        self.vocab_size = len(chars)
        self.config = config
        self.data = data

    def get_block_size(self):
        return self.config.block_size

    def __len__(self):
        return len(self.data) - self.config.block_size

    def __getitem__(self, idx):
        chunk = self.data[idx:idx + self.config.block_size + 1]
        dix = [self.stoi[s] for s in chunk]
        x = torch.tensor(dix[:-1], dtype=torch.long)
        y = torch.tensor(dix[1:], dtype=torch.long)
        return x, y


def make_text(path):
    if not os.path.exists(path):
        lines = ["to be or not to be, that is the question.", "all the world's a stage."]
        with open(path, "w") as f:
            f.write("\n".join(lines * 20))
    with open(path) as f:
        return f.read()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    config = get_config()
    config.merge_from_args(sys.argv[1:])
    setup_logging(config)
    set_seed(config.system.seed)

    text = make_text("input.txt")
    train_dataset = CharDataset(config.data, text)
    config.model.vocab_size = train_dataset.vocab_size
    config.model.block_size = train_dataset.get_block_size()
    model = GPT(config.model)
    trainer = Trainer(config.trainer, model, train_dataset)

    def batch_end_callback(trainer):
        if trainer.iter_num % 2 == 0:
            log.info("iter_dt %.2fms; iter %d: train loss %.5f", trainer.iter_dt * 1000,
                     trainer.iter_num, trainer.loss.item())
        if trainer.iter_num % config.eval_interval == 0:
            model.eval()
            with torch.no_grad():
                context = "to be"
                x = torch.tensor([train_dataset.stoi[s] for s in context], dtype=torch.long)[None, ...]
                y = model.generate(x, 20)[0]
                log.info("sample: %r", "".join(train_dataset.itos[int(i)] for i in y))
            torch.save(model.state_dict(), os.path.join(config.system.work_dir, "model.pt"))
            model.train()

    trainer.add_callback("on_batch_end", batch_end_callback)
    trainer.run()
    print("done: %d iterations, final loss %.4f" % (trainer.iter_num, trainer.loss.item()))
