"""Locator: crash site and ranked fix sites, on small project trees built in tmp_path."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Sequence, Tuple

import pytest

from tracefix.knowledge import Entry
from tracefix.locator import locate, op_family
from tracefix.records import Diagnosis, Frame, Traceback

SITE = "/opt/conda/lib/python3.11/site-packages"
TORCH_BACKWARD = (
    Frame(f"{SITE}/torch/_tensor.py", 623, "backward", "torch.autograd.backward("),
    Frame(f"{SITE}/torch/autograd/__init__.py", 388, "backward", "_engine_run_backward("),
)
NONSCALAR = "grad can be implicitly created only for scalar outputs"
INPLACE = ("one of the variables needed for gradient computation has been modified by an inplace "
           "operation: [torch.FloatTensor [8, 4]], which is output 0 of {node}, is at version 1; "
           "expected version 0 instead.")
LEAF = ("one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [torch.FloatTensor [3, 3]] is at version 1; expected version 0 instead.")
FP16 = "Attempting to unscale FP16 gradients."
BF16 = "\"_amp_foreach_non_finite_check_and_unscale_cuda\" not implemented for 'BFloat16'"
SCALER_FRAMES = (
    Frame(f"{SITE}/torch/amp/grad_scaler.py", 473, "step", "self.unscale_(optimizer)"),
    Frame(f"{SITE}/torch/amp/grad_scaler.py", 358, "unscale_", "optimizer_state[\"found_inf_per_device\"] = self._unscale_grads_("),
)


def entry(locate_as: str) -> Entry:
    try:
        from tracefix.knowledge import load_entries
        for e in load_entries():
            if e.locate == locate_as:
                return e
    except Exception:
        pass
    return Entry(id=f"test-{locate_as}", title=locate_as, exception_types=("RuntimeError",),
                 keywords=("x",), patterns=(), aliases=(), exclude=(), fuzzy_threshold=90.0,
                 locate=locate_as, fixes=(), references=(), explain=())


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def line_of(root: Path, rel: str, needle: str, nth: int = 0) -> int:
    hits = [i for i, ln in enumerate((root / rel).read_text().splitlines(), 1) if needle in ln]
    return hits[nth]


def user_frame(root: Path, rel: str, needle: str, prefix: str = "/workspace/proj", func: str = "main",
               nth: int = 0, code: bool = True) -> Frame:
    ln = line_of(root, rel, needle, nth)
    text = (root / rel).read_text().splitlines()[ln - 1].strip()
    return Frame(f"{prefix}/{rel}", ln, func, text if code else None)


def run(root: Path, locate_as: str, frames: Sequence[Frame], message: str,
        fields: Tuple[Tuple[str, str], ...] = (), anomaly: Sequence[Frame] = (), exc="RuntimeError",
        search=True):
    """Locate as `tracefix --root ROOT` does (search=True: the user named the folder)."""
    tb = Traceback(exc_type=exc, message=message, frames=tuple(frames), anomaly_frames=tuple(anomaly))
    diag = Diagnosis(entry_id="x", title="x", confidence=1.0, traceback=tb, fields=fields)
    out = locate(diag, entry(locate_as), root, search=search)
    assert not any("Could not finish" in n for n in out.notes), out.notes
    return out


def first(out):
    assert out.fix_sites, out.notes
    s = out.fix_sites[0]
    return s.path, s.line, s.kind


# ----------------------------------------------------------------------------------- nonscalar
def test_criterion_reduction_in_imported_loss_module(tmp_path):
    write(tmp_path, "losses.py", """
        import torch.nn as nn

        class TokenLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.crit = nn.CrossEntropyLoss(reduction="none")

            def forward(self, logits, tags):
                return self.crit(logits, tags)
        """)
    write(tmp_path, "train.py", """
        import torch
        from losses import TokenLoss

        def main():
            criterion = TokenLoss()
            for step in range(3):
                loss = criterion(model(x), y)
                loss.backward()
                print(f"{loss.item():.3f}")
        main()
        """)
    out = run(tmp_path, "nonscalar",
              [user_frame(tmp_path, "train.py", "main()", func="<module>", nth=1),
               user_frame(tmp_path, "train.py", "loss.backward()"), *TORCH_BACKWARD], NONSCALAR)
    assert out.crash_site.path == "train.py"
    assert out.crash_site.line == line_of(tmp_path, "train.py", "loss.backward()")
    assert out.crash_site.code == "loss.backward()"
    assert Path(out.crash_site.local_path) == (tmp_path / "train.py").resolve()
    kw_line = line_of(tmp_path, "losses.py", 'reduction="none"')
    assert first(out) == ("losses.py", kw_line, "criterion-reduction")
    s = out.fix_sites[0]
    assert s.col == (tmp_path / "losses.py").read_text().splitlines()[kw_line - 1].index("reduction")
    assert s.code == 'self.crit = nn.CrossEntropyLoss(reduction="none")'
    kinds = [f.kind for f in out.fix_sites]
    assert "backward-receiver" in kinds and out.fix_sites[1].score < s.score


def test_functional_reduction_none_same_function(tmp_path):
    write(tmp_path, "train.py", """
        import torch.nn.functional as F
        for x, y in loader:
            loss = F.mse_loss(model(x), y, reduction='none')
            loss.backward()
        """)
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "loss.backward()", func="<module>"),
                                      *TORCH_BACKWARD], NONSCALAR)
    assert first(out) == ("train.py", 3, "criterion-reduction")


def test_weighted_loss_used_as_scalar_gives_loss_assignment(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        crit = torch.nn.MSELoss(reduction="none")
        for epoch in range(5):
            pred = model(X)
            loss = (crit(pred, y) * weights)
            loss.backward()
            print(f"epoch {epoch} loss {loss.item():.4f}")
        """)
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "loss.backward()", func="<module>"),
                                      *TORCH_BACKWARD], NONSCALAR)
    assert first(out) == ("train.py", 5, "loss-assignment")
    assert out.fix_sites[0].col == len("    loss = ")
    assert "criterion-reduction" not in [f.kind for f in out.fix_sites]
    assert out.fix_sites[1].kind == "backward-receiver"


