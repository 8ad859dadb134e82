"""target-dtype on small projects in tmp_path: the labels are fixed where they are built, every
builder that feeds a call of the loss in one patch; near misses get no site."""
from __future__ import annotations

import io
import textwrap

from tracefix.knowledge import load_entries
from tracefix.pipeline import diagnose

ENTRIES = load_entries()
LONG = "RuntimeError: expected target dtype to be Long or Byte, but got Float\n"
FLOAT = "RuntimeError: result type Float can't be cast to the desired output type Long\n"


def write(root, rel, text):
    (root / rel).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def line(root, rel, needle):
    return next(i for i, t in enumerate((root / rel).read_text().splitlines(), 1) if needle in t)


def log(root, frames, message=LONG):
    out = ["Traceback (most recent call last):"]
    for rel, needle, func in frames:
        n = line(root, rel, needle)
        out += [f'  File "/home/u/proj/{rel}", line {n}, in {func}', f"    {(root / rel).read_text().splitlines()[n - 1].strip()}"]
    return "\n".join(out) + "\n" + message


def run(root, text):
    (d,) = diagnose(io.BytesIO(text.encode()), ENTRIES, root, patches=True).diagnoses
    assert d.entry_id == "target-dtype"
    return d


def texts(patch):
    return {path: new for path, _old, new in patch.files}


def test_separate_train_and_validation_builders_are_fixed_in_one_patch(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        X, Xv = torch.randn(16, 2), torch.randn(8, 2)
        train = DataLoader(TensorDataset(X, (X[:, 0] > 0).float()), batch_size=4)
        val = DataLoader(TensorDataset(Xv, (Xv[:, 0] > 0).float()), batch_size=4)
        model = nn.Linear(2, 2)
        criterion = nn.CrossEntropyLoss()
        for xb, yb in train:
            loss = criterion(model(xb), yb)
        for xb, yb in val:
            print(criterion(model(xb), yb).item())
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "loss = criterion", "<module>")]))
    top = d.fix_sites[0]
    assert (top.path, top.line, top.kind) == ("train.py", line(tmp_path, "train.py", "train = DataLoader"), "target-source")
    assert d.patches[0].applicability == "safe"
    new = texts(d.patches[0])["train.py"]
    assert "TensorDataset(X, (X[:, 0] > 0).long())" in new and "TensorDataset(Xv, (Xv[:, 0] > 0).long())" in new


def test_a_collate_fn_dict_is_followed_by_key(tmp_path):
    write(tmp_path, "data.py", """
        import torch

        def collate(items):
            return {"x": torch.stack([i[0] for i in items]), "labels": torch.tensor([i[1] for i in items])}
    """)
    write(tmp_path, "train.py", """
        import torch
        import torch.nn.functional as F
        from torch.utils.data import DataLoader
        from data import collate

        items = [(torch.randn(3), i % 2) for i in range(8)]
        loader = DataLoader(items, batch_size=4, collate_fn=collate)
        w = torch.zeros(3, requires_grad=True)
        for batch in loader:
            loss = F.binary_cross_entropy_with_logits(batch["x"] @ w, batch["labels"])
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "loss = F.binary", "<module>")], FLOAT))
    assert (d.fix_sites[0].path, d.fix_sites[0].kind) == ("data.py", "target-source")
    assert 'torch.tensor([i[1] for i in items], dtype=torch.float32)' in texts(d.patches[0])["data.py"]


def test_a_call_whose_labels_are_not_traced_makes_the_source_fix_unsafe(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        import torch.nn as nn

        def evaluate(model, criterion, batches):
            for xb, yb in batches:
                print(criterion(model(xb), yb).item())

        X = torch.randn(8, 2)
        y = (X[:, 0] > 0).float()
        model, criterion = nn.Linear(2, 2), nn.CrossEntropyLoss()
        loss = criterion(model(X), y)
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "loss = criterion", "<module>")]))
    assert d.fix_sites[0].kind == "target-source-unsure"
    assert d.patches[0].applicability == "unsafe"


def test_the_cast_at_the_loss_covers_every_call(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        import torch.nn as nn

        def batches():
            return [(torch.randn(4, 2), torch.zeros(4))]

        model, criterion = nn.Linear(2, 2), nn.CrossEntropyLoss()
        for xb, yb in batches():
            loss = criterion(model(xb), yb)
        for xb, yb in batches():
            print(criterion(model(xb), yb).item())
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "loss = criterion", "<module>")]))
    cast = next(p for p in d.patches if "Cast the target" in p.summary)
    assert cast.applicability == "safe"
    new = texts(cast)["train.py"]
    assert new.count("yb.long()") == 2


def test_labels_already_built_right_get_no_site(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        import torch.nn as nn

        X = torch.randn(8, 2)
        y = (X[:, 0] > 0).long()
        loss = nn.CrossEntropyLoss()(nn.Linear(2, 2)(X), y)
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "loss = nn", "<module>")]))
    assert d.fix_sites == () and d.patches == ()


def test_in_place_arithmetic_on_an_int_tensor_is_not_blamed_on_a_loss(tmp_path):
    # the same wording comes from `counts += 0.5` on a Long tensor: there is no loss call to fix
    write(tmp_path, "train.py", """
        import torch

        counts = torch.zeros(3, dtype=torch.long)
        counts += 0.5
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "counts += 0.5", "<module>")], FLOAT))
    assert d.fix_sites == () and d.patches == ()
