"""view-contiguous: the ``.view(...)`` call on the crash line whose receiver is not contiguous.

With several ``.view`` calls on the line, the one whose receiver comes (through names assigned in
its scope) from a layout-changing method (``transpose``, ``permute``, ``t``, ``expand``, ``narrow``,
``T``/``mT``) ranks first; the reason names where the layout changed.
"""
from __future__ import annotations

import ast
from typing import Optional

from tracefix.locator.tracing import Tracer
from tracefix.pysource import SourceFile
from tracefix.vocab import STRIDE_METHODS, VIEW_ATTRS

VIEW = 0.9
OTHER_VIEW = 0.6
LAYOUT_ATTRS = VIEW_ATTRS - {"data", "real", "imag"}


def run(ctx) -> None:
    found = ctx.statement()
    if found is None:
        return
    crash, sf, stmt = found
    tracer = Tracer(ctx)
    scope = sf.scope_of(stmt)
    views = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "view" and n.args]
    found = [(call, _layout_change(tracer, sf, scope, call.func.value, crash.line, 0)) for call in views]
    sure = any(origin is not None for _c, origin in found) or len(found) == 1
    for call, origin in found:
        why = f" (its layout changed at {sf.rel}:{origin.lineno}: `{sf.brief(origin)}`)" if origin is not None else ""
        ctx.add(sf, call.func.end_lineno or call.lineno, call.func.end_col_offset - len("view"), "view-reshape",
                f"`{sf.brief(call)}` views a tensor that is not contiguous{why}.",
                VIEW if origin is not None or (sure and len(found) == 1) else OTHER_VIEW)


def _layout_change(tracer: Tracer, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int,
                   depth: int) -> Optional[ast.AST]:
    """The layout-changing call ``expr`` comes from, through method chains and local names."""
    if depth > 6:
        return None
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr in STRIDE_METHODS:
            return expr
        if expr.func.attr in ("contiguous", "view", "reshape", "clone"):
            return None     # contiguous again, or another view: that one fails first
        return _layout_change(tracer, sf, scope, expr.func.value, line, depth + 1)
    if isinstance(expr, ast.Attribute) and expr.attr in LAYOUT_ATTRS:
        return expr
    if isinstance(expr, ast.Subscript):
        return _layout_change(tracer, sf, scope, expr.value, line, depth + 1)
    if isinstance(expr, ast.Name):
        a = tracer.last_assign(sf, scope, expr.id, line)
        if isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name):
            return _layout_change(tracer, sf, scope, a.value, a.lineno, depth + 1)
    return None