def test_no_scalar_use_gives_backward_receiver(tmp_path):
    write(tmp_path, "train.py", """
        def step(model, x, y, w):
            loss = w * (model(x) - y) ** 2
            loss.backward()
        """)
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "loss.backward()", func="step"),
                                      *TORCH_BACKWARD], NONSCALAR)
    assert first(out) == ("train.py", 3, "backward-receiver")
    assert out.fix_sites[0].col == 4
    assert out.fix_sites[1].kind == "loss-assignment"


def test_unreduced_value_stored_is_not_criterion_reduction(tmp_path):
    write(tmp_path, "train.py", """
        import torch.nn as nn
        crit = nn.CrossEntropyLoss(reduction="none")
        hard = []
        for x, y in loader:
            loss = crit(model(x), y)
            hard.append(loss.detach())
            loss.backward()
        """)
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "loss.backward()", func="<module>"),
                                      *TORCH_BACKWARD], NONSCALAR)
    assert first(out) == ("train.py", 7, "backward-receiver")
    assert "criterion-reduction" not in [f.kind for f in out.fix_sites]


def test_scaler_scale_and_method_return(tmp_path):
    write(tmp_path, "trainer.py", """
        import torch.nn.functional as F

        class Trainer:
            def compute_loss(self, model, inputs):
                logits = model(inputs["x"])
                return F.cross_entropy(logits, inputs["y"], reduction="none")

            def training_step(self, inputs):
                loss = self.compute_loss(self.model, inputs)
                self.scaler.scale(loss).backward()
                return loss.detach()
        """)
    frame = user_frame(tmp_path, "trainer.py", "scale(loss).backward()", func="training_step")
    out = run(tmp_path, "nonscalar", [frame, *TORCH_BACKWARD], NONSCALAR)
    assert first(out) == ("trainer.py", 6, "criterion-reduction")
    recv = [s for s in out.fix_sites if s.kind == "backward-receiver"][0]
    assert recv.line == 10 and recv.col == len("        self.scaler.scale(")


def test_accelerator_backward_receiver(tmp_path):
    write(tmp_path, "train.py", """
        for batch in loader:
            loss = model(**batch).logits
            accelerator.backward(loss)
        """)
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "accelerator.backward", func="<module>"),
                                      Frame(f"{SITE}/accelerate/accelerator.py", 2000, "backward", "loss.backward(**kwargs)"),
                                      *TORCH_BACKWARD], NONSCALAR)
    assert first(out) == ("train.py", 3, "backward-receiver")
    assert out.fix_sites[0].col == len("    accelerator.backward(")


def test_autograd_grad(tmp_path):
    write(tmp_path, "physics.py", """
        import torch
        def residual(model, t):
            u = model(t)
            du, = torch.autograd.grad(u, t, create_graph=True)
            return du
        """)
    write(tmp_path, "train.py", "from physics import residual\nres = residual(model, t)\n")
    out = run(tmp_path, "nonscalar", [
        user_frame(tmp_path, "train.py", "residual(model", func="<module>"),
        user_frame(tmp_path, "physics.py", "autograd.grad", func="residual"),
        Frame(f"{SITE}/torch/autograd/__init__.py", 567, "grad", "grad_outputs_ = _make_grads(")], NONSCALAR)
    assert out.crash_site.path == "physics.py" and out.crash_site.line == 4
    assert first(out) == ("physics.py", 4, "autograd-grad")


