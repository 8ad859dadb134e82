"""Fix sites from the witness's ``half-params`` evidence: the cast that made the parameters half."""
from __future__ import annotations

import ast

from tracefix.locator.evidence import line_nodes
from tracefix.pysource import SourceFile, keyword, last_name
from tracefix.records import Evidence


def site_from_line(ctx, sf: SourceFile, line: int, ev: Evidence, score: float) -> None:
    """The cast on ``line``: ``torch_dtype=``, ``set_default_dtype``, ``.half()/.to()``, ``dtype=``."""
    stmt, nodes = line_nodes(sf, line)
    if stmt is None:
        return None
    why = f"Seen by the witness: {ev.summary}"
    for n in nodes:
        if not isinstance(n, ast.Call):
            continue
        name = last_name(n.func)
        kw = keyword(n, "torch_dtype")
        if kw is not None and name not in ("to", "type"):
            return ctx.add(sf, kw.lineno, kw.col_offset, "torch-dtype-fp16", why, score)
        if name.endswith("set_default_dtype"):
            return ctx.add(sf, n.lineno, n.col_offset, "default-dtype", why, score)
        if name in ("half", "bfloat16", "to", "type") and isinstance(n.func, ast.Attribute):
            col = (n.func.end_col_offset or 0) - len(name)
            return ctx.add(sf, n.lineno, max(col, 0), "model-cast", why, score)
        kw = keyword(n, "dtype")
        if kw is not None:
            return ctx.add(sf, kw.lineno, kw.col_offset, "param-dtype", why, score)
    return None
