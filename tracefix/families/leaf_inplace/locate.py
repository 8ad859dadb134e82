"""leaf-inplace: where the in-place write to a parameter should run under ``torch.no_grad()``.

The write is the statement on the crash line (``p -= lr * p.grad``, ``m.weight.normal_()``,
``w[0] = 1.0``).  In a function that only updates or initialises (no ``backward()``, no optimizer
step, no loss) the function is the site: decorated with ``@torch.no_grad()`` it covers every write
in it, as ``torch.nn.init`` does.  Otherwise the ``for`` loop over parameters that holds the write,
or the statement itself, is wrapped in ``with torch.no_grad():``.
"""
from __future__ import annotations

import ast
from typing import Optional

from tracefix.pysource import SourceFile, last_name

DEF = 0.9
BLOCK = 0.85
# calls that make a function a training step, not an update helper
STEP_CALLS = frozenset({"backward", "step", "zero_grad", "manual_backward"})


def run(ctx) -> None:
    found = ctx.statement()
    if found is None or not _writes_in_place(found[2]):
        return
    _crash, sf, stmt = found
    fn = sf.scope_of(stmt)
    if _already_no_grad(sf, stmt):
        return          # it runs under no_grad already: the code no longer matches the log
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _only_updates(fn):
        ctx.add(sf, fn.lineno, fn.col_offset, "leaf-nograd-def",
                f"`{fn.name}` writes parameters in place (`{sf.brief(stmt)}`) with gradients on; "
                "decorated with @torch.no_grad() every write in it is an update, not a step autograd must record.",
                DEF)
        return
    block = _parameter_loop(sf, stmt, fn) or stmt
    ctx.add(sf, block.lineno, block.col_offset, "leaf-nograd-block",
            f"`{sf.brief(stmt)}` writes a parameter in place with gradients on; run "
            f"{'the loop' if block is not stmt else 'it'} under `with torch.no_grad():`.", BLOCK)


def _writes_in_place(stmt: ast.AST) -> bool:
    if isinstance(stmt, ast.AugAssign):
        return True
    if isinstance(stmt, ast.Assign):
        return any(isinstance(t, ast.Subscript) for t in stmt.targets)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return any(isinstance(n, ast.Call) and last_name(n.func).endswith("_") and not last_name(n.func).startswith("_")
                   for n in ast.walk(stmt.value))
    return False


def _already_no_grad(sf: SourceFile, stmt: ast.AST) -> bool:
    for up in sf.ancestors(stmt):
        if isinstance(up, ast.With) and any(last_name(getattr(i.context_expr, "func", i.context_expr)) in (
                "no_grad", "inference_mode") for i in up.items):
            return True
        if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return any(last_name(getattr(d, "func", d)) in ("no_grad", "inference_mode") for d in up.decorator_list)
    return False


def _only_updates(fn: ast.AST) -> bool:
    """No backward(), optimizer step or zero_grad in ``fn``: an update or initialisation helper."""
    return not any(isinstance(n, ast.Call) and last_name(n.func) in STEP_CALLS for n in ast.walk(fn))


def _parameter_loop(sf: SourceFile, stmt: ast.AST, fn: ast.AST) -> Optional[ast.For]:
    """The ``for`` over parameters (``model.parameters()``, a list of them) holding ``stmt``, when
    its body only writes."""
    for up in sf.ancestors(stmt):
        if up is fn:
            return None
        if isinstance(up, ast.For) and not any(isinstance(n, ast.Call) and last_name(n.func) in STEP_CALLS
                                               for n in ast.walk(up)):
            it = sf.segment(up.iter) or ""
            if "param" in it or isinstance(up.iter, (ast.List, ast.Tuple)):
                return up
    return None
