"""The record every error family fills in (``tracefix/families/<name>/family.py``).

A family is one folder.  Besides ``family.py`` it may hold, each found by name and imported only
when a diagnosis of the family needs it:

``locate.py``       the functions its knowledge entries' ``locate`` names point at: ``run(ctx)``
                    adds fix sites (:mod:`tracefix.locator.base`)
``evidence.py``     ``site_from_line(ctx, sf, line, ev, score)``: a fix site of the kind the code
                    on a line the witness named shows; optionally ``before_lines(ctx, ev)``
``fix.py``          ``@fixer(kind)`` functions (:mod:`tracefix.patcher.context`); the only part
                    that imports libcst
``unpatchable.py``  ``explain(site) -> str | None``: what to say when a site gets no patch

Light (no dataclasses): the registry is read on every run, before anything is diagnosed.
"""
from __future__ import annotations

from typing import FrozenSet, Mapping, Optional, Tuple

from tracefix.record import field, record

ANY: Optional[FrozenSet[str]] = None     # evidence that speaks to every fix-site kind of its family


@record(frozen=True)
class Family:
    name: str                              # the folder's name
    entries: Tuple[str, ...]               # the built-in knowledge entries' ids it serves
    locate: Mapping[str, str]              # an entry's `locate` name -> function in locate.py
    fix_kinds: Tuple[str, ...]             # the fix-site kinds its locate and evidence produce
    gate_words: Tuple[str, ...]            # lower case; every wording of its messages keeps one
    # witness evidence kind -> the fix-site kinds it speaks to directly (ANY: all of them); a site of
    # such a kind on another line than the witness's is contradicted
    evidence: Mapping[str, Optional[FrozenSet[str]]] = field(default_factory=dict)
    # a cause -> fix-kind prefixes: sites blaming the same cause are rival explanations of it
    rival_causes: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    rival_sites: bool = True               # are its fix sites rivals (which write) or one chain?
    anomaly_helps: bool = False            # does torch's anomaly mode's forward trace locate it?
    # errors a wrong or partial fix of it leads to next (a patched run dying of one: still failing)
    sequels: Tuple[str, ...] = ()
