"""Patcher: fix sites -> patches.  Fixtures in tests/patch_cases/<kind>/<name>.in.py -> .out.py
(or a folder of *.in.py / *.out.py for patches spanning files); the line carrying
``# FIX: <kind>`` is the fix site, and that comment must survive into the .out.py.  A lone
<name>.in.py (no .out.py) is a case where the fixer must propose nothing."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tracefix.patcher import PatchError, apply, explain_unpatchable, propose, settled
from tracefix.records import Diagnosis, FixSite, Frame, Traceback

CASES = Path(__file__).parent / "patch_cases"
BOM = b"\xef\xbb\xbf"
MARK = re.compile(rb"# FIX: ([a-z0-9-]+)")
FIELDS = re.compile(rb"# FIELDS:((?: \w+=[^\s#]+)+)")
WRITE = re.compile(rb"# WRITE: ([^#]+)")


def _cases():
    out = []
    for kind_dir in sorted(p for p in CASES.iterdir() if p.is_dir()):
        for item in sorted(kind_dir.iterdir()):
            if item.name.endswith(".in.py") or item.is_dir():
                name = item.name[:-len(".in.py")] if item.is_file() else item.name
                for variant in ("lf", "crlf", "bom"):
                    out.append(pytest.param(item, variant, id=f"{kind_dir.name}/{name}/{variant}"))
    return out


def _variant(data: bytes, variant: str) -> bytes:
    if variant == "crlf":
        return data.replace(b"\n", b"\r\n")
    if variant == "bom":
        return BOM + data
    return data


def _files(case: Path):
    """[(name, in_path, out_path or None)]"""
    ins = sorted(case.glob("*.in.py")) if case.is_dir() else [case]
    out = []
    for p in ins:
        name = p.name[:-len(".in.py")] + ".py"
        o = p.with_name(p.name[:-len(".in.py")] + ".out.py")
        out.append((name, p, o if o.exists() else None))
    return out


def find_site(root: Path, names, score: float = 1.0, comment_ok: bool = False):
    fields = ()
    for name in names:
        data = (root / name).read_bytes()
        for i, line in enumerate(data.splitlines(), start=1):
            m = FIELDS.search(line)
            if m:
                fields = tuple(tuple(kv.split("=", 1)) for kv in m.group(1).decode().split())
        for i, line in enumerate(data.splitlines(), start=1):
            m = MARK.search(line)
            if m and (comment_ok or not line.lstrip(BOM).lstrip().startswith(b"#")):
                text = line.lstrip(BOM).decode()
                col = len(text) - len(text.lstrip())
                w = WRITE.search(line)       # what the locator worked out to write (FixSite.write)
                return FixSite(path=name, line=i, code=text.strip(), local_path=str(root / name), col=col,
                               reason="fixture", kind=m.group(1).decode(), score=score,
                               write=w.group(1).decode().strip() if w else ""), fields
    return None, fields


def diag_for(sites, fields=(), entry="test-entry"):
    return Diagnosis(entry_id=entry, title="t", confidence=1.0,
                     traceback=Traceback(exc_type="RuntimeError", message="m"), fields=tuple(fields),
                     fix_sites=tuple(sites))


@pytest.mark.parametrize("case, variant", _cases())
def test_fixture(case: Path, variant: str, tmp_path: Path):
    files = _files(case)
    for name, src, _ in files:
        (tmp_path / name).write_bytes(_variant(src.read_bytes(), variant))
    site, fields = find_site(tmp_path, [n for n, _, _ in files])
    assert site is not None, "fixture has no '# FIX: <kind>' line"
    patches = propose(diag_for([site], fields), tmp_path)
    if case.is_file() and files[0][2] is None:  # a lone .in.py: the fixer must decline
        assert patches == (), "a patch was proposed for a case without .out.py"
        return
    assert patches, "no patch proposed"
    first = patches[0]
    expected = {name: _variant(out.read_bytes(), variant) for name, _, out in files if out is not None}
    assert {rel for rel, _, _ in first.files} == set(expected)
    for rel, original, new in first.files:
        want = expected[rel]
        assert new == (want[len(BOM):] if want.startswith(BOM) else want).decode("utf-8")
        compile(new, rel, "exec")
        assert f"--- a/{rel}" in first.diff and f"+++ b/{rel}" in first.diff
    for patch in patches:
        assert patch.applicability in ("safe", "unsafe", "insufficient")
        assert (patch.reason == "") == (patch.applicability == "safe")
        for rel, _, new in patch.files:
            compile(new, rel, "exec")
    # apply writes exactly the expected bytes (BOM, CRLF, trailing newline kept)
    written = apply(first, tmp_path)
    assert sorted(written) == sorted(expected)
    for rel, want in expected.items():
        assert (tmp_path / rel).read_bytes() == want
    # idempotent: applying again changes nothing; proposing on the patched state yields nothing
    assert apply(first, tmp_path) == []
    # (a deleted statement takes its comments with it: then there is no site left to re-propose on)
    site2, fields2 = find_site(tmp_path, [n for n, _, _ in files], comment_ok=True)
    if site2 is None:
        assert "# FIX:" not in "".join(want.decode("utf-8", "replace") for want in expected.values())
        return
    assert propose(diag_for([site2], fields2), tmp_path) == ()


def test_every_kind_has_a_fixture():
    from tracefix.families import families, part
    from tracefix.patcher.context import FIXERS
    for fam in families():
        part(fam, "fix")
    covered = {p.name for p in CASES.iterdir() if p.is_dir() and any(p.iterdir())}
    assert FIXERS and set(FIXERS) <= covered


# -- unit cases -----------------------------------------------------------------------------------
def write(tmp_path: Path, text, name="train.py") -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return p


def site(line, kind, path="train.py", score=1.0, col=0, code=""):
    return FixSite(path=path, line=line, code=code, col=col, kind=kind, score=score)


def test_backward_ranking_and_alternatives(tmp_path):
    write(tmp_path, "import torch\nloss = f()\nloss.backward()\n")
    patches = propose(diag_for([site(3, "backward-receiver")]), tmp_path)
    assert patches[0].applicability == "safe"
    assert "loss.mean().backward()" in patches[0].files[0][2]
    assert "batch size" in patches[0].summary
    news = [p.files[0][2] for p in patches]
    assert any("loss.backward(gradient=torch.ones_like(loss))" in n for n in news)
    ones = next(p for p in patches if "ones_like" in p.files[0][2])
    assert ones.applicability == "unsafe" and "sum" in ones.reason


def test_already_reduced_proposes_nothing(tmp_path):
    write(tmp_path, "loss = f()\nloss.mean().backward()\nscaler.scale(loss.sum()).backward()\n")
    assert propose(diag_for([site(2, "backward-receiver")]), tmp_path) == ()
    assert propose(diag_for([site(3, "backward-receiver")]), tmp_path) == ()


def test_node_not_at_line_gives_no_patch(tmp_path):
    write(tmp_path, "x = 1\n\nloss.backward()\n")
    assert propose(diag_for([site(1, "backward-receiver")]), tmp_path) == ()
    assert propose(diag_for([site(2, "inplace-augassign")]), tmp_path) == ()
    assert propose(diag_for([site(99, "inplace-augassign")]), tmp_path) == ()


def test_missing_or_unparsable_file_gives_no_patch(tmp_path):
    assert propose(diag_for([site(1, "backward-receiver", path="nope.py")]), tmp_path) == ()
    write(tmp_path, "def (:\n loss.backward()\n")
    assert propose(diag_for([site(2, "backward-receiver")]), tmp_path) == ()


def test_unknown_kind_and_optimizer_step_between(tmp_path):
    write(tmp_path, "out = model(x)\nopt.step()\nloss.backward()\n")
    s = site(2, "optimizer-step-between", code="opt.step()")
    assert propose(diag_for([s, site(1, "no-such-kind")]), tmp_path) == ()
    text = explain_unpatchable(s)
    assert "train.py:2" in text and "Recompute that forward after the step" in text and text.endswith(".")


def test_complex_dtype_is_unsafe(tmp_path):
    write(tmp_path, "loss = z * z\nloss.backward()\n")
    patches = propose(diag_for([site(2, "backward-receiver")], fields=(("dtype", "torch.complex128"),)), tmp_path)
    assert "loss.abs().backward()" in patches[0].files[0][2]
    assert all(p.applicability == "unsafe" for p in patches)
    assert any("loss.real.backward()" in p.files[0][2] for p in patches)


def test_primaries_before_alternatives_across_sites(tmp_path):
    write(tmp_path, "import torch.nn as nn\ncrit = nn.MSELoss(reduction='none')\nloss = crit(a, b)\nloss.backward()\n")
    sites = [site(4, "backward-receiver", score=0.9), site(2, "criterion-reduction", score=0.5)]
    patches = propose(diag_for(sites), tmp_path)
    assert [p.applicability for p in patches[:2]] == ["safe", "safe"]
    assert "loss.mean().backward()" in patches[0].files[0][2]
    assert "reduction='mean'" in patches[1].files[0][2]
    assert all(p.applicability == "unsafe" for p in patches[2:])


def test_settled():
    a = site(3, "backward-receiver", score=0.8)
    assert not settled(diag_for([]))
    assert settled(diag_for([a]))
    assert settled(diag_for([a, site(5, "loss-assignment", score=0.5)]))
    assert not settled(diag_for([a, site(5, "loss-assignment", score=0.8)]))
    assert settled(diag_for([a, site(3, "loss-assignment", score=0.8)]))  # same line


def test_inplace_method_expression_is_unsafe(tmp_path):
    write(tmp_path, "def f(x):\n    y = x.mul_(2)\n    z = x.add_(1)\n    x = x.sub_(1)\n    return y\n")
    p = propose(diag_for([site(2, "inplace-method")]), tmp_path)[0]
    # x is read again (line 3): both names are bound to the new tensor, but the caller's x is not
    assert p.applicability == "unsafe" and "'x' is a parameter of f()" in p.reason
    assert "y = x = x.mul(2)" in p.files[0][2]
    p = propose(diag_for([site(4, "inplace-method")]), tmp_path)[0]
    assert p.applicability == "safe" and "x = x.sub(1)" in p.files[0][2]


def test_inplace_method_zero_and_copy(tmp_path):
    write(tmp_path, "import torch\ndef f(x, y):\n    x.zero_()\n    x.copy_(y)\n")
    p = propose(diag_for([site(3, "inplace-method")]), tmp_path)[0]
    assert "x = torch.zeros_like(x)" in p.files[0][2]
    assert propose(diag_for([site(4, "inplace-method")]), tmp_path) == ()


def test_inplace_out_aliased_is_unsafe(tmp_path):
    write(tmp_path, "import torch\nbuf = torch.empty(4)\nc = buf[:2]\ntorch.add(a, b, out=c)\n")
    p = propose(diag_for([site(4, "inplace-out")]), tmp_path)[0]
    assert p.applicability == "unsafe" and "aliased" in p.reason
    assert "c = torch.add(a, b)\n" in p.files[0][2]


def test_augassign_all_operators(tmp_path):
    ops = ["+", "-", "*", "/", "//", "%", "**", "@", "<<", ">>", "|", "&", "^"]
    for op in ops:
        write(tmp_path, f"def f(x, y):\n    x {op}= y  # keep\n    return x\n")
        p = propose(diag_for([site(2, "inplace-augassign")]), tmp_path)[0]
        assert p.files[0][2] == f"def f(x, y):\n    x = x {op} y  # keep\n    return x\n"


def test_autograd_grad_adds_import_when_missing(tmp_path):
    write(tmp_path, "from torch import autograd\n\ng = autograd.grad([a, b], x)\n")
    p = propose(diag_for([site(3, "autograd-grad")]), tmp_path)[0]
    new = p.files[0][2]
    assert "grad_outputs=[torch.ones_like(a), torch.ones_like(b)]" in new
    assert new.startswith("from torch import autograd\nimport torch\n")


def test_mixed_line_endings_and_no_trailing_newline(tmp_path):
    data = b"import torch\r\nloss = f()\nx = 1\r\nloss.backward()"
    write(tmp_path, data)
    p = propose(diag_for([site(4, "backward-receiver")]), tmp_path)[0]
    assert p.files[0][2] == "import torch\r\nloss = f()\nx = 1\r\nloss.mean().backward()"
    apply(p, tmp_path)
    assert (tmp_path / "train.py").read_bytes() == b"import torch\r\nloss = f()\nx = 1\r\nloss.mean().backward()"


def test_subscript_clone_crlf_insertion(tmp_path):
    write(tmp_path, b"def f(x):\r\n    h = x.exp()\r\n    h[0] = 1\r\n    return h\r\n")
    p = propose(diag_for([site(3, "inplace-subscript")]), tmp_path)[0]
    apply(p, tmp_path)
    assert (tmp_path / "train.py").read_bytes() == \
        b"def f(x):\r\n    h = x.exp()\r\n    h = h.clone()\r\n    h[0] = 1\r\n    return h\r\n"


def test_latin1_coding_cookie(tmp_path):
    data = "# -*- coding: latin-1 -*-\nname = 'café'\nx += y\n".encode("latin-1")
    write(tmp_path, data)
    p = propose(diag_for([site(3, "inplace-augassign")]), tmp_path)[0]
    apply(p, tmp_path)
    assert (tmp_path / "train.py").read_bytes() == "# -*- coding: latin-1 -*-\nname = 'café'\nx = x + y\n".encode("latin-1")


def test_multifile_via_traceback_frames(tmp_path):
    write(tmp_path, "def build():\n    return Net().half()\n", name="pkg/models.py")
    write(tmp_path, "import torch\nscaler = torch.amp.GradScaler('cpu')\nfor x in data:\n    out = model(x)\n"
                    "    loss = out.sum()\n    scaler.scale(loss).backward()\n", name="scripts/train.py")
    tb = Traceback(exc_type="ValueError", message="Attempting to unscale FP16 gradients.",
                   frames=(Frame("/home/u/proj/scripts/train.py", 6, "<module>"),
                           Frame("/usr/lib/python3/site-packages/torch/amp/grad_scaler.py", 275, "_unscale_grads_")))
    d = Diagnosis("unscale-fp16", "t", 1.0, tb, fix_sites=(site(2, "model-cast", path="pkg/models.py"),))
    p = propose(d, tmp_path)[0]
    assert [rel for rel, _, _ in p.files] == ["pkg/models.py", "scripts/train.py"]
    assert "with torch.autocast(device_type='cpu', dtype=torch.float16):\n        out = model(x)\n" \
           "        loss = out.sum()\n" in p.files[1][2]
    assert apply(p, tmp_path) == ["pkg/models.py", "scripts/train.py"]


def test_autocast_not_added_twice(tmp_path):
    write(tmp_path, "import torch\nmodel = Net().half()\nscaler = torch.amp.GradScaler('cuda')\nfor x in data:\n"
                    "    with torch.amp.autocast('cuda'):\n        loss = model(x).sum()\n"
                    "    scaler.scale(loss).backward()\n")
    p = propose(diag_for([site(2, "model-cast")]), tmp_path)[0]
    assert p.files[0][2].count("autocast") == 1


def test_imports(tmp_path):
    code = ("import sys, tracefix, tracefix.records, tracefix.knowledge\n"
            "assert 'libcst' not in sys.modules\n"
            "import tracefix.patcher\n"
            "assert 'torch' not in sys.modules and 'rich' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parent.parent)


def test_patch_error_is_exception():
    assert issubclass(PatchError, Exception)
    assert str(PatchError("a sentence.")) == "a sentence."


def test_receiver_read_after_backward_ranks_the_assignment_first(tmp_path):
    write(tmp_path, "def step(batch):\n    loss = crit(batch)\n    loss.backward()\n    return loss.item()\n")
    sites = [site(3, "backward-receiver", score=0.9), site(2, "loss-assignment", score=0.6)]
    patches = propose(diag_for(sites), tmp_path)
    assert "loss = crit(batch).mean()" in patches[0].files[0][2]
    at_backward = [p for p in patches if "loss.mean().backward()" in p.files[0][2]]
    assert at_backward and at_backward[0].applicability == "insufficient"   # loss.item() needs a scalar
    assert "loss.item()" in at_backward[0].reason and ":4 " in at_backward[0].reason
