"""backward-twice on small projects in tmp_path: the carried state or shared value that is
detached, how it is detached, honest labels, and what is not blamed."""
from __future__ import annotations

import io
import textwrap

from tracefix.knowledge import load_entries
from tracefix.pipeline import diagnose

ENTRIES = load_entries()
MESSAGE = ("RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors "
           "after they have already been freed).\n")


def project(tmp_path, text, needle):
    (tmp_path / "train.py").write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    lines = (tmp_path / "train.py").read_text().splitlines()
    n = next(i for i, t in enumerate(lines, 1) if needle in t)
    return diagnosed(tmp_path, f'Traceback (most recent call last):\n  File "/home/u/proj/train.py", line {n}, in '
                               f'<module>\n    {lines[n - 1].strip()}\n')


def diagnosed(tmp_path, log):
    """The one backward-twice diagnosis of ``log`` (the message appended), with its patches."""
    (d,) = diagnose(io.BytesIO((log + MESSAGE).encode()), ENTRIES, tmp_path, patches=True).diagnoses
    assert d.entry_id == "backward-twice"
    return d


def line(tmp_path, needle):
    return next(i for i, t in enumerate((tmp_path / "train.py").read_text().splitlines(), 1) if needle in t)


def new_text(patch):
    return next(new for path, _old, new in patch.files if path == "train.py")


def test_an_lstm_state_pair_is_detached_part_by_part(tmp_path):
    d = project(tmp_path, """
        import torch
        import torch.nn as nn
        lstm = nn.LSTM(4, 8)
        state = (torch.zeros(1, 2, 8), torch.zeros(1, 2, 8))
        for step in range(3):
            out, state = lstm(torch.randn(5, 2, 4), state)
            loss = out.pow(2).mean()
            loss.backward()
    """, "loss.backward()")
    assert (d.fix_sites[0].line, d.fix_sites[0].kind) == (line(tmp_path, "out, state = lstm"), "detach-carried")
    assert "lstm(torch.randn(5, 2, 4), tuple(h.detach() for h in state))" in new_text(d.patches[0])
    assert d.patches[0].applicability == "safe"


def test_a_state_of_unknown_shape_gets_an_unsafe_patch(tmp_path):
    d = project(tmp_path, """
        import torch
        from mymodels import build
        model, state = build()
        for step in range(3):
            out, state = model(torch.randn(2, 4), state)
            loss = out.sum()
            loss.backward()
    """, "loss.backward()")
    assert d.fix_sites[0].kind == "detach-carried-unsure"
    assert d.patches[0].applicability == "unsafe" and "tuple" in d.patches[0].reason


def test_a_running_total_of_numbers_is_not_blamed(tmp_path):
    d = project(tmp_path, """
        import torch
        w = torch.ones(3, requires_grad=True)
        emb = torch.tanh(w * 2)
        total = 0.0
        for step in range(3):
            loss = (emb * step).sum()
            total += loss.item()
            loss.backward()
    """, "loss.backward()")
    # emb is built once before the loop: named, never patched
    assert [(s.line, s.kind) for s in d.fix_sites] == [(line(tmp_path, "emb = torch.tanh"), "graph-before-loop")]
    assert d.patches == ()


def test_a_shared_value_without_zeroed_gradients_between_is_unsafe(tmp_path):
    d = project(tmp_path, """
        import torch
        import torch.nn as nn
        G, D = nn.Linear(2, 3), nn.Linear(3, 1)
        for step in range(3):
            fake = G(torch.randn(4, 2))
            d_loss = D(fake).mean()
            d_loss.backward()
            g_loss = -D(fake).mean()
            g_loss.backward()
    """, "g_loss.backward()")
    top = d.fix_sites[0]
    assert (top.line, top.kind) == (line(tmp_path, "d_loss = D(fake)"), "detach-shared-unsure")
    assert "d_loss = D(fake.detach()).mean()" in new_text(d.patches[0])
    assert d.patches[0].applicability == "unsafe"


