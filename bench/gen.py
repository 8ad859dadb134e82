"""Input generators for the benchmarks (and the big-input tests): written to files, streamed.

Nothing here holds more than a few MiB in memory, whatever size is asked for.

    python bench/gen.py log OUT.log [--size-mb 1024]      realistic training log, traceback at the end
    python bench/gen.py model OUT_DIR [--lines 3000]      a 3,000-line model project + its crash log
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

TRACEBACK_30 = """\
Traceback (most recent call last):
  File "/home/user/proj/train.py", line 212, in <module>
    main()
  File "/home/user/proj/train.py", line 205, in main
    trainer.fit(model, loader)
  File "/home/user/proj/engine/trainer.py", line 141, in fit
    self._run_epoch(epoch)
  File "/home/user/proj/engine/trainer.py", line 118, in _run_epoch
    loss = self.training_step(batch)
  File "/home/user/proj/engine/trainer.py", line 97, in training_step
    self.backward(loss)
  File "/home/user/proj/engine/trainer.py", line 77, in backward
    loss.backward()
  File "/usr/local/lib/python3.11/site-packages/torch/_tensor.py", line 623, in backward
    torch.autograd.backward(
  File "/usr/local/lib/python3.11/site-packages/torch/autograd/__init__.py", line 388, in backward
    grad_tensors_ = _make_grads(tensors, grad_tensors_, is_grads_batched=False)
                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/site-packages/torch/autograd/__init__.py", line 208, in _make_grads
    raise RuntimeError(
RuntimeError: grad can be implicitly created only for scalar outputs
"""


def traceback_30(project: str = "/home/user/proj") -> str:
    """A 30-line log: a few lines of output, then a 20-odd line nonscalar traceback."""
    head = "".join(f"step {i} loss {1.0 / (i + 1):.4f}\n" for i in range(8))
    return head + TRACEBACK_30.replace("/home/user/proj", project)


def _block(rng: random.Random, step: int) -> str:
    """About 4 KiB of a training log: step/loss lines, tqdm redraws with \\r, a warning now and then."""
    out = []
    for _ in range(24):
        step += 1
        out.append(f"2024-05-01 12:{step // 60 % 60:02d}:{step % 60:02d},123 - INFO - trainer - "
                   f"step {step} loss {rng.random():.5f} lr 3.0e-04 grad_norm {rng.random() * 3:.3f}\n")
        bars = "".join(f"Epoch 3: {p:3d}%|{'#' * (p // 10):10s}| {p}/100 [00:{p % 60:02d}<00:10, 9.{p % 10}it/s]\r"
                       for p in range(step % 7, 100, 29))
        out.append(bars + "\n")
    if step % 480 < 24:
        out.append("/usr/local/lib/python3.11/site-packages/torch/optim/lr_scheduler.py:139: UserWarning: "
                   "Detected call of `lr_scheduler.step()` before `optimizer.step()`.\n  warnings.warn(\n")
    return "".join(out)


def write_training_log(path: Path, size: int, traceback: str = TRACEBACK_30, seed: int = 0) -> int:
    """Write ``size`` bytes (about) of training log, then ``traceback``; return the bytes written."""
    rng = random.Random(seed)
    # A pool of blocks reused round-robin: realistic text without paying for random() per byte.
    pool = [_block(rng, i * 24).encode() for i in range(64)]
    tail = traceback.encode()
    written = 0
    with open(path, "wb", buffering=1 << 20) as fh:
        i = 0
        while written + len(tail) < size:
            b = pool[i % len(pool)]
            fh.write(b)
            written += len(b)
            i += 1
        fh.write(tail)
        written += len(tail)
    return written


def write_one_line(path: Path, size: int, suffix: bytes = b"") -> int:
    """``size`` bytes with no newline at all (a progress bar that never ends), then ``suffix``."""
    piece = b"x" * (1 << 20)
    written = 0
    with open(path, "wb") as fh:
        while written < size:
            n = min(len(piece), size - written)
            fh.write(piece[:n])
            written += n
        fh.write(suffix)
    return written + len(suffix)


# --- a 3,000-line model project --------------------------------------------------------------
_LAYER = '''

class Block{i}(nn.Module):
    """Residual block number {i}."""

    def __init__(self, dim: int = 64):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, dim * 4)
        self.fc2 = nn.Linear(dim * 4, dim)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = self.norm(x)
        h = self.fc1(h)
        h = torch.relu(h)
        h = self.drop(h)
        h = self.fc2(h)
        return x + h
'''

_TAIL = '''

def train(model, loader, epochs: int = 1):
    criterion = nn.MSELoss(reduction="none")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(epochs):
        for x, y in loader:
            opt.zero_grad()
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            opt.step()
'''


def write_model_project(root: Path, lines: int = 3000) -> Path:
    """``root/model.py`` (~``lines`` lines) whose train() calls backward() on a per-element loss,
    and ``root/crash.log``, the traceback that call prints.  Returns the log's path."""
    root.mkdir(parents=True, exist_ok=True)
    parts = ['"""A generated model file for the patch benchmark."""\nimport torch\nimport torch.nn as nn\n']
    n = 0
    count = parts[0].count("\n")
    while count + _LAYER.count("\n") + _TAIL.count("\n") < lines:
        block = _LAYER.format(i=n)
        parts.append(block)
        count += block.count("\n")
        n += 1
    parts.append(_TAIL)
    src = "".join(parts)
    (root / "model.py").write_text(src)
    backward_line = src.splitlines().index("            loss.backward()") + 1
    log = (
        "Traceback (most recent call last):\n"
        f'  File "/home/user/proj/model.py", line {backward_line}, in train\n'
        "    loss.backward()\n"
        '  File "/usr/local/lib/python3.11/site-packages/torch/_tensor.py", line 623, in backward\n'
        "    torch.autograd.backward(\n"
        '  File "/usr/local/lib/python3.11/site-packages/torch/autograd/__init__.py", line 388, in backward\n'
        "    grad_tensors_ = _make_grads(tensors, grad_tensors_, is_grads_batched=False)\n"
        '  File "/usr/local/lib/python3.11/site-packages/torch/autograd/__init__.py", line 208, in _make_grads\n'
        "    raise RuntimeError(\n"
        "RuntimeError: grad can be implicitly created only for scalar outputs\n"
    )
    (root / "crash.log").write_text(log)
    return root / "crash.log"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    a = sub.add_parser("log")
    a.add_argument("out")
    a.add_argument("--size-mb", type=int, default=1024)
    b = sub.add_parser("model")
    b.add_argument("out")
    b.add_argument("--lines", type=int, default=3000)
    args = ap.parse_args(argv)
    if args.what == "log":
        n = write_training_log(Path(args.out), args.size_mb << 20)
        print(f"{args.out}: {n} bytes")
    else:
        print(write_model_project(Path(args.out), args.lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
