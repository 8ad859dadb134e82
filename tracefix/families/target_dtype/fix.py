"""target-dtype patches: build the labels in the dtype the loss wants (every builder that feeds a
call of the loss, in one patch), or cast the target at every call of the loss."""
from __future__ import annotations

from typing import List, Optional

import libcst as cst

from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.recast import BUILDERS, SPELLING, attr_of, edit, places, rebuilt
from tracefix.records import FixSite


def _want(ctx: Context) -> str:
    want = ctx.diag.field("want")
    return want if want in SPELLING else "Long"


@fixer("target-source", "target-source-unsure")
def target_source(ctx: Context, site: FixSite) -> List[Option]:
    want = _want(ctx)
    done = edit(ctx, places(site), BUILDERS, lambda src, node: rebuilt(src, node, want))
    if done is None:
        return []
    texts, changes = done
    every = f" (every builder of the labels the loss reads: {len(changes)})" if len(changes) > 1 else ""
    summary = f"Build the labels as {want}{every}: " + "; ".join(changes)
    if site.kind == "target-source-unsure":
        return [Option(summary, "unsafe", "some call of the loss reads labels that were not traced to where they are "
                       "built; they may keep the old dtype", texts)]
    return [Option(summary, "safe", "", texts)]


@fixer("target-cast")
def target_cast(ctx: Context, site: FixSite) -> List[Option]:
    want = _want(ctx)
    meth = SPELLING[want][1]

    def cast(src, node):
        code = src.code(node)
        if attr_of(node) == meth and not node.args:
            return code
        simple = isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))
        return f"{code}.{meth}()" if simple else f"({code}).{meth}()"

    spots = places(site) if site.spans else _target_on_line(ctx, site)
    done = edit(ctx, spots, cst.BaseExpression, cast)
    if not spots or done is None:
        return []
    texts, changes = done
    calls = f" at all {len(spots)} calls of the loss" if len(spots) > 1 else ""
    return [Option(f"Cast the target to {want}{calls}: " + "; ".join(changes), "safe", "", texts)]


def _target_on_line(ctx: Context, site: FixSite) -> list:
    """The target argument of the call on the site's line (a site without spans)."""
    src = ctx.source(site.path)
    call = src.find(site.line, site.col, cst.Call, lambda n: _target(n) is not None) if src is not None else None
    if call is None:
        return []
    r = src.positions[_target(call)]
    return [(site.path, r.start.line, r.start.column, r.end.line, r.end.column)]


def _target(call: cst.Call) -> Optional[cst.BaseExpression]:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "target":
            return a.value
    pos = [a for a in call.args if a.keyword is None and not a.star]
    return pos[1].value if len(pos) >= 2 else None