def test_parameter_receiver_is_followed_to_caller_and_fit_loop(tmp_path):
    write(tmp_path, "module.py", """
        import torch.nn.functional as F

        class Lit:
            def training_step(self, batch, batch_idx):
                recon = self(batch)
                loss = F.mse_loss(recon, batch, reduction="none")
                return loss
        """)
    write(tmp_path, "train.py", """
        from module import Lit

        def fit(module, batches):
            for i, batch in enumerate(batches):
                loss = module.training_step(batch, i)
                loss.backward()
                print(f"{loss.item():.4f}")

        fit(Lit(), [])
        """)
    out = run(tmp_path, "nonscalar", [
        user_frame(tmp_path, "train.py", "fit(Lit()", func="<module>"),
        user_frame(tmp_path, "train.py", "loss.backward()", func="fit"), *TORCH_BACKWARD], NONSCALAR)
    assert first(out) == ("module.py", 6, "criterion-reduction")


def test_library_crash_per_sample_return(tmp_path):
    write(tmp_path, "lit.py", """
        import torch.nn.functional as F

        class AutoEncoder:
            def training_step(self, batch, batch_idx):
                recon = self(batch)
                loss = F.mse_loss(recon, batch, reduction="none")
                return loss

            def validation_step(self, batch, batch_idx):
                return 1
        """)
    write(tmp_path, "train.py", "trainer.fit(AutoEncoder())\n")
    lightning = [Frame(f"{SITE}/lightning/pytorch/core/module.py", 1090, "backward", "loss.backward(*args, **kwargs)"),
                 *TORCH_BACKWARD]
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "trainer.fit", func="<module>"), *lightning],
              NONSCALAR)
    assert first(out) == ("lit.py", 7, "per-sample-return")
    assert any("inside a library" in n for n in out.notes)
    # no user frame at all: the same answer
    out = run(tmp_path, "nonscalar", lightning, NONSCALAR)
    assert out.crash_site is None
    assert first(out) == ("lit.py", 7, "per-sample-return")


def test_complex_variant_same_sites(tmp_path):
    write(tmp_path, "train.py", "out = model(x)\nout.backward()\n")
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "out.backward()", func="<module>"),
                                      *TORCH_BACKWARD],
              "grad can be implicitly created only for real scalar outputs but got torch.complex64",
              fields=(("dtype", "torch.complex64"),))
    assert first(out) == ("train.py", 2, "backward-receiver")


# ----------------------------------------------------------------- nonscalar: already fixed
def _fixed_note(out, where):
    return any(n.startswith(where) and "seems to have been fixed" in n for n in out.notes)


def _backward_at(tmp_path, rel, needle="loss.backward()", func="<module>"):
    return run(tmp_path, "nonscalar", [user_frame(tmp_path, rel, needle, func=func), *TORCH_BACKWARD], NONSCALAR)


@pytest.mark.parametrize("assign, fixed", [
    ("loss = ((pred - y) ** 2).mean()", True),
    ("loss = torch.mean((pred - y) ** 2)", True),
    ("loss = ((pred - y) ** 2).sum(dim=None) / 2", True),
    ("loss = F.mse_loss(pred, y)", True),
    ("loss = F.cross_entropy(pred, y, reduction='sum')", True),
    ("loss = torch.nn.functional.l1_loss(pred, y, reduction=\"mean\")", True),
    ("loss = 0.5 * F.mse_loss(pred, y) + F.l1_loss(pred, y).float()", True),
    ("loss = ((pred - y) ** 2).mean(dim=1)", False),
    ("loss = ((pred - y) ** 2).sum(1)", False),
    ("loss = F.mse_loss(pred, y, reduction='none')", False),
    ("loss = F.mse_loss(pred, y) * weights", False),
    ("loss = my_loss(pred, y)", False),
])
def test_already_reduced_loss_gives_no_fix_site(tmp_path, assign, fixed):
    write(tmp_path, "train.py", f"""
        import torch
        import torch.nn.functional as F
        for x, y in loader:
            pred = model(x)
            {assign}
            loss.backward()
        """)
    out = _backward_at(tmp_path, "train.py")
    if fixed:
        assert out.fix_sites == (), out.fix_sites
        assert _fixed_note(out, "train.py:5 already reduces the loss to a scalar"), out.notes
    else:
        assert out.fix_sites and not _fixed_note(out, "train.py")


def test_criterion_with_mean_reduction_in_imported_module(tmp_path):
    write(tmp_path, "losses.py", """
        import torch.nn as nn

        class TokenLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.crit = nn.CrossEntropyLoss(reduction="mean")

            def forward(self, logits, tags):
                return self.crit(logits, tags)
        """)
    write(tmp_path, "train.py", """
        from torch import nn
        from losses import TokenLoss

        def main():
            criterion = TokenLoss()
            mse = nn.MSELoss()
            loss = criterion(model(x), y)
            loss.backward()
            aux = mse(model(x), y) / accum
            aux.backward()
        main()
        """)
    out = _backward_at(tmp_path, "train.py", func="main")
    assert out.fix_sites == ()
    assert _fixed_note(out, "losses.py:6 already reduces"), out.notes
    # nn.MSELoss() defaults to mean, but dividing by an unknown value may broadcast: still a candidate
    out = _backward_at(tmp_path, "train.py", "aux.backward()", func="main")
    assert first(out)[2] in ("backward-receiver", "loss-assignment")


