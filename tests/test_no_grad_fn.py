"""no-grad-fn on small projects in tmp_path: the no_grad scope or the cut on the loss's path is the
fix site; evaluation code off that path is not blamed; loss.requires_grad_() is never offered."""
from __future__ import annotations

import io
import textwrap

from tracefix.knowledge import load_entries
from tracefix.pipeline import diagnose

ENTRIES = load_entries()
MESSAGE = "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn\n"


def write(root, rel, text):
    (root / rel).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def line(root, rel, needle):
    return next(i for i, t in enumerate((root / rel).read_text().splitlines(), 1) if needle in t)


def log(root, frames):
    out = ["Traceback (most recent call last):"]
    for rel, needle, func in frames:
        n = line(root, rel, needle)
        out += [f'  File "/home/u/proj/{rel}", line {n}, in {func}', f"    {(root / rel).read_text().splitlines()[n - 1].strip()}"]
    return "\n".join(out) + "\n" + MESSAGE


def run(root, text):
    (d,) = diagnose(io.BytesIO(text.encode()), ENTRIES, root, patches=True).diagnoses
    assert d.entry_id == "no-grad-fn"
    assert not any("requires_grad_()" in new or "requires_grad = True" in new
                   for p in d.patches for _path, _old, new in p.files)
    return d


def sites(d):
    return [(s.path, s.line, s.kind) for s in d.fix_sites]


def test_a_decorated_step_on_the_traceback_is_the_site(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        w = torch.ones(2, requires_grad=True)

        @torch.no_grad()
        def train_step(x):
            loss = (w * x).sum()
            loss.backward()

        train_step(torch.ones(2))
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "train_step(torch", "<module>"), ("train.py", "loss.backward", "train_step")]))
    assert sites(d)[0] == ("train.py", line(tmp_path, "train.py", "@torch.no_grad"), "nograd-decorator")
    assert d.patches[0].applicability == "safe"


def test_evaluation_off_the_loss_path_is_not_blamed(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        w = torch.ones(2, requires_grad=True)
        x = torch.ones(2)
        with torch.no_grad():
            shown = (w * 3).detach().sum()
        logits = (w * x).detach()
        loss = logits.sum()
        loss.backward()
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "loss.backward", "<module>")]))
    assert sites(d) == [("train.py", line(tmp_path, "train.py", "logits ="), "detach-in-loss")]
    assert "logits = (w * x)\n" in d.patches[0].files[0][2]


def test_a_block_that_also_runs_other_statements_is_unsafe_to_remove(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        w = torch.ones(2, requires_grad=True)
        ema = torch.zeros(2)
        with torch.no_grad():
            loss = (w * 2).sum()
            ema.mul_(0.9).add_(w, alpha=0.1)
        loss.backward()
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "loss.backward", "<module>")]))
    assert sites(d)[0][2] == "nograd-block-mixed"
    assert d.patches[0].applicability == "unsafe"


def test_a_helper_also_called_outside_no_grad_is_unsafe_to_undecorate(tmp_path):
    write(tmp_path, "steps.py", """
        import torch

        @torch.no_grad()
        def batch_loss(w, x):
            return (w * x).sum()
    """)
    write(tmp_path, "train.py", """
        import torch
        from steps import batch_loss

        w = torch.ones(2, requires_grad=True)
        print(batch_loss(w, torch.zeros(2)))
        loss = batch_loss(w, torch.ones(2))
        loss.backward()
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "loss.backward", "<module>")]))
    assert sites(d)[0] == ("steps.py", 3, "nograd-decorator-shared")
    assert d.patches[0].applicability == "unsafe"


def test_frozen_parameters_are_named_not_patched(tmp_path):
    write(tmp_path, "train.py", """
        import torch.nn as nn

        model = nn.Linear(2, 1)
        for p in model.parameters():
            p.requires_grad = False
        loss = model.weight.sum()
        loss.backward()
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "loss.backward", "<module>")]))
    assert sites(d) == [("train.py", line(tmp_path, "train.py", "p.requires_grad = False"), "frozen-params")]
    assert d.patches == ()


def test_a_reentrant_checkpoint_in_the_models_forward(tmp_path):
    write(tmp_path, "model.py", """
        import torch.nn as nn
        from torch.utils.checkpoint import checkpoint

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = nn.Linear(2, 2)

            def forward(self, x):
                return checkpoint(self.block, x, use_reentrant=True)
    """)
    write(tmp_path, "train.py", """
        import torch
        from model import Net

        net = Net()
        loss = net(torch.ones(1, 2)).sum()
        loss.backward()
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "loss.backward", "<module>")]))
    assert sites(d)[0] == ("model.py", line(tmp_path, "model.py", "use_reentrant"), "reentrant-checkpoint")
    assert "use_reentrant=False" in d.patches[0].files[0][2]
