"""view-contiguous on small projects in tmp_path: the .view whose receiver lost its layout is the
site, with the transpose named; another .view on the line ranks after it."""
from __future__ import annotations

import io
import textwrap

from tracefix.knowledge import load_entries
from tracefix.pipeline import diagnose

ENTRIES = load_entries()
MESSAGE = ("RuntimeError: view size is not compatible with input tensor's size and stride (at least one dimension "
           "spans across two contiguous subspaces). Use .reshape(...) instead.\n")


def test_the_view_of_the_transposed_tensor_ranks_first(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import torch

        a = torch.randn(4, 6)
        b = a.t()
        out = a.view(6, 4) + b.view(24).view(6, 4)
    """).lstrip("\n"))
    log = ('Traceback (most recent call last):\n  File "/home/u/proj/train.py", line 5, in <module>\n'
           "    out = a.view(6, 4) + b.view(24).view(6, 4)\n" + MESSAGE)
    (d,) = diagnose(io.BytesIO(log.encode()), ENTRIES, tmp_path, patches=True).diagnoses
    assert d.entry_id == "view-contiguous"
    top = d.fix_sites[0]
    assert top.col == len("out = a.view(6, 4) + b.")
    assert "layout changed at train.py:4" in top.reason
    assert "b.reshape(24)" in d.patches[0].files[0][2]
    assert all(s.score < top.score for s in d.fix_sites[1:])
