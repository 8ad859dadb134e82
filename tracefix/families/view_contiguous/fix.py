"""view-contiguous patches: ``.view(...)`` -> ``.reshape(...)`` (it copies only when it must);
``.contiguous().view(...)`` as the alternative."""
from __future__ import annotations

from typing import List

import libcst as cst

from tracefix.patcher.context import Context, Option, fixer
from tracefix.records import FixSite


@fixer("view-reshape")
def view_reshape(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    name = src.find(site.line, site.col, cst.Name, lambda n: n.value == "view") if src is not None else None
    attr = src.parent(name) if name is not None else None
    if not (isinstance(attr, cst.Attribute) and attr.attr is name):
        return []
    reshaped = src.replace(name, lambda n: n.with_changes(value="reshape"))
    recv = src.code(attr.value)
    contiguous = src.replace(attr, lambda n: n.with_changes(
        value=cst.Call(func=cst.Attribute(value=n.value, attr=cst.Name("contiguous")))))
    return [Option(f"`{recv}.view(...)` -> `{recv}.reshape(...)` ({site.path}:{site.line}): the same shape, "
                   "copying only when the layout needs it", "safe", "", {site.path: reshaped}),
            Option(f"`{recv}.view(...)` -> `{recv}.contiguous().view(...)`: always copies", "safe", "",
                   {site.path: contiguous}, alternative=True)]
