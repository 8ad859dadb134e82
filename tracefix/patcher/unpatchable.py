"""Why a fix site gets no automatic patch: its family's ``unpatchable.py`` says, or the generic text."""
from __future__ import annotations

from tracefix.families import of_kind, part
from tracefix.records import FixSite


def explain_unpatchable(site: FixSite) -> str:
    """Why some fix sites get no automatic patch (the CLI shows this instead of a diff)."""
    fam = of_kind(site.kind)
    module = part(fam, "unpatchable") if fam is not None else None
    said = module.explain(site) if module is not None else None
    return said or (f"{site.path}:{site.line}: tracefix cannot rewrite this line safely; change it by hand "
                    "(see the reason above).")
