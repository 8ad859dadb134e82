"""numpy-grad: where the live tensor leaves torch.

A ``.numpy()`` on the crash line is the site.  Otherwise the crash line hands something to numpy
(``np.mean(values)``, ``np.concatenate(preds)``), which calls ``Tensor.__array__``: the value is
followed back, through the parameters of the functions on the traceback to their callers' arguments,
to the ``list.append`` that stored the live tensor (``losses.append(loss)``), or to the argument
itself when it is a tensor.
"""
from __future__ import annotations

import ast
from typing import List, Optional

from tracefix.pysource import SourceFile, own_nodes, param_names

DIRECT = 0.9         # .numpy() on the crash line
APPEND = 0.9         # the append that stored a live tensor in the list numpy got
ARG = 0.7            # a tensor argument of the numpy call (its origin is not in sight)
PER_FRAME = 0.02     # an append found further up the traceback ranks a little lower
NOT_TENSORS = ("numpy", "item", "tolist", "detach", "cpu", "array", "asarray")


def run(ctx) -> None:
    found = ctx.statement()
    if found is None:
        return
    crash, sf, stmt = found
    direct = [n for n in ast.walk(stmt) if numpy_call(n)]
    for call in direct:
        ctx.add(sf, call.func.lineno, call.func.col_offset, "numpy-call",
                f"`{sf.segment(call.func.value)}` still requires grad (or is on a GPU) when .numpy() is called: "
                "detach it and copy it to the CPU first.", DIRECT)
    if direct:
        return
    for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if isinstance(arg, ast.Name):
                _follow(ctx, 0, sf, stmt, arg)


def numpy_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "numpy"
            and not node.args and not node.keywords)


def _follow(ctx, depth: int, sf: SourceFile, stmt: ast.AST, arg: ast.Name) -> None:
    """The appends that filled ``arg`` in its scope; else, for a parameter, the caller's argument."""
    scope = sf.scope_of(stmt)
    name = arg.id
    appends = [n for n in own_nodes(scope) if _appends_to(n, name)]
    stored = [n for n in appends if not _not_a_tensor(n.args[0])]
    for call in stored:
        ctx.add(sf, call.lineno, call.col_offset, "numpy-append",
                f"`{sf.segment(call)}` stores a tensor that still requires grad; numpy later reads `{name}` "
                f"at {ctx.mapped[0].rel_path}:{ctx.mapped[0].line}. Store a plain number or a detached CPU tensor.",
                APPEND - PER_FRAME * depth)
    if appends:
        return
    if name in param_names(scope) and depth + 1 < len(ctx.mapped):
        caller = ctx.mapped[depth + 1]
        csf = ctx.project.source(caller.rel_path)
        cstmt = csf.stmt_at(caller.line) if csf is not None and csf.tree is not None else None
        if cstmt is not None:
            passed = _passed(cstmt, getattr(scope, "name", ""), param_names(scope), name)
            if isinstance(passed, ast.Name):
                _follow(ctx, depth + 1, csf, cstmt, passed)
        return
    value = _assigned(scope, name)
    if depth == 0 and value is not None and _tensor_like(value):
        ctx.add(sf, arg.lineno, arg.col_offset, "numpy-arg",
                f"`{name}` is a tensor that still requires grad (from `{sf.segment(value)}`): numpy converts it "
                "with .numpy(), which refuses. Pass it detached and on the CPU.", ARG)


def _appends_to(node: ast.AST, name: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == name and len(node.args) == 1)


def _not_a_tensor(expr: ast.AST) -> bool:
    """Already a number, an array or a detached copy: ``x.item()``, ``x.numpy()``, ``float(x)``, a literal."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Call):
        f = expr.func
        if isinstance(f, ast.Attribute) and f.attr in NOT_TENSORS:
            return True
        if isinstance(f, ast.Name) and f.id in ("float", "int", "len", "round", "str"):
            return True
    return False


def _tensor_like(expr: ast.AST) -> bool:
    if isinstance(expr, (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.Constant)):
        return False
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        root = expr.func.value
        if isinstance(root, ast.Name) and root.id in ("np", "numpy"):
            return False
    return not _not_a_tensor(expr)


def _passed(stmt: ast.AST, func: str, params: List[str], name: str) -> Optional[ast.AST]:
    """The argument a call of ``func`` on ``stmt`` passes for parameter ``name``."""
    for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
        f = call.func
        called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if called != func:
            continue
        for k in call.keywords:
            if k.arg == name:
                return k.value
        shift = 1 if params and params[0] in ("self", "cls") and isinstance(f, ast.Attribute) else 0
        i = params.index(name) - shift
        if 0 <= i < len(call.args):
            return call.args[i]
    return None


def _assigned(scope: ast.AST, name: str) -> Optional[ast.AST]:
    found = None
    for node in own_nodes(scope):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = node.value if found is None or node.lineno > getattr(found, "lineno", 0) else found
    return found