def test_project_loss_class_is_not_assumed_reduced(tmp_path):
    write(tmp_path, "train.py", """
        import torch.nn as nn

        class FocalLoss(nn.Module):
            def forward(self, logits, y):
                return (1 - logits.softmax(-1)) ** 2 * logits

        crit = FocalLoss()
        for x, y in loader:
            loss = crit(model(x), y)
            loss.backward()
        """)
    out = _backward_at(tmp_path, "train.py")
    assert out.fix_sites and not _fixed_note(out, "train.py")


@pytest.mark.parametrize("call", ["loss.mean().backward()", "loss.backward(gradient=torch.ones_like(loss))",
                                  "loss.backward(torch.ones_like(loss))",
                                  "torch.autograd.backward(loss, grad_tensors=torch.ones_like(loss))",
                                  "scaler.scale(loss.sum()).backward()"])
def test_backward_call_already_scalar_or_given_gradient(tmp_path, call):
    write(tmp_path, "train.py", f"""
        import torch
        for x, y in loader:
            loss = (model(x) - y) ** 2
            {call}
        """)
    out = _backward_at(tmp_path, "train.py", call)
    assert out.fix_sites == (), out.fix_sites
    assert _fixed_note(out, "train.py:4 already"), out.notes


def test_autograd_grad_with_grad_outputs_gives_no_fix_site(tmp_path):
    write(tmp_path, "physics.py", """
        import torch
        def residual(model, t):
            u = model(t)
            du, = torch.autograd.grad(u, t, grad_outputs=torch.ones_like(u), create_graph=True)
            return du
        """)
    out = run(tmp_path, "nonscalar", [
        user_frame(tmp_path, "physics.py", "autograd.grad", func="residual"),
        Frame(f"{SITE}/torch/autograd/__init__.py", 567, "grad", "grad_outputs_ = _make_grads(")], NONSCALAR)
    assert out.fix_sites == ()
    assert _fixed_note(out, "physics.py:4 already passes grad_outputs="), out.notes


def test_reduced_argument_followed_to_caller(tmp_path):
    write(tmp_path, "train.py", """
        import torch.nn.functional as F

        def step(loss):
            loss.backward()

        for x, y in loader:
            step(F.cross_entropy(model(x), y))
        """)
    out = run(tmp_path, "nonscalar", [
        user_frame(tmp_path, "train.py", "step(F.cross_entropy", func="<module>"),
        user_frame(tmp_path, "train.py", "loss.backward()", func="step"), *TORCH_BACKWARD], NONSCALAR)
    assert out.fix_sites == ()
    assert _fixed_note(out, "train.py:7 already reduces"), out.notes


def test_library_crash_reduced_return_is_skipped(tmp_path):
    write(tmp_path, "lit.py", """
        import torch.nn.functional as F

        class AutoEncoder:
            def training_step(self, batch, batch_idx):
                recon = self(batch)
                loss = F.mse_loss(recon, batch, reduction="none")
                return loss.mean()

        class Other:
            def training_step(self, batch, batch_idx):
                return F.mse_loss(self(batch), batch, reduction="none")
        """)
    lightning = [Frame(f"{SITE}/lightning/pytorch/core/module.py", 1090, "backward", "loss.backward(*args, **kwargs)"),
                 *TORCH_BACKWARD]
    out = run(tmp_path, "nonscalar", lightning, NONSCALAR)
    assert [(s.line, s.kind) for s in out.fix_sites] == [(11, "per-sample-return"), (11, "criterion-reduction")]
    assert _fixed_note(out, "lit.py:7 already reduces"), out.notes


# ------------------------------------------------------------------------------------ inplace
def test_op_family():
    assert op_family("ReluBackward0") == op_family("Relu") == op_family("ReLU") == op_family("F.relu") == "relu"
    assert op_family("AddmmBackward0") == op_family("Linear") == "mm"
    assert op_family("CudnnConvolutionBackward") == op_family("Conv2d") == "conv"
    assert op_family("NativeLayerNormBackward0") == op_family("LayerNorm") == "layernorm"
    assert op_family("AsStrided") == op_family("Slice") == "view"
    assert op_family("") == ""


INPLACE_MODEL = """
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.ReLU()
            self.gate = nn.Sigmoid()

        def forward(self, x):
            h = self.act(x)
            g = torch.sigmoid(x)
            h += 1
            g.mul_(2)
            return h * g
    """


