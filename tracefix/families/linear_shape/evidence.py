"""Fix sites from the witness's ``linear-shape`` evidence: the line that built the Linear that raised."""
from __future__ import annotations

from tracefix.families.linear_shape.locate import judge
from tracefix.families.linear_shape.shapes import linear_calls, shapes_of
from tracefix.locator.evidence import line_nodes
from tracefix.pysource import SourceFile
from tracefix.records import Evidence


def site_from_line(ctx, sf: SourceFile, line: int, ev: Evidence, score: float) -> None:
    """The ``Linear(...)`` built on ``line`` (of several on one line, the one the sizes describe)."""
    stmt, _nodes = line_nodes(sf, line)
    if stmt is None:
        return None
    shapes = shapes_of(ctx.diag.fields)
    calls = sorted((c for c in linear_calls(stmt) if c.lineno <= line <= (c.end_lineno or c.lineno)),
                   key=lambda c: judge(sf, c, shapes, True) is None)
    if not calls:
        return None
    judged = judge(sf, calls[0], shapes, True)
    why = f"Seen by the witness: {ev.summary}" + (f" {judged[1]}" if judged else "")
    return ctx.add(sf, calls[0].lineno, calls[0].col_offset, "linear-in-features", why, score)
