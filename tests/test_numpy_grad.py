"""numpy-grad on small projects in tmp_path: the site where the live tensor leaves torch, and near
misses that must not be blamed (lists of numbers, arrays, already detached values)."""
from __future__ import annotations

import io
import textwrap

from tracefix.knowledge import load_entries
from tracefix.pipeline import diagnose

ENTRIES = load_entries()
ARRAY = '''  File "/home/u/.venv/lib/python3.11/site-packages/torch/_tensor.py", line 1245, in __array__
    return self.numpy()
'''
MESSAGE = "RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.\n"


def write(root, rel, text):
    (root / rel).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def log(root, frames, tail=ARRAY):
    out = ["Traceback (most recent call last):"]
    for rel, needle, func in frames:
        lines = (root / rel).read_text(encoding="utf-8").splitlines()
        n = next(i for i, t in enumerate(lines, 1) if needle in t)
        out += [f'  File "/home/u/proj/{rel}", line {n}, in {func}', f"    {lines[n - 1].strip()}"]
    return "\n".join(out) + "\n" + tail + MESSAGE


def run(root, text):
    (d,) = diagnose(io.BytesIO(text.encode()), ENTRIES, root, patches=True).diagnoses
    assert d.entry_id == "numpy-grad"
    return d


def line(root, rel, needle):
    return next(i for i, t in enumerate((root / rel).read_text().splitlines(), 1) if needle in t)


def new_text(patch, rel="train.py"):
    return next(new for path, _old, new in patch.files if path == rel)


def test_a_helpers_parameter_is_followed_to_the_callers_append(tmp_path):
    write(tmp_path, "stats.py", """
        import numpy as np

        def report(values):
            return np.mean(values)
    """)
    write(tmp_path, "train.py", """
        import torch
        from stats import report

        w = torch.zeros(2, requires_grad=True)
        seen, steps = [], []
        for step in range(3):
            loss = (w - 1).pow(2).sum()
            loss.backward()
            seen.append(loss)
            steps.append(step)
        print(report(seen))
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "print(report", "<module>"), ("stats.py", "return np.mean", "report")]))
    assert [(s.path, s.line, s.kind) for s in d.fix_sites] == [("train.py", line(tmp_path, "train.py", "seen.append"),
                                                               "numpy-append")]
    assert "seen.append(loss.item())" in new_text(d.patches[0])


def test_a_tensor_that_is_not_provably_scalar_is_stored_detached_on_the_cpu(tmp_path):
    write(tmp_path, "train.py", """
        import numpy as np
        import torch

        w = torch.ones(3, requires_grad=True)
        outs = []
        for _ in range(2):
            outs.append(w * 2)
        print(np.concatenate(outs))
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "print(np.concatenate", "<module>")]))
    assert d.fix_sites[0].kind == "numpy-append"
    assert "outs.append((w * 2).detach().cpu())" in new_text(d.patches[0])


def test_lists_of_numbers_and_arrays_are_not_blamed(tmp_path):
    write(tmp_path, "train.py", """
        import numpy as np
        import torch

        w = torch.ones(3, requires_grad=True)
        nums, arrays = [], []
        for _ in range(2):
            nums.append(float(w.sum()))
            arrays.append((w * 2).detach().numpy())
        print(np.mean(nums), np.concatenate(arrays))
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "print(np.mean", "<module>")]))
    assert d.fix_sites == () and d.patches == ()


def test_numpy_on_the_crash_line_is_detached_and_copied_not_only_moved(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        w = torch.ones(3, requires_grad=True)
        y = (w * 2).cpu().numpy()
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "y = (w", "<module>")], tail=""))
    assert d.fix_sites[0].kind == "numpy-call"
    assert "y = (w * 2).detach().cpu().numpy()" in new_text(d.patches[0])


def test_a_tensor_argument_is_handed_over_detached(tmp_path):
    write(tmp_path, "train.py", """
        import numpy as np
        import torch

        w = torch.ones(3, requires_grad=True)
        scores = torch.sigmoid(w)
        print(np.round(scores, 2))
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "print(np.round", "<module>")]))
    assert d.fix_sites[0].kind == "numpy-arg"
    assert "print(np.round(scores.detach().cpu().numpy(), 2))" in new_text(d.patches[0])