def train_py(tmp_path):
    write(tmp_path, "train.py", """
        from model import Block
        model = Block()
        loss = model(x).sum()
        loss.backward()
        """)
    return [user_frame(tmp_path, "train.py", "loss.backward()", func="<module>"), *TORCH_BACKWARD]


@pytest.mark.parametrize("node,expected_needle,kind", [
    ("Relu", "h += 1", "inplace-augassign"),
    ("ReluBackward0", "h += 1", "inplace-augassign"),
    ("Sigmoid", "g.mul_(2)", "inplace-method"),
])
def test_inplace_by_op_name(tmp_path, node, expected_needle, kind):
    write(tmp_path, "model.py", INPLACE_MODEL)
    out = run(tmp_path, "inplace", train_py(tmp_path), INPLACE.format(node=node), fields=(("node", node),))
    assert first(out) == ("model.py", line_of(tmp_path, "model.py", expected_needle), kind)
    assert out.fix_sites[0].score > out.fix_sites[1].score


def test_inplace_anomaly_trace_wins(tmp_path):
    write(tmp_path, "model.py", """
        import torch
        def forward(x):
            h = torch.relu(x)
            a = torch.relu(x * 2)
            y = h
            a += 1
            y[:, 0] = 0
            return h + a
        """)
    write(tmp_path, "train.py", "from model import forward\nloss = forward(x).sum()\nloss.backward()\n")
    anomaly = [user_frame(tmp_path, "train.py", "loss = ", func="<module>", code=False),
               user_frame(tmp_path, "model.py", "h = torch.relu(x)", func="forward")]
    frames = [user_frame(tmp_path, "train.py", "loss.backward()", func="<module>"), *TORCH_BACKWARD]
    out = run(tmp_path, "inplace", frames, INPLACE.format(node="Relu"), fields=(("node", "Relu"),), anomaly=anomaly)
    assert first(out) == ("model.py", 7, "inplace-subscript")
    assert "anomaly" in out.fix_sites[0].reason


def test_inplace_anomaly_value_returned_to_caller(tmp_path):
    write(tmp_path, "model.py", """
        import torch
        def block(x):
            return torch.tanh(x)

        def forward(x):
            z = block(x)
            z += x
            return z
        """)
    write(tmp_path, "train.py", "from model import forward\nloss = forward(x).sum()\nloss.backward()\n")
    anomaly = [user_frame(tmp_path, "model.py", "z = block(x)", func="forward"),
               user_frame(tmp_path, "model.py", "return torch.tanh(x)", func="block")]
    frames = [user_frame(tmp_path, "train.py", "loss.backward()", func="<module>"), *TORCH_BACKWARD]
    out = run(tmp_path, "inplace", frames, INPLACE.format(node="Tanh"), fields=(("node", "Tanh"),), anomaly=anomaly)
    assert first(out) == ("model.py", 7, "inplace-augassign")


def test_inplace_module_kwarg_after_sequential(tmp_path):
    write(tmp_path, "train.py", """
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.pooler = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
                self.dropout = nn.Dropout(p=0.1, inplace=True)
                self.out = nn.Linear(4, 2)

            def forward(self, h):
                pooled = self.pooler(h[:, 0])
                return self.out(self.dropout(pooled))

        model = Head()
        loss = model(x).sum()
        loss.backward()
        """)
    frames = [user_frame(tmp_path, "train.py", "loss.backward()", func="<module>"), *TORCH_BACKWARD]
    out = run(tmp_path, "inplace", frames, INPLACE.format(node="Tanh"))  # node read from the message
    assert first(out) == ("train.py", 7, "inplace-kwarg")
    assert out.fix_sites[0].col == (tmp_path / "train.py").read_text().splitlines()[6].index("inplace")


def test_inplace_subscript_and_out(tmp_path):
    write(tmp_path, "attn.py", """
        import torch
        def attend(q, k, v, mask):
            scores = q @ k.transpose(-2, -1)
            attn = scores.softmax(dim=-1)
            attn[mask] = 0.0
            e = torch.exp(scores)
            torch.mul(e, 2, out=e)
            return attn @ v + e
        """)
    write(tmp_path, "train.py", "from attn import attend\nloss = attend(q, k, v, m).sum()\nloss.backward()\n")
    frames = [user_frame(tmp_path, "train.py", "loss.backward()", func="<module>"), *TORCH_BACKWARD]
    out = run(tmp_path, "inplace", frames, INPLACE.format(node="Softmax"), fields=(("node", "Softmax"),))
    assert first(out) == ("attn.py", 5, "inplace-subscript")
    out = run(tmp_path, "inplace", frames, INPLACE.format(node="Exp"), fields=(("node", "Exp"),))
    assert first(out) == ("attn.py", 7, "inplace-out")


