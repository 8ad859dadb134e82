"""backward-twice patches: ``x`` -> ``x.detach()`` where the freed graph is read."""
from __future__ import annotations

import re
from typing import List

import libcst as cst

from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.cstedit import expr
from tracefix.records import FixSite

_UNSURE = {
    "detach-carried-unsure": "the code does not show whether this state is one tensor or a tuple (an LSTM's (h, c) "
                             "needs tuple(h.detach() for h in state))",
    "detach-carried-attr-unsure": "the code does not show whether this state is one tensor or a tuple (an LSTM's "
                                  "(h, c) needs tuple(h.detach() for h in state))",
    "detach-shared-unsure": "the earlier loss no longer sends gradients into what made this value; nothing between "
                            "the two backward() calls steps and zeroes them, so that update changes",
}


def read_name(ctx: Context, src, site: FixSite, write: str):
    """The name on the site's line that ``write`` detaches: read there (not assigned), not already
    detached, nearest the site's column; None when the line already reads it as ``write``."""
    lines = (ctx.text(site.path) or "").split("\n")
    if site.line > len(lines) or write in lines[site.line - 1].split("#")[0]:
        return None
    wanted = set(re.findall(r"[A-Za-z_]\w*", write))
    cands = []
    for n in src.all_on_line(site.line, cst.Name):
        parents = list(src.ancestors(n))
        if n.value not in wanted or any(isinstance(a, (cst.AssignTarget, cst.Attribute)) and (
                isinstance(a, cst.AssignTarget) or a.attr is n) for a in parents[:3]):
            continue
        cands.append(n)
    if not cands:
        return None
    return min(cands, key=lambda n: abs(src.positions[n].start.column - site.col))


@fixer("detach-carried", "detach-carried-unsure", "detach-shared", "detach-shared-unsure")
def detach(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None or not site.write:
        return []
    name = read_name(ctx, src, site, site.write)
    if name is None:
        return []
    text = src.replace(name, lambda n: expr(site.write))
    what = ("stop the previous iteration's graph at this state (truncated backpropagation through time)"
            if site.kind.startswith("detach-carried") else "score it without backpropagating into what made it")
    return [Option(f"Detach `{name.value}` where it is read: `{name.value}` -> `{site.write}` ({what}); not "
                   "retain_graph=True, which keeps every graph alive and backpropagates twice",
                   "unsafe" if site.kind in _UNSURE else "safe", _UNSURE.get(site.kind, ""), {site.path: text})]


@fixer("detach-carried-attr", "detach-carried-attr-unsure")
def detach_attribute(ctx: Context, site: FixSite) -> List[Option]:
    """``self.hidden`` -> ``self.hidden.detach()`` where the carried attribute is read (not assigned)."""
    src = ctx.source(site.path)
    if src is None or not site.write:
        return []
    lines = (ctx.text(site.path) or "").split("\n")
    if site.line > len(lines) or site.write in lines[site.line - 1].split("#")[0]:
        return []
    wanted = re.search(r"self\.\w+", site.write).group(0)
    reads = [n for n in src.all_on_line(site.line, cst.Attribute) if src.code(n) == wanted
             and not any(isinstance(a, cst.AssignTarget) or (isinstance(a, cst.Tuple) and
                         isinstance(src.parent(a), cst.AssignTarget)) for a in list(src.ancestors(n))[:2])]
    if len(reads) != 1:
        return []
    text = src.replace(reads[0], lambda n: expr(f"({site.write})" if " if " in site.write else site.write))
    return [Option(f"Detach `{wanted}` where it is read: `{wanted}` -> `{site.write}` (stop the previous step's "
                   "graph at this state: truncated backpropagation through time); not retain_graph=True, which "
                   "keeps every graph alive and backpropagates twice",
                   "unsafe" if site.kind in _UNSURE else "safe", _UNSURE.get(site.kind, ""), {site.path: text})]
