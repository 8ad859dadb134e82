"""Fix sites from the witness's ``linear-shape`` evidence: the line that built the Linear that raised."""
from __future__ import annotations

from tracefix.families.linear_shape.locate import add_site, describes, factory_sites
from tracefix.families.linear_shape.shapes import linear_calls, shapes_of
from tracefix.locator.evidence import line_nodes
from tracefix.pysource import SourceFile
from tracefix.records import Evidence


def site_from_line(ctx, sf: SourceFile, line: int, ev: Evidence, score: float) -> None:
    """The ``Linear(...)`` built on ``line``: of several, the one the sizes describe."""
    stmt, _nodes = line_nodes(sf, line)
    if stmt is None:
        return None
    shapes = shapes_of(ctx.diag.fields)
    calls = [c for c in linear_calls(stmt) if c.lineno <= line <= (c.end_lineno or c.lineno)]
    if calls:
        pick = next((c for c in calls if describes(ctx, sf, c, shapes)), calls[0])
        add_site(ctx, sf, pick, shapes, True, score, f"Seen by the witness: {ev.summary}. ")
    else:       # the line that called a layer factory (the witness's caller site)
        factory_sites(ctx, sf, [stmt], shapes, score)
    return None
