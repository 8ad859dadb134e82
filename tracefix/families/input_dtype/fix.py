"""input-dtype patches: make the data float32 where it enters torch (every builder on a path into
the model, in one patch), or cast the input at every call of the model.  Never ``model.double()``."""
from __future__ import annotations

from typing import List

import libcst as cst

from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.recast import BUILDERS, attr_of, edit, places, rebuilt
from tracefix.records import FixSite


@fixer("input-source", "input-source-unsure")
def input_source(ctx: Context, site: FixSite) -> List[Option]:
    done = edit(ctx, places(site), BUILDERS, lambda src, node: rebuilt(src, node, "Float"))
    if done is None:
        return []
    texts, changes = done
    every = f" (every path into the model: {len(changes)})" if len(changes) > 1 else ""
    summary = f"Make the data float32 where it enters torch{every}: " + "; ".join(changes)
    if site.kind == "input-source-unsure":
        return [Option(summary, "unsafe", "some call of the model gets data that was not traced to where it is "
                       "built; it may still be float64", texts)]
    return [Option(summary, "safe", "", texts)]


@fixer("input-cast")
def input_cast(ctx: Context, site: FixSite) -> List[Option]:
    def cast(src, node):
        code = src.code(node)
        if attr_of(node) == "float" and not node.args:
            return code
        simple = isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))
        return f"{code}.float()" if simple else f"({code}).float()"

    spots = places(site) if site.spans else _input_on_line(ctx, site)
    done = edit(ctx, spots, cst.BaseExpression, cast)
    if not spots or done is None:
        return []
    texts, changes = done
    calls = f" at all {len(spots)} calls of the model" if len(spots) > 1 else ""
    return [Option(f"Cast the input to float32{calls}: " + "; ".join(changes), "safe", "", texts)]


def _input_on_line(ctx: Context, site: FixSite) -> list:
    """The first argument of the outermost call on the site's line (a site without spans)."""
    src = ctx.source(site.path)
    calls = src.all_on_line(site.line, cst.Call, lambda n: bool(n.args) and n.args[0].keyword is None) if src else []
    if not calls:
        return []
    call = min(calls, key=lambda n: (src.positions[n].start.column, -src.positions[n].end.column))
    r = src.positions[call.args[0].value]
    return [(site.path, r.start.line, r.start.column, r.end.line, r.end.column)]
