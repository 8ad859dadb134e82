"""device-mismatch on small projects in tmp_path (CUDA wordings; the logs cannot be produced on a
CPU machine): the tensor that stayed behind is moved with the program's own device expression."""
from __future__ import annotations

import io
import textwrap

from tracefix.knowledge import load_entries
from tracefix.pipeline import diagnose

ENTRIES = load_entries()
MESSAGE = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!\n"


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
    assert d.entry_id == "device-mismatch"
    return d


MODEL = """
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x)
"""


def test_a_model_never_moved_is_moved_where_it_is_built(tmp_path):
    write(tmp_path, "model.py", MODEL)
    write(tmp_path, "train.py", """
        import torch
        from model import Net

        device = torch.device("cuda")
        net = Net()
        x = torch.randn(4, 3).to(device)
        out = net(x)
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "out = net(x)", "<module>"), ("model.py", "return self.fc", "forward")]))
    assert [(s.path, s.line, s.kind) for s in d.fix_sites] == [("train.py", 5, "model-to-device")]
    assert "net = Net().to(device)" in d.patches[0].files[0][2]


def test_a_moved_batch_and_a_moved_model_blame_nothing_in_the_loop(tmp_path):
    write(tmp_path, "model.py", MODEL)
    write(tmp_path, "train.py", """
        import torch
        from model import Net

        device = torch.device("cuda")
        net = Net().to(device)
        x = torch.randn(4, 3).to(device)
        out = net(x)
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "out = net(x)", "<module>"), ("model.py", "return self.fc", "forward")]))
    assert d.fix_sites == ()


def test_without_a_device_expression_nothing_is_guessed(tmp_path):
    write(tmp_path, "model.py", MODEL)
    write(tmp_path, "train.py", """
        import torch
        from model import Net

        net = Net().cuda()
        for x in [torch.randn(4, 3)]:
            out = net(x)
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "out = net(x)", "<module>"), ("model.py", "return self.fc", "forward")]))
    assert d.patches == ()


def test_a_plain_tensor_attribute_becomes_a_buffer(tmp_path):
    write(tmp_path, "model.py", """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)
                self.scale = torch.ones(3)

            def forward(self, x):
                return self.fc(x) * self.scale
    """)
    write(tmp_path, "train.py", """
        import torch
        from model import Net

        device = torch.device("cuda")
        net = Net().to(device)
        out = net(torch.randn(2, 3).to(device))
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "out = net(", "<module>"), ("model.py", "return self.fc", "forward")]))
    assert [(s.path, s.line, s.kind) for s in d.fix_sites] == [("model.py", 8, "buffer-attribute")]
    assert 'self.register_buffer("scale", torch.ones(3), persistent=False)' in d.patches[0].files[0][2]


def test_a_criterions_class_weights_are_moved(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        import torch.nn as nn

        device = torch.device("cuda")
        model = nn.Linear(3, 2).to(device)
        criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0]))
        x, y = torch.randn(4, 3).to(device), torch.tensor([0, 1, 1, 0]).to(device)
        loss = criterion(model(x), y)
    """)
    text = ('Traceback (most recent call last):\n  File "/home/u/proj/train.py", line 8, in <module>\n'
            "    loss = criterion(model(x), y)\n"
            "RuntimeError: Expected all tensors to be on the same device, but got weight is on cpu, different from "
            "other tensors on cuda:0 (when checking argument in method wrapper_CUDA_nll_loss_forward)\n")
    d = run(tmp_path, text)
    assert [(s.line, s.kind) for s in d.fix_sites] == [(6, "to-device-input")]
    assert "nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0]).to(device))" in d.patches[0].files[0][2]