def test_a_first_backward_that_retains_the_graph_is_not_the_cause(tmp_path):
    d = project(tmp_path, """
        import torch
        import torch.nn as nn
        G, D = nn.Linear(2, 3), nn.Linear(3, 1)
        hidden = torch.zeros(3)
        for step in range(3):
            fake = G(torch.randn(4, 2)) + hidden
            d_loss = D(fake).mean()
            d_loss.backward(retain_graph=True)
            g_loss = -D(fake).mean()
            hidden = fake.mean(0)
            g_loss.backward()
    """, "g_loss.backward()")
    assert all(s.kind != "detach-shared" and s.kind != "detach-shared-unsure" for s in d.fix_sites)
    assert d.fix_sites[0].kind.startswith("detach-carried") and d.fix_sites[0].line == line(tmp_path, "fake = G(")


def framework_project(tmp_path, module_text):
    """A LightningModule-like model.py trained by a framework's loop: the log's only user frame is
    the ``trainer.fit`` line, the backward() is the library's."""
    (tmp_path / "model.py").write_text(textwrap.dedent(module_text).lstrip("\n"), encoding="utf-8")
    (tmp_path / "train.py").write_text("import lightning as L\nfrom model import Net\n\nL.Trainer().fit(Net())\n")
    log = ('Traceback (most recent call last):\n  File "/home/u/proj/train.py", line 4, in <module>\n'
           '    L.Trainer().fit(Net())\n  File "/home/u/.venv/lib/python3.11/site-packages/lightning/pytorch/'
           'core/module.py", line 1137, in backward\n    loss.backward(*args, **kwargs)\n')
    return diagnosed(tmp_path, log)


def _model_line(tmp_path, needle):
    return next(i for i, t in enumerate((tmp_path / "model.py").read_text().splitlines(), 1) if needle in t)


def _model_text(patch):
    return next(new for path, _old, new in patch.files if path == "model.py")


STATEFUL = """
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.{kind}(4, 8, batch_first=True)
            self.hidden = {init}

        def training_step(self, batch, batch_idx):
            out, self.hidden = self.rnn(batch, {read})
            return out.pow(2).mean()
"""


def test_a_state_attribute_carried_across_framework_steps_is_detached_where_read(tmp_path):
    d = framework_project(tmp_path, STATEFUL.format(kind="LSTM", init="None", read="self.hidden"))
    top = d.fix_sites[0]
    assert (top.path, top.line, top.kind) == ("model.py", _model_line(tmp_path, "out, self.hidden"), "detach-carried-attr")
    assert "self.rnn(batch, (None if self.hidden is None else tuple(h.detach() for h in self.hidden)))" \
        in _model_text(d.patches[0])
    assert d.patches[0].applicability == "safe"


def test_a_gru_state_made_by_a_factory_is_detached_as_one_tensor(tmp_path):
    d = framework_project(tmp_path, STATEFUL.format(kind="GRU", init="torch.zeros(1, 2, 8)", read="self.hidden"))
    assert "out, self.hidden = self.rnn(batch, self.hidden.detach())" in _model_text(d.patches[0])
    assert d.patches[0].applicability == "safe"


def test_a_state_of_an_unknown_module_gets_an_unsafe_patch(tmp_path):
    d = framework_project(tmp_path, STATEFUL.format(kind="Linear", init="None", read="self.hidden"))
    assert d.fix_sites[0].kind == "detach-carried-attr-unsure"
    assert d.patches[0].applicability == "unsafe"


def test_an_attribute_already_detached_or_not_assigned_back_is_not_blamed(tmp_path):
    d = framework_project(tmp_path, STATEFUL.format(kind="GRU", init="None", read="self.hidden.detach()"))
    assert not any(s.kind.startswith("detach-carried-attr") for s in d.fix_sites)
    d = framework_project(tmp_path, STATEFUL.format(kind="GRU", init="None", read="self.h0").replace(
        "out, self.hidden =", "out, _ ="))
    assert not any(s.kind.startswith("detach-carried-attr") for s in d.fix_sites)
