"""Fix sites from the witness's in-place evidence (``inplace-write``, ``param-update``)."""
from __future__ import annotations

import ast

from tracefix.locator.evidence import CONFIRMED, line_nodes, mapped_site
from tracefix.locator.tracing import is_true
from tracefix.pysource import SourceFile, keyword, last_name
from tracefix.records import Evidence


def before_lines(ctx, ev: Evidence) -> None:
    """A parameter written inside a helper (a pruning callback, a clamp) called between the forward
    and the backward: the call in the training step is what moves (below the backward), not the
    write inside the helper, which is meant to change the parameters."""
    if ev.kind != "param-update":
        return
    back = mapped_site(ctx, ev.site("backward"))
    if back is None:
        return
    for es in ev.sites:
        if es.role != "caller":
            continue
        call = mapped_site(ctx, es)
        if call is None or call[0] != back[0] or not call[1] < back[1]:
            continue
        sf = ctx.project.source(call[0])
        stmt = sf.stmt_at(call[1]) if sf is not None else None
        bstmt = sf.stmt_at(back[1]) if sf is not None else None
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and bstmt is not None
                and sf.scope_of(stmt) is sf.scope_of(bstmt)):
            continue
        ctx.add(sf, stmt.lineno, stmt.col_offset, "param-update-before-backward",
                f"Seen by the witness: {ev.summary}. {sf.line_text(stmt.lineno).strip()} changes parameters "
                f"in place between the forward pass and backward(); it belongs after the backward (and the "
                f"optimizer step).", CONFIRMED + 0.005)
        return


def site_from_line(ctx, sf: SourceFile, line: int, ev: Evidence, score: float) -> None:
    """The write on ``line`` the witness saw: an inplace= argument, out=, ``x += y``, an indexed
    write, an optimizer step or an in-place method."""
    stmt, nodes = line_nodes(sf, line)
    if stmt is None:
        return None
    why = f"Seen by the witness: {ev.summary}"
    # a module the witness saw built with inplace=True here, whatever expression said so
    built_inplace = any(es.role == "construct" and "inplace=True" in es.detail
                        and mapped_site(ctx, es) == (sf.rel, line) for es in ev.sites)
    for n in nodes:
        if isinstance(n, ast.Call):
            kw = keyword(n, "inplace")
            if kw is not None and (is_true(kw.value) or built_inplace and not isinstance(kw.value, ast.Constant)):
                return ctx.add(sf, kw.lineno, kw.col_offset, "inplace-kwarg", why, score)
            out = keyword(n, "out")
            if out is not None:
                return ctx.add(sf, out.lineno, out.col_offset, "inplace-out", why, score)
    if isinstance(stmt, ast.AugAssign):
        return ctx.add(sf, line, stmt.target.col_offset, "inplace-augassign", why, score)
    if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Subscript) for t in stmt.targets):
        target = next(t for t in stmt.targets if isinstance(t, ast.Subscript))
        return ctx.add(sf, line, target.col_offset, "inplace-subscript", why, score)
    for n in nodes:
        if isinstance(n, ast.Call):
            name = last_name(n.func)
            if name == "step" and ev.kind == "param-update":
                return ctx.add(sf, n.lineno, n.col_offset, "optimizer-step-between", why, score)
            if name.endswith("_") and not name.startswith("_"):
                return ctx.add(sf, n.lineno, n.col_offset, "inplace-method", why, score)
    return None
