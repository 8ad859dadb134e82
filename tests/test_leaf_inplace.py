"""leaf-inplace on small projects in tmp_path: an update or init helper is decorated with
@torch.no_grad(); a write inside a training step is wrapped instead; the out-of-place rebinding
that leaves the parameter unchanged is never offered."""
from __future__ import annotations

import io
import textwrap

from tracefix.knowledge import load_entries
from tracefix.pipeline import diagnose

ENTRIES = load_entries()
MESSAGE = "RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.\n"


def write(root, rel, text):
    (root / rel).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def line(root, rel, needle):
    return next(i for i, t in enumerate((root / rel).read_text().splitlines(), 1) if needle in t)


def log(root, frames, message=MESSAGE):
    out = ["Traceback (most recent call last):"]
    for rel, needle, func in frames:
        n = line(root, rel, needle)
        out += [f'  File "/home/u/proj/{rel}", line {n}, in {func}', f"    {(root / rel).read_text().splitlines()[n - 1].strip()}"]
    return "\n".join(out) + "\n" + message


def run(root, text):
    (d,) = diagnose(io.BytesIO(text.encode()), ENTRIES, root, patches=True).diagnoses
    assert d.entry_id == "leaf-inplace"
    for p in d.patches:
        for _path, _old, new in p.files:
            assert "p = p -" not in new and "w = w -" not in new
    return d


def new_text(patch, rel="train.py"):
    return next(new for path, _old, new in patch.files if path == rel)


def test_a_write_inside_a_training_step_wraps_the_parameter_loop_not_the_step(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        w = torch.zeros(2, requires_grad=True)

        def train_step(x):
            loss = (w * x).sum()
            loss.backward()
            for p in [w]:
                p -= 0.1 * p.grad
            return loss

        train_step(torch.ones(2))
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "train_step(torch", "<module>"), ("train.py", "p -= 0.1", "train_step")]))
    assert [(s.line, s.kind) for s in d.fix_sites] == [(line(tmp_path, "train.py", "for p in [w]"), "leaf-nograd-block")]
    new = new_text(d.patches[0])
    assert "    with torch.no_grad():\n        for p in [w]:\n            p -= 0.1 * p.grad\n" in new
    assert "@torch.no_grad()" not in new


def test_a_view_of_a_leaf_in_an_init_helper_decorates_the_helper(tmp_path):
    write(tmp_path, "init.py", """
        def zero_first_column(linear):
            linear.weight[:, 0].zero_()
    """)
    write(tmp_path, "train.py", """
        import torch.nn as nn
        from init import zero_first_column

        layer = nn.Linear(3, 2)
        zero_first_column(layer)
    """)
    text = log(tmp_path, [("train.py", "zero_first_column(layer)", "<module>"), ("init.py", "zero_()", "zero_first_column")],
               "RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.\n")
    d = run(tmp_path, text)
    assert [(s.path, s.line, s.kind) for s in d.fix_sites] == [("init.py", 1, "leaf-nograd-def")]
    assert new_text(d.patches[0], "init.py").startswith("import torch\n\n\n@torch.no_grad()\ndef zero_first_column")


def test_a_write_already_under_no_grad_gets_no_site(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        w = torch.zeros(2, requires_grad=True)
        with torch.no_grad():
            w[0] = 1.0
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "w[0] = 1.0", "<module>")]))
    assert d.fix_sites == () and d.patches == ()


def test_a_line_that_writes_nothing_in_place_gets_no_site(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        w = torch.zeros(2, requires_grad=True)
        y = w * 2
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "y = w * 2", "<module>")]))
    assert d.fix_sites == ()
