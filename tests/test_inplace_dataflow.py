"""An out-of-place rewrite of an in-place write must keep the data flow: every later read of the
written name (in that scope, in a hook's caller, in the function's caller) sees the new value.

Proved three ways: the patched code, run on real tensors, computes exactly what the in-place
original computed (for every patch labelled `safe`); a patch whose caller reads the old value is
`unsafe` and names where; and ``tracefix run --apply --verify`` on a real script gives a training
script whose numbers are the in-place original's.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_patcher import CASES, MARK, _files, diag_for, find_site, site, write
from tracefix.patcher import propose

import torch  # CI installs torch 2.13.0; a missing torch must fail, not skip

MIXUP = '''import torch
def mixup(h, other, lam):
    h.mul_(lam).add_(other, alpha=1 - lam)
    return h
def run():
    torch.manual_seed(0)
    h = torch.randn(4, 3)
    return (mixup(h, torch.randn(4, 3), 0.7),)
'''
CHAIN_ASSIGNED = '''import torch
def f(mu, logvar):
    std = logvar.mul(0.5).exp()
    z = std.mul_(torch.full_like(std, 0.5)).add_(mu)
    return z, std
def run():
    torch.manual_seed(0)
    return f(torch.randn(5), torch.randn(5))
'''
RETURNED_CHAIN = '''import torch
def f(mu, logvar):
    std = logvar.exp()
    return std.mul_(2.0).add_(mu)
def run():
    torch.manual_seed(0)
    return (f(torch.randn(5), torch.randn(5)),)
'''
HOOK_CLAMP = '''import torch
import torch.nn as nn
def clip(module, inputs, output):
    output.clamp_(-0.2, 0.2)
def run():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 6), nn.Linear(6, 2))
    net[0].register_forward_hook(clip)
    with torch.no_grad():
        return (net(torch.randn(4, 3)),)
'''
HOOK_METHOD = '''import functools
import torch
import torch.nn as nn
class Scaler:
    def __init__(self, net, factor):
        self.factor = factor
        net[0].register_forward_hook(functools.partial(self.scale, "fc"))
    def scale(self, name, module, inputs, output):
        if not module.training:
            return
        output.mul_(self.factor)
def run():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 6), nn.Linear(6, 2))
    Scaler(net, 3.0)
    with torch.no_grad():
        a = net(torch.randn(4, 3))
        net.eval()
        return a, net(torch.randn(4, 3))
'''
HOOK_AUGASSIGN = '''import torch
import torch.nn as nn
def attach(net, mask):
    def drop_units(module, inputs, output):
        output *= mask
    return net[0].register_forward_hook(drop_units)
def run():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 6), nn.Linear(6, 2))
    attach(net, (torch.arange(6) % 2).float())
    with torch.no_grad():
        return (net(torch.randn(4, 3)),)
'''
HOOK_SUBSCRIPT = '''import torch
import torch.nn as nn
def zero_first(module, inputs, output):
    output[:, 0] = 0.0
def run():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 6), nn.Linear(6, 2))
    net[0].register_forward_hook(zero_first)
    with torch.no_grad():
        return (net(torch.randn(4, 3)),)
'''
HELPER_RETURNS = '''import torch
def normalize_(t):
    t.div_(t.norm(dim=-1, keepdim=True))
    return t
def run():
    torch.manual_seed(0)
    z = torch.randn(4, 3).tanh()
    z = normalize_(z)
    return z, z @ z.T
'''
# the callers read the argument after the call, without rebinding it: the in-place change was theirs
CALLER_READS = '''import torch
def mask_scores_(scores, mask):
    scores.masked_fill_(mask, -1e4)
    return scores.softmax(-1)
def run():
    torch.manual_seed(0)
    scores = torch.randn(3, 4)
    probs = mask_scores_(scores, scores < 0)
    return probs, scores.amin(-1)
'''
CALLER_READS_NO_RETURN = '''import torch
def normalize_(t):
    t.div_(t.norm(dim=-1, keepdim=True))
def run():
    torch.manual_seed(0)
    z = torch.randn(4, 3).tanh()
    normalize_(z)
    return (z @ z.T,)
'''
CALLER_IGNORES_RESULT = '''import torch
def normalize_(t):
    t.div_(t.norm(dim=-1, keepdim=True))
    return t
def run():
    torch.manual_seed(0)
    z = torch.randn(4, 3).tanh()
    normalize_(z)
    return (z @ z.T,)
'''

SAFE = [  # (code, fix line, kind): rewritten so that every reader sees the new value
    (MIXUP, 3, "inplace-method"),
    (CHAIN_ASSIGNED, 4, "inplace-method"),
    (RETURNED_CHAIN, 4, "inplace-method"),
    (HOOK_CLAMP, 4, "inplace-method"),
    (HOOK_METHOD, 11, "inplace-method"),
    (HOOK_AUGASSIGN, 5, "inplace-augassign"),
    (HOOK_SUBSCRIPT, 4, "inplace-subscript"),
    (HELPER_RETURNS, 3, "inplace-method"),
]
UNSAFE = [  # (code, fix line, kind, the caller's read the reason must name)
    (CALLER_READS, 3, "inplace-method", "train.py:9 reads 'scores'"),
    (CALLER_READS_NO_RETURN, 3, "inplace-method", "train.py:8 reads 'z'"),
    (CALLER_IGNORES_RESULT, 3, "inplace-method", "train.py:9 reads 'z'"),
]


def _patched(tmp_path, code, line, kind):
    write(tmp_path, code)
    patches = propose(diag_for([site(line, kind)]), tmp_path)
    assert patches, "no patch proposed"
    return patches[0], patches[0].files[0][2]


def _run(code):
    ns: dict = {"__name__": "case"}
    exec(compile(code, "train.py", "exec"), ns)
    return ns["run"]()


def _same(a, b) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("code, line, kind", SAFE, ids=[
    "chain-returned", "chain-assigned", "chain-in-return", "forward-hook", "forward-hook-method", "hook-augassign",
    "hook-subscript", "helper-returns-argument"])
def test_safe_rewrite_computes_what_the_inplace_code_computed(tmp_path, code, line, kind):
    patch, new = _patched(tmp_path, code, line, kind)
    assert patch.applicability == "safe", patch.reason
    assert new != code
    assert _same(_run(new), _run(code)), new


@pytest.mark.parametrize("code, line, kind, said", UNSAFE, ids=["helper-returns-other", "helper-no-return",
                                                                 "caller-ignores-result"])
def test_a_caller_reading_the_argument_afterwards_makes_it_unsafe(tmp_path, code, line, kind, said):
    patch, new = _patched(tmp_path, code, line, kind)
    assert patch.applicability == "unsafe" and said in patch.reason, patch.reason
    # and the label is true: the caller's numbers change
    assert not _same(_run(new), _run(code))


def test_the_callers_read_is_named_in_its_own_file(tmp_path):
    case = CASES / "inplace-method" / "caller_reads_argument"
    names = []
    for name, src, _out in _files(case):
        (tmp_path / name).write_bytes(src.read_bytes())
        names.append(name)
    fix, _ = find_site(tmp_path, names)
    patch = propose(diag_for([fix]), tmp_path)[0]
    assert patch.applicability == "unsafe", patch.reason
    assert "train.py:7 reads 'scores' after mask_scores_(scores) (line 6)" in patch.reason


def test_a_function_not_registered_as_a_hook_gets_no_return_and_is_not_safe(tmp_path):
    code = "def scale(module, inputs, output):\n    output.mul_(0.5)\n"
    patch, new = _patched(tmp_path, code, 2, "inplace-method")
    assert patch.applicability == "unsafe" and "return" not in new


def test_a_hook_that_already_returns_a_value_keeps_its_return(tmp_path):
    code = ("def clip(module, inputs, output):\n    output.clamp_(0, 1)\n    return output * 2\n"
            "m.register_forward_hook(clip)\n")
    patch, new = _patched(tmp_path, code, 2, "inplace-method")
    assert patch.applicability == "safe", patch.reason
    assert new.count("return") == 1 and "    output = output.clamp(0, 1)\n    return output * 2\n" in new


# -- the rule, over every in-place fixture the patcher rewrites -------------------------------------
def _inplace_cases():
    out = []
    for kind_dir in sorted(p for p in CASES.iterdir() if p.is_dir() and p.name.startswith("inplace-")):
        for item in sorted(kind_dir.iterdir()):
            if (item.is_dir() or item.name.endswith(".in.py")) and any(o for _n, _i, o in _files(item)):
                out.append(pytest.param(item, id=f"{kind_dir.name}/{item.name}"))
    return out


def _fix_line(text: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if MARK.search(ln.encode()) and
                not ln.lstrip().startswith("#"))


def _innermost_statement(tree: ast.AST, line: int):
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= node.end_lineno:
            if best is None or node.lineno >= best.lineno and node.end_lineno <= best.end_lineno:
                best = node
    return best


@pytest.mark.parametrize("case", _inplace_cases())
def test_no_rewritten_value_is_left_unused(case, tmp_path):
    """In what the patcher writes, the fix line binds or returns its value (never a bare expression
    statement), the name the in-place write changed is bound there when code after it reads that
    name, and a forward hook that changed its output returns it."""
    names = []
    for name, src, _out in _files(case):
        (tmp_path / name).write_bytes(src.read_bytes())
        names.append(name)
    fix, fields = find_site(tmp_path, names)
    patch = propose(diag_for([fix], fields), tmp_path)[0]
    before = (tmp_path / fix.path).read_text(encoding="utf-8")
    after = next(new for rel, _old, new in patch.files if rel == fix.path)
    line = _fix_line(after)
    tree = ast.parse(after)
    stmt = _innermost_statement(tree, line)
    assert not isinstance(stmt, ast.Expr), ast.unparse(stmt)
    old = _innermost_statement(ast.parse(before), _fix_line(before))
    written = _written_name(old)
    fn = next((f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.lineno < line <= f.end_lineno
               and not any(isinstance(g, ast.FunctionDef) and g is not f and g.lineno < line <= g.end_lineno
                           for g in ast.walk(f))), None)
    if written and fn is not None:
        later = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == written
                 and isinstance(n.ctx, ast.Load) and n.lineno > stmt.end_lineno]
        bound = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == written
                 and isinstance(n.ctx, ast.Store) and n.lineno <= line]
        if later:
            assert bound and max(b.lineno for b in bound) >= _fix_line(after) - 1, after
        hooks = {_hook_target(c) for c in ast.walk(tree) if isinstance(c, ast.Call)
                 and isinstance(c.func, ast.Attribute) and c.func.attr == "register_forward_hook"}
        if fn.name in hooks and fn.args.args and fn.args.args[-1].arg == written:
            returns = [r for r in ast.walk(fn) if isinstance(r, ast.Return)]
            assert returns and all(isinstance(r.value, ast.Name) and r.value.id == written for r in returns), after


def _written_name(stmt) -> str:
    """The variable the in-place statement changed: ``h`` of ``h.mul_(..).add_(..)``, ``h += ..``."""
    if isinstance(stmt, ast.AugAssign):
        target = stmt.target
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        target = stmt.value.func
        while isinstance(target, (ast.Attribute, ast.Call)):
            target = target.value if isinstance(target, ast.Attribute) else target.func
    elif isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Subscript):
        target = stmt.targets[0].value
    else:
        return ""
    return target.id if isinstance(target, ast.Name) else ""


def _hook_target(call: ast.Call) -> str:
    if not call.args:
        return ""
    v = call.args[0]
    if isinstance(v, ast.Call) and v.args:   # functools.partial(hook, ...)
        v = v.args[0]
    return v.attr if isinstance(v, ast.Attribute) else v.id if isinstance(v, ast.Name) else ""


# -- end to end: a real script, run, patched, verified, and computing the same numbers ---------------
HOOK_SCRIPT = '''import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.Sigmoid(), nn.Linear(8, 1))


def clip(module, inputs, output):
    output.clamp_(0.3, 0.7)


net[1].register_forward_hook(clip)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(20):
    out = net(x)
    if step == 0:
        print(f"CHECKSUM {out.sum().item():.6f}", flush=True)
    loss = (out - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''
MIXUP_SCRIPT = '''import torch
import torch.nn as nn

torch.manual_seed(0)
fc1, fc2 = nn.Linear(4, 8), nn.Linear(8, 1)


def mixup(h, other, lam):
    h.mul_(lam).add_(other, alpha=1 - lam)
    return h


opt = torch.optim.SGD([*fc1.parameters(), *fc2.parameters()], lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(20):
    h = torch.sigmoid(fc1(x))
    h = mixup(h, h.detach().flip(0), 0.7)
    out = fc2(h)
    if step == 0:
        print(f"CHECKSUM {out.sum().item():.6f}", flush=True)
    loss = (out - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def _env() -> dict:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    for k in ("TRACEFIX_ANOMALY", "TRACEFIX_VERIFY_STEPS", "TRACEFIX_WITNESS", "NO_COLOR", "FORCE_COLOR"):
        env.pop(k, None)
    return env


def _checksum(text: str) -> str:
    m = re.search(r"^CHECKSUM (\S+)$", text, re.M)
    assert m, text[-2000:]
    return m.group(1)


@pytest.mark.parametrize("script", [HOOK_SCRIPT, MIXUP_SCRIPT], ids=["forward-hook-clamp", "mixup-chain"])
def test_run_apply_verify_keeps_the_inplace_codes_numbers(tmp_path, script):
    (tmp_path / "train.py").write_text(script, encoding="utf-8")
    first = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300, env=_env())
    assert first.returncode != 0 and "modified by an inplace operation" in first.stderr
    original = _checksum(first.stdout)       # printed on step 0, before the crash
    run = subprocess.run([sys.executable, "-m", "tracefix", "run", "--apply", "--verify", "--", sys.executable,
                          "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=_env())
    assert run.returncode == 0 and "verification: verified" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    patched = (tmp_path / "train.py").read_text(encoding="utf-8")
    assert patched != script
    after = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300, env=_env())
    assert after.returncode == 0, after.stderr[-2000:]
    assert _checksum(after.stdout) == original, patched
