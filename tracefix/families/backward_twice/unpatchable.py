"""What to say when a backward-twice fix site gets no automatic patch."""
from __future__ import annotations

from typing import Optional

from tracefix.records import FixSite


def explain(site: FixSite) -> Optional[str]:
    if site.kind == "graph-before-loop":
        return (f"{site.path}:{site.line} ({site.code.strip()}) builds a graph once, before the loop; move it into "
                "the loop so that each iteration builds its own, or detach it if what made it should not train. "
                "tracefix cannot tell which you mean, and retain_graph=True would backpropagate into it again "
                "every step.")
    return None
