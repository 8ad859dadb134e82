"""input-dtype on small projects in tmp_path: the data is made float32 where it enters torch, on
every path into the model in one patch; model.double() is never offered; near misses get no site."""
from __future__ import annotations

import io
import textwrap

from tracefix.knowledge import load_entries
from tracefix.pipeline import diagnose

ENTRIES = load_entries()
DOUBLE = "RuntimeError: mat1 and mat2 must have the same dtype, but got Double and Float\n"


def write(root, rel, text):
    (root / rel).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def line(root, rel, needle):
    return next(i for i, t in enumerate((root / rel).read_text().splitlines(), 1) if needle in t)


def log(root, frames, message=DOUBLE):
    out = ["Traceback (most recent call last):"]
    for rel, needle, func in frames:
        n = line(root, rel, needle)
        out += [f'  File "/home/u/proj/{rel}", line {n}, in {func}', f"    {(root / rel).read_text().splitlines()[n - 1].strip()}"]
    return "\n".join(out) + "\n" + message


def run(root, text):
    (d,) = diagnose(io.BytesIO(text.encode()), ENTRIES, root, patches=True).diagnoses
    assert d.entry_id == "input-dtype"
    return d


def texts(patch):
    return {path: new for path, _old, new in patch.files}


MODEL = """
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x)
"""


def test_training_and_evaluation_data_are_made_float32_in_one_patch(tmp_path):
    write(tmp_path, "model.py", MODEL)
    write(tmp_path, "train.py", """
        import numpy as np
        import torch
        from model import Net

        train_x = torch.from_numpy(np.random.rand(8, 3))
        val_x = torch.from_numpy(np.random.rand(4, 3))
        net = Net()
        out = net(train_x)
        with torch.no_grad():
            print(net(val_x).sum().item())
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "out = net(", "<module>"), ("model.py", "return self.fc", "forward")]))
    top = d.fix_sites[0]
    assert (top.path, top.line, top.kind) == ("train.py", line(tmp_path, "train.py", "train_x ="), "input-source")
    assert d.patches[0].applicability == "safe"
    new = texts(d.patches[0])["train.py"]
    assert "torch.from_numpy(np.random.rand(8, 3)).float()" in new
    assert "torch.from_numpy(np.random.rand(4, 3)).float()" in new
    assert not any(".double()" in t for p in d.patches for t in texts(p).values())


def test_an_untraced_call_of_the_model_makes_the_source_fix_unsafe(tmp_path):
    write(tmp_path, "model.py", MODEL)
    write(tmp_path, "train.py", """
        import numpy as np
        import torch
        from model import Net

        def evaluate(net, batch):
            return net(batch)

        x = torch.from_numpy(np.random.rand(8, 3))
        net = Net()
        out = net(x)
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "out = net(", "<module>"), ("model.py", "return self.fc", "forward")]))
    assert d.fix_sites[0].kind == "input-source-unsure"
    assert d.patches[0].applicability == "unsafe"


def test_data_already_float32_gets_no_site(tmp_path):
    write(tmp_path, "model.py", MODEL)
    write(tmp_path, "train.py", """
        import numpy as np
        import torch
        from model import Net

        x = torch.from_numpy(np.random.rand(8, 3)).float()
        out = Net()(x)
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "out = Net()", "<module>"), ("model.py", "return self.fc", "forward")]))
    assert d.fix_sites == () and d.patches == ()


def test_a_half_model_fed_float32_is_not_this_familys_patch(tmp_path):
    write(tmp_path, "model.py", MODEL)
    write(tmp_path, "train.py", """
        import torch
        from model import Net

        out = Net().half()(torch.randn(8, 3))
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "out = Net()", "<module>"), ("model.py", "return self.fc", "forward")],
                          "RuntimeError: mat1 and mat2 must have the same dtype, but got Float and Half\n"))
    assert d.fix_sites == () and d.patches == ()


def test_the_model_input_inside_forward_is_followed_to_the_callers_loader(tmp_path):
    write(tmp_path, "model.py", MODEL)
    write(tmp_path, "train.py", """
        import numpy as np
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        from model import Net

        feats = np.random.rand(8, 3)
        loader = DataLoader(TensorDataset(torch.tensor(feats), torch.zeros(8)), batch_size=4)
        net = Net()
        for xb, yb in loader:
            out = net(xb)
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "out = net(", "<module>"), ("model.py", "return self.fc", "forward")]))
    assert d.fix_sites[0].line == line(tmp_path, "train.py", "loader = DataLoader")
    assert "TensorDataset(torch.tensor(feats, dtype=torch.float32), torch.zeros(8))" in texts(d.patches[0])["train.py"]
