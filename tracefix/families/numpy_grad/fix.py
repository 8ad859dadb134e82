"""numpy-grad patches: detach and copy to the CPU where the tensor leaves torch; ``.item()`` for a
value that is provably a scalar (a loss that ``backward()`` was called on)."""
from __future__ import annotations

from typing import List

import libcst as cst

from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.cstedit import expr
from tracefix.records import FixSite


def _method(call: cst.CSTNode, name: str) -> bool:
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == name


def _detached(src, node: cst.BaseExpression) -> str:
    """``x`` -> ``x.detach().cpu()``; ``x.cpu()`` -> ``x.detach().cpu()``; ``x.detach()`` -> ``x.detach().cpu()``."""
    if _method(node, "cpu") and not node.args:
        node = node.func.value
    if _method(node, "detach") and not node.args:
        return f"{src.code(node)}.cpu()"
    code = src.code(node)
    needs_parens = not isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not getattr(
        node, "lpar", None)
    return f"({code}).detach().cpu()" if needs_parens else f"{code}.detach().cpu()"


@fixer("numpy-call")
def numpy_call(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    call = src.find(site.line, site.col, cst.Call, lambda n: _method(n, "numpy") and not n.args)
    if call is None:
        return []
    receiver = call.func.value
    new = f"{_detached(src, receiver)}.numpy()"
    old = src.code(call)
    if old == new:
        return []
    text = src.replace(call, lambda n: expr(new))
    return [Option(f"Detach and copy to the CPU before .numpy(): `{old}` -> `{new}` (.cpu() alone keeps the "
                   "graph and fails the same way)", "safe", "", {site.path: text})]


def _scalar(src, name: str, scope: cst.CSTNode) -> bool:
    """Was ``name.backward()`` called (so it is a scalar), or ``name.item()`` read, in ``scope``?"""
    found = []

    class Seen(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            f = node.func
            if (isinstance(f, cst.Attribute) and f.attr.value in ("backward", "item") and not node.args
                    and isinstance(f.value, cst.Name) and f.value.value == name):
                found.append(node)

    scope.visit(Seen())
    return bool(found)


@fixer("numpy-append")
def numpy_append(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    call = src.find(site.line, site.col, cst.Call, lambda n: _method(n, "append") and len(n.args) == 1)
    if call is None:
        return []
    value = call.args[0].value
    if any(_method(value, m) for m in ("item", "detach", "cpu", "numpy", "tolist")):
        return []          # already stored as a number or a detached copy
    if isinstance(value, cst.Name) and _scalar(src, value.value, src.scope_of(call)):
        new, how = f"{value.value}.item()", "a Python number (it is a scalar: backward() ran on it)"
    else:
        new, how = _detached(src, value), "a detached CPU tensor"
    text = src.replace(value, lambda n: expr(new))
    return [Option(f"Store {how}: `{src.code(call)}` -> `{src.code(call.func)}({new})`; the list no longer keeps "
                   "every step's graph alive either", "safe", "", {site.path: text})]


@fixer("numpy-arg")
def numpy_arg(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    lines = (ctx.text(site.path) or "").split("\n")
    def read(n: cst.Name) -> bool:       # a value read here: not an attribute name, a callee or a target
        up = list(src.ancestors(n))[:3]
        return not (up and ((isinstance(up[0], cst.Attribute) and up[0].attr is n)
                            or (isinstance(up[0], cst.Call) and up[0].func is n)
                            or any(isinstance(a, cst.AssignTarget) for a in up)))

    names = [n for n in src.all_on_line(site.line, cst.Name) if read(n)]
    name = min(names, key=lambda n: abs(src.positions[n].start.column - site.col), default=None)
    if name is None or f"{name.value}.detach()" in lines[site.line - 1].split("#")[0]:
        return []
    new = f"{name.value}.detach().cpu().numpy()"
    text = src.replace(name, lambda n: expr(new))
    return [Option(f"Hand numpy a detached CPU copy: `{name.value}` -> `{new}`", "safe", "", {site.path: text})]
