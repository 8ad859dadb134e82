"""linear-shape on small projects in tmp_path: which Linear is the fix site, what is written, and
the near misses that must get no patch (a factory's parameter, a folded batch with no flatten in
sight, a plain matmul, layers whose sizes are not the message's)."""
from __future__ import annotations

import io
import textwrap

from tracefix.knowledge import load_entries
from tracefix.pipeline import diagnose

ENTRIES = load_entries()
TORCH = '''  File "/home/u/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1789, in _call_impl
    return forward_call(*args, **kwargs)
  File "/home/u/.venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", line 134, in forward
    return F.linear(input, self.weight, self.bias)
'''


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def log(root, frames, sizes, torch_frames=TORCH):
    """A torch 2.13 traceback through ``frames`` ((rel, needle, func), outermost first)."""
    out = ["Traceback (most recent call last):"]
    for rel, needle, func in frames:
        lines = (root / rel).read_text(encoding="utf-8").splitlines()
        n = next(i for i, t in enumerate(lines, 1) if needle in t)
        out += [f'  File "/home/u/proj/{rel}", line {n}, in {func}', f"    {lines[n - 1].strip()}"]
    return "\n".join(out) + "\n" + torch_frames + f"RuntimeError: mat1 and mat2 shapes cannot be multiplied ({sizes})\n"


def run(root, text):
    (d,) = diagnose(io.BytesIO(text.encode()), ENTRIES, root, patches=True).diagnoses
    assert d.entry_id == "linear-shape"
    return d


def line(root, rel, needle):
    return next(i for i, t in enumerate((root / rel).read_text().splitlines(), 1) if needle in t)


def new_text(patch, rel):
    return next(new for path, _old, new in patch.files if path == rel)


NET = """
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self, hidden=32):
            super().__init__()
            self.fc1 = nn.Linear(20, hidden)
            self.fc2 = nn.Linear(16, 5)
            self.other = nn.Linear(16, 7)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))
"""


def test_the_called_layer_with_the_messages_sizes_is_first_and_reads_the_previous_layers_name(tmp_path):
    write(tmp_path, "model.py", NET)
    d = run(tmp_path, log(tmp_path, [("model.py", "return self.fc2", "forward")], "4x32 and 16x5"))
    top = d.fix_sites[0]
    assert (top.path, top.line, top.kind) == ("model.py", line(tmp_path, "model.py", "self.fc2 ="), "linear-in-features")
    # self.other is Linear(16, 7): its out_features is not the message's 5
    assert [s.line for s in d.fix_sites] == [top.line]
    assert d.patches[0].applicability == "safe"
    assert "self.fc2 = nn.Linear(hidden, 5)" in new_text(d.patches[0], "model.py")


def test_a_factorys_parameter_is_left_to_its_callers(tmp_path):
    write(tmp_path, "model.py", """
        import torch.nn as nn

        def block(d_in, d_out):
            return nn.Sequential(nn.Linear(d_in, d_out), nn.ReLU())

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = block(8, 16)
                self.b = block(32, 4)

            def forward(self, x):
                return self.b(self.a(x))
    """)
    d = run(tmp_path, log(tmp_path, [("model.py", "return self.b", "forward")], "4x16 and 32x4"))
    # the factory's Linear(d_in, d_out) serves both blocks: rewriting d_in there breaks block a,
    # so the fix is the argument of the call that builds block b
    top = d.fix_sites[0]
    assert (top.line, top.kind) == (line(tmp_path, "model.py", "self.b = block"), "factory-in-features")
    for p in d.patches:
        assert "nn.Linear(d_in, d_out)" in new_text(p, "model.py"), p.diff
    assert "self.b = block(16, 4)" in new_text(d.patches[0], "model.py")


def test_a_folded_batch_blames_the_flatten_not_the_layer(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        import torch.nn as nn

        fc = nn.Linear(64, 10)
        x = torch.randn(16, 8, 8)
        out = fc(x.view(-1))
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "out = fc(", "<module>")], "1x1024 and 64x10"))
    assert [(s.line, s.kind) for s in d.fix_sites] == [(line(tmp_path, "train.py", "out = fc("), "flatten-batch")]
    assert "out = fc(x.view(x.size(0), -1))" in new_text(d.patches[0], "train.py")


def test_a_folded_batch_without_a_flatten_in_sight_gets_a_note_and_no_patch(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        import torch.nn as nn

        fc = nn.Linear(64, 10)
        flat = torch.randn(1, 1024)
        out = fc(flat)
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "out = fc(", "<module>")], "1x1024 and 64x10"))
    assert d.fix_sites == () and d.patches == ()
    assert any("batch dimension was flattened" in n for n in d.notes)


def test_a_matmul_of_the_users_own_tensors_names_no_layer(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        import torch.nn as nn

        head = nn.Linear(8, 3)
        w = torch.randn(7, 3)
        y = torch.randn(4, 8) @ w
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "y = torch.randn", "<module>")], "4x8 and 7x3", torch_frames=""))
    assert d.fix_sites == () and d.patches == ()


def test_loading_saved_weights_makes_the_patch_unsafe(tmp_path):
    write(tmp_path, "model.py", NET)
    write(tmp_path, "train.py", """
        import torch
        from model import Net

        model = Net()
        model.load_state_dict(torch.load("ckpt.pt"))
        model(torch.randn(4, 20))
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "model(torch.randn", "<module>"),
                                     ("model.py", "return self.fc2", "forward")], "4x32 and 16x5"))
    assert d.patches[0].applicability == "unsafe"
    assert "checkpoint" in d.patches[0].reason


def test_a_product_keeps_its_channels_and_solves_the_spatial_size(tmp_path):
    write(tmp_path, "model.py", """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 16, 3)
                self.fc = nn.Linear(16 * 5 * 5, 10)

            def forward(self, x):
                return self.fc(torch.flatten(self.conv(x), 1))
    """)
    d = run(tmp_path, log(tmp_path, [("model.py", "return self.fc", "forward")], "2x576 and 400x10"))
    assert "self.fc = nn.Linear(16 * 6 * 6, 10)" in new_text(d.patches[0], "model.py")


def test_what_every_caller_passes_names_the_parameter_to_read(tmp_path):
    write(tmp_path, "vit.py", """
        import torch.nn as nn

        class ViT(nn.Module):
            def __init__(self, num_classes, dim, mlp_dim):
                super().__init__()
                self.mlp = nn.Linear(dim, mlp_dim)
                self.head = nn.Linear(mlp_dim, num_classes)

            def forward(self, x):
                return self.head(x[:, 0])
    """)
    write(tmp_path, "train.py", """
        import torch
        from vit import ViT
        model = ViT(num_classes=2, dim=16, mlp_dim=32)
        logits = model(torch.randn(8, 5, 16))
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "logits = model(", "<module>"), ("vit.py", "return self.head", "forward")],
                          "8x16 and 32x2"))
    assert d.fix_sites[0].line == line(tmp_path, "vit.py", "self.head =")
    assert "self.head = nn.Linear(dim, num_classes)" in new_text(d.patches[0], "vit.py")
