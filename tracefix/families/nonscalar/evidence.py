"""Fix sites from the witness's ``nonscalar-loss`` evidence: where the per-sample loss was made."""
from __future__ import annotations

import ast

from tracefix.locator.evidence import line_nodes
from tracefix.locator.tracing import value_col
from tracefix.pysource import SourceFile, const_str, keyword
from tracefix.records import Evidence


def site_from_line(ctx, sf: SourceFile, line: int, ev: Evidence, score: float) -> None:
    """A ``reduction='none'`` criterion, a ``return`` of the loss, or the assignment that made it."""
    stmt, nodes = line_nodes(sf, line)
    if stmt is None:
        return None
    why = f"Seen by the witness: {ev.summary}"
    for n in nodes:
        if isinstance(n, ast.Call):
            kw = keyword(n, "reduction")
            if kw is not None and const_str(kw.value) == "none":
                return ctx.add(sf, kw.lineno, kw.col_offset, "criterion-reduction", why, score)
    if isinstance(stmt, ast.Return) and stmt.value is not None:
        return ctx.add(sf, line, stmt.value.col_offset, "per-sample-return", why, score)
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        return ctx.add(sf, line, value_col(sf, stmt), "loss-assignment", why, score)
    return None