def test_inplace_equal_candidates_tie(tmp_path):
    write(tmp_path, "model.py", """
        import torch
        def f(x):
            a = torch.relu(x)
            a += 1
            return a

        def g(x):
            b = torch.relu(x)
            b.clamp_(0, 1)
            return b
        """)
    write(tmp_path, "train.py", "import model\nloss = model.f(x).sum()\nloss.backward()\n")
    frames = [user_frame(tmp_path, "train.py", "loss.backward()", func="<module>"), *TORCH_BACKWARD]
    out = run(tmp_path, "inplace", frames, INPLACE.format(node="Relu"), fields=(("node", "Relu"),))
    assert out.fix_sites[0].score == out.fix_sites[1].score
    assert {(s.line, s.kind) for s in out.fix_sites[:2]} == {(4, "inplace-augassign"), (9, "inplace-method")}


def test_running_totals_are_not_inplace_candidates(tmp_path):
    write(tmp_path, "train.py", """
        total = 0.0
        for x, y in loader:
            loss = crit(model(x), y)
            loss.backward()
            total += loss.item()
            opt.zero_grad()
        """)
    frames = [user_frame(tmp_path, "train.py", "loss.backward()", func="<module>"), *TORCH_BACKWARD]
    out = run(tmp_path, "inplace", frames, INPLACE.format(node="Relu"), fields=(("node", "Relu"),))
    assert out.fix_sites == ()


def test_leaf_optimizer_step_between_backwards(tmp_path):
    write(tmp_path, "gan.py", """
        for step in range(5):
            fake = G(z)
            d_fake = D(fake)
            d_loss = crit(D(real), ones) + crit(d_fake, zeros)
            opt_d.zero_grad()
            d_loss.backward(retain_graph=True)
            opt_d.step()
            scheduler.step()
            g_loss = crit(d_fake, ones)
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()
        """)
    frames = [user_frame(tmp_path, "gan.py", "g_loss.backward()", func="<module>"), *TORCH_BACKWARD]
    out = run(tmp_path, "inplace", frames, LEAF)
    assert first(out) == ("gan.py", 7, "optimizer-step-between")
    assert [s.line for s in out.fix_sites] == [7]


# --------------------------------------------------------------------------------- fp16 / bf16
def test_fp16_model_cast_first_and_input_cast_ignored(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        from nets import SmallCNN

        def main():
            model = SmallCNN().to(device).half()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cuda")
            for images, labels in loader:
                x = images.to(device).half()
                batch = batch.half()
                loss = model(x).float().mean()
                scaler.scale(loss).backward()
                scaler.step(opt)
        """)
    write(tmp_path, "nets.py", "import torch.nn as nn\nclass SmallCNN(nn.Module):\n    pass\n")
    frames = [user_frame(tmp_path, "train.py", "scaler.step(opt)"), *SCALER_FRAMES]
    out = run(tmp_path, "fp16-params", frames, FP16, exc="ValueError")
    assert first(out) == ("train.py", 5, "model-cast")
    assert out.fix_sites[0].col == (tmp_path / "train.py").read_text().splitlines()[4].index("half")
    assert [s.line for s in out.fix_sites] == [5]


def test_fp16_other_kinds_and_closure_ranking(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        from transformers import AutoModelForCausalLM
        from helpers import prepare

        model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16)
        torch.set_default_dtype(torch.float16)
        bias = torch.zeros(4, dtype=torch.float16, requires_grad=True)
        w = nn.Parameter(torch.randn(4, 4, dtype=torch.half))
        scaler.step(opt)
        """)
    write(tmp_path, "helpers.py", "def prepare(model):\n    return model.half()\n")
    write(tmp_path, "unused/old.py", "net = Net()\nnet.half()\n")
    frames = [user_frame(tmp_path, "train.py", "scaler.step(opt)", func="<module>"), *SCALER_FRAMES]
    out = run(tmp_path, "fp16-params", frames, FP16, exc="ValueError")
    got = [(s.path, s.line, s.kind) for s in out.fix_sites]
    assert got[0] == ("helpers.py", 2, "model-cast")
    assert ("train.py", 5, "torch-dtype-fp16") in got
    assert ("train.py", 6, "default-dtype") in got
    assert ("train.py", 7, "param-dtype") in got
    assert ("train.py", 8, "param-dtype") in got
    assert got[-1] == ("unused/old.py", 2, "model-cast")


def test_bf16_grad_scaler_first(tmp_path):
    write(tmp_path, "engine.py", """
        import torch
        class Engine:
            def __init__(self, model):
                self.model = model
                self.scaler = torch.cuda.amp.GradScaler()
        """)
    write(tmp_path, "train.py", """
        import torch
        from engine import Engine
        model = TinyCNN().to(device).bfloat16()
        images = torch.randn(16, 3, device=device, dtype=torch.bfloat16)
        inputs = images.to(torch.bfloat16)
        eng = Engine(model)
        eng.step(images)
        """)
    frames = [user_frame(tmp_path, "train.py", "eng.step", func="<module>"), *SCALER_FRAMES]
    out = run(tmp_path, "bf16-params", frames, BF16)
    got = [(s.path, s.line, s.kind) for s in out.fix_sites]
    assert got == [("engine.py", 5, "grad-scaler"), ("train.py", 3, "model-cast")]


@pytest.mark.parametrize("layout", ["local", "module", "class"])
def test_bf16_disabled_scaler_gives_no_fix_sites(tmp_path, layout):
    if layout == "class":
        write(tmp_path, "engine.py", """
            import torch
            class Engine:
                def __init__(self, model):
                    self.model = model
                    self.scaler = torch.cuda.amp.GradScaler(enabled=False)

                def step(self, opt):
                    self.scaler.step(opt)
            """)
        write(tmp_path, "train.py", """
            import torch
            from engine import Engine
            model = TinyCNN().to(device).bfloat16()
            eng = Engine(model)
            eng.step(opt)
            """)
        frames = [user_frame(tmp_path, "train.py", "eng.step", func="<module>"),
                  user_frame(tmp_path, "engine.py", "self.scaler.step", func="step"), *SCALER_FRAMES]
        where = "engine.py:5"
    else:
        body = """
            import torch
            def main():
                model = Net().to("cuda").to(torch.bfloat16)
                scaler = torch.amp.GradScaler("cuda", init_scale=2.0**14, enabled=False)
                scaler.step(opt)
            main()
            """
        if layout == "module":
            body = """
            import torch
            model = Net().cuda().bfloat16()
            scaler = torch.amp.GradScaler(enabled=False)
            scaler.unscale_(opt)
            """
        write(tmp_path, "train.py", body)
        needle = "scaler.step" if layout == "local" else "scaler.unscale_"
        frames = [user_frame(tmp_path, "train.py", needle, func="main" if layout == "local" else "<module>"),
                  *SCALER_FRAMES]
        where = "train.py:4" if layout == "local" else "train.py:3"
    out = run(tmp_path, "bf16-params", frames, BF16)
    assert out.fix_sites == (), out.fix_sites
    assert _fixed_note(out, f"{where} already constructs the GradScaler with enabled=False"), out.notes


def test_bf16_enabled_scaler_still_fixed_when_another_is_disabled(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        model = Net().cuda().bfloat16()
        eval_scaler = torch.amp.GradScaler(enabled=False)
        scaler = torch.amp.GradScaler()
        scaler.step(opt)
        """)
    out = run(tmp_path, "bf16-params", [user_frame(tmp_path, "train.py", "scaler.step", func="<module>"),
                                        *SCALER_FRAMES], BF16)
    got = [(s.path, s.line, s.kind) for s in out.fix_sites]
    assert got == [("train.py", 4, "grad-scaler"), ("train.py", 2, "model-cast")]
    assert not any("seems to have been fixed" in n for n in out.notes)


# ------------------------------------------------------------------------------------ robustness
def test_syntax_error_and_binary_files_do_not_crash(tmp_path):
    write(tmp_path, "broken.py", "def f(:\n    half(\n")
    (tmp_path / "latin.py").write_bytes("# -*- coding: latin-1 -*-\nname = 'caf\xe9'\nmodel.half()\n".encode("latin-1"))
    (tmp_path / "junk.py").write_bytes(b"\xff\xfe\x00half\x00float16")
    (tmp_path / "dir.py").mkdir()
    write(tmp_path, "train.py", "scaler.step(opt)\n")
    frames = [user_frame(tmp_path, "train.py", "scaler.step", func="<module>"), *SCALER_FRAMES]
    out = run(tmp_path, "fp16-params", frames, FP16, exc="ValueError")
    assert any("broken.py" in n and "syntax error" in n for n in out.notes)
    assert ("latin.py", 3, "model-cast") in [(s.path, s.line, s.kind) for s in out.fix_sites]


def test_crash_file_with_syntax_error_keeps_crash_site(tmp_path):
    write(tmp_path, "train.py", "loss = f(\nloss.backward()\n")
    out = run(tmp_path, "nonscalar", [Frame("/w/train.py", 2, "<module>", "loss.backward()"), *TORCH_BACKWARD],
              NONSCALAR)
    assert out.crash_site is not None and out.crash_site.line == 2
    assert out.crash_site.code == "loss.backward()"


def test_notes_for_missing_changed_and_ambiguous(tmp_path):
    write(tmp_path, "a/utils.py", "x = 1\n")
    write(tmp_path, "b/utils.py", "x = 1\n")
    write(tmp_path, "train.py", "import torch\n\n\nloss = model(x)\nloss.backward()\n")
    frames = [Frame("/w/gone.py", 3, "<module>", "main()"),
              Frame(str(tmp_path / "train.py"), 2, "<module>", "loss.backward()"),   # moved down by 3 lines
              Frame("/w/src/utils.py", 1, "<module>", "x = 1"),         # ambiguous
              *TORCH_BACKWARD]
    out = run(tmp_path, "none", frames, NONSCALAR)
    text = " ".join(out.notes)
    assert "gone.py" in text and "not found" in text
    assert "matches several files" in text
    assert "changed since the log was written: the logged line 2 is now line 5" in text
    assert out.crash_site.path in ("a/utils.py", "b/utils.py")


def test_reanchored_crash_site(tmp_path):
    write(tmp_path, "train.py", "# one\n# two\nloss = w * (p - y) ** 2\nloss.backward()\n")
    here = str(tmp_path / "train.py")      # this very file, edited since the log was written
    out = run(tmp_path, "nonscalar", [Frame(here, 2, "<module>", "loss.backward()"), *TORCH_BACKWARD],
              NONSCALAR)
    assert out.crash_site.line == 4
    assert first(out) == ("train.py", 4, "backward-receiver")
    assert any("is now line 4" in n for n in out.notes)


def test_windows_log_paths(tmp_path):
    write(tmp_path, "src/train.py", "loss = w * (p - y) ** 2\nloss.backward()\nprint(loss.item())\n")
    frames = [Frame(r"C:\Users\me\proj\src\train.py", 2, "<module>", "loss.backward()"),
              Frame(r"C:\Users\me\miniconda3\Lib\site-packages\torch\_tensor.py", 623, "backward", "x")]
    out = run(tmp_path, "nonscalar", frames, NONSCALAR)
    assert out.crash_site.path == "src/train.py"
    assert first(out) == ("src/train.py", 1, "loss-assignment")


def test_notebook_frames_only(tmp_path):
    write(tmp_path, "train.py", "x = 1\n")
    out = run(tmp_path, "nonscalar", [Frame("Cell In[5]", 3, "<module>", "loss.backward()"), *TORCH_BACKWARD],
              NONSCALAR)
    assert out.crash_site is None
    assert any("notebook" in n for n in out.notes)


def test_missing_root_and_unknown_strategy(tmp_path):
    out = run(tmp_path / "nope", "nonscalar", [Frame("/w/train.py", 1, "<module>", "x")], NONSCALAR)
    assert out.crash_site is None and out.fix_sites == ()
    write(tmp_path, "train.py", "x = 1\n")
    out = run(tmp_path, "none", [Frame("/w/train.py", 1, "<module>", "x = 1")], "boom")
    assert out.crash_site.path == "train.py" and out.fix_sites == ()


def test_dedupe_by_path_line_kind(tmp_path):
    write(tmp_path, "train.py", "model = Net().half(); model.half()\nscaler.step(opt)\n")
    frames = [user_frame(tmp_path, "train.py", "scaler.step", func="<module>"), *SCALER_FRAMES]
    out = run(tmp_path, "fp16-params", frames, FP16, exc="ValueError")
    assert [(s.line, s.kind) for s in out.fix_sites] == [(1, "model-cast")]


def test_no_heavy_imports():
    import subprocess
    code = ("import sys, tracefix.locator, tracefix.frames; "
            "bad = [m for m in ('torch', 'libcst', 'rich') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(Path(__file__).resolve().parent.parent))


def test_ambiguous_crash_file_gives_tied_fix_sites(tmp_path):
    for pkg in ("a", "b"):
        write(tmp_path, f"{pkg}/train.py", "loss = w * (p - y) ** 2\nloss.backward()\n")
    out = run(tmp_path, "nonscalar", [Frame("/mnt/job/train.py", 2, "<module>", "loss.backward()"), *TORCH_BACKWARD],
              NONSCALAR)
    assert any("a/train.py" in n and "b/train.py" in n for n in out.notes)
    top = out.fix_sites[:2]
    assert {s.path for s in top} == {"a/train.py", "b/train.py"}
    assert top[0].score == top[1].score and top[0].kind == top[1].kind == "backward-receiver"


def test_fifo_in_project_does_not_block(tmp_path):
    import os
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    write(tmp_path, "train.py", "scaler.step(opt)\n")
    os.mkfifo(tmp_path / "pipe.py")
    os.mkfifo(tmp_path / "model.py")
    frames = [Frame("/w/model.py", 1, "<module>", "model.half()"),
              user_frame(tmp_path, "train.py", "scaler.step", func="<module>"), *SCALER_FRAMES]
    out = run(tmp_path, "fp16-params", frames[1:], FP16, exc="ValueError")
    assert out.fix_sites == ()
    out = run(tmp_path, "nonscalar", [Frame("/w/model.py", 1, "<module>", "x.backward()"), *TORCH_BACKWARD], NONSCALAR)
    assert out.crash_site is None
