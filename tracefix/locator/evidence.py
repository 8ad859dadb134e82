"""The witness's evidence (``Traceback.evidence``) outranks inference, for every family.

The family's locate module reasons from the source as if there were no evidence; this pass then
reads what the crashing process saw:

* a fix site the family found on a line the witness names is confirmed and moves to the top, in
  the family's own order (a criterion built with ``reduction='none'`` still before the loss line);
* a site of a kind the evidence speaks to (an in-place write, a cast of the parameters) on a line
  the witness did not see is demoted: the process showed the culprit is elsewhere;
* when the family found nothing on the witness's lines (or only sites the evidence contradicts),
  the lines themselves become fix sites, of the kind their code shows (``x += y``,
  ``nn.ReLU(inplace=True)``, ``model.half()``...): the family's ``evidence.py`` reads them.

Sites a family derives from a line the witness names (the config value behind a cast, a loss
module's ``return``) are left where the family ranked them: they are that line's reason.
"""
from __future__ import annotations

import ast
from typing import List, Optional, Tuple

from tracefix.families import ANY, of_evidence, part
from tracefix.frames import frame_candidates
from tracefix.pysource import SourceFile
from tracefix.records import Evidence, FixSite, Frame

CONFIRMED = 0.97            # above anything inferred from the source alone
DEMOTE = 0.5

# The evidence's sites whose lines are named as culprits (a "backward" site only says where).
ROLES = {"construct", "write", "step", "cast", "param", "creator", "caller"}


def apply_evidence(ctx) -> None:
    """Re-rank ``ctx.sites`` with the witness's evidence, or add sites from it (see module doc)."""
    ev: Optional[Evidence] = getattr(ctx.diag.traceback, "evidence", None)
    if ev is None or ctx.foreign:
        return
    lines = _local_lines(ctx, ev)
    if not lines:
        return
    # The fix-site kinds the evidence speaks to directly (its family declares them): on another line
    # than the witness's, such a site is contradicted.  Other kinds are reasons behind a line (a
    # config value, a loss module's return): the family's order among them stands.
    fam = of_evidence(ev.kind)
    direct = fam.evidence[ev.kind] if fam is not None else frozenset()
    reader = part(fam, "evidence") if fam is not None else None

    def spoken_to(site: FixSite) -> bool:
        return direct is ANY or site.kind in direct

    witnessed = [s for s in ctx.sites if s.kind != "backward-receiver" and _covers(ctx, s, lines)]
    if witnessed:
        floor = min(s.score for s in witnessed)
        for i, s in enumerate(ctx.sites):
            if s in witnessed or (not spoken_to(s) and s.score >= floor):
                # the family's own order stands among what the witness confirms
                new = CONFIRMED + (s.score - 1.0) * 0.02
                ctx.sites[i] = _with(s, new, "Confirmed by the witness. " if s in witnessed else "")
            elif spoken_to(s):
                ctx.sites[i] = _with(s, s.score * DEMOTE, "")
        return
    for i, s in enumerate(ctx.sites):
        if spoken_to(s):
            ctx.sites[i] = _with(s, s.score * DEMOTE, "")
    if any(not spoken_to(s) and s.kind != "backward-receiver" for s in ctx.sites):
        return          # the family's reasons stand: the witness's lines are what they explain
    if reader is None:
        return
    if hasattr(reader, "before_lines"):
        reader.before_lines(ctx, ev)
    for n, (rel, line) in enumerate(lines):
        sf = ctx.project.source(rel)
        if sf is not None:
            reader.site_from_line(ctx, sf, line, ev, CONFIRMED - 0.01 * n)


def mapped_site(ctx, es) -> Optional[Tuple[str, int]]:
    """(rel path, line) of an evidence site under root; None when it is not under root, or does
    not tell which file."""
    if es is None:
        return None
    cands = frame_candidates(Frame(path=es.path, line=es.line, func="", code=es.code or None), ctx.root, ctx.index)
    return (cands[0].rel_path, cands[0].line) if len(cands) == 1 else None


def _local_lines(ctx, ev: Evidence) -> List[Tuple[str, int]]:
    """(rel path, line) of the evidence's sites that are files under root, in the witness's order."""
    out: List[Tuple[str, int]] = []
    for s in ev.sites:
        key = mapped_site(ctx, s) if s.role in ROLES else None
        if key is not None and key not in out:
            out.append(key)
    return out


def _covers(ctx, site: FixSite, lines: List[Tuple[str, int]]) -> bool:
    """Is a witnessed line the site's line, or inside the block that starts there (a `with` block
    whose loop clamps the parameters)?"""
    if (site.path, site.line) in lines:
        return True
    inner = [ln for rel, ln in lines if rel == site.path and ln > site.line]
    if not inner:
        return False
    sf = ctx.project.source(site.path)
    if sf is None or sf.tree is None:
        return False
    ends = [n.end_lineno or n.lineno for n in ast.walk(sf.tree)
            if isinstance(n, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.If, ast.Try))
            and n.lineno == site.line]
    return any(site.line < ln <= end for ln in inner for end in ends)


def _with(site: FixSite, score: float, prefix: str) -> FixSite:
    from tracefix.record import replace

    reason = site.reason if not prefix or site.reason.startswith(prefix) else prefix + site.reason
    return replace(site, score=round(score, 3), reason=reason)


def line_nodes(sf: SourceFile, line: int) -> Tuple[Optional[ast.stmt], List[ast.AST]]:
    """The statement on ``line`` and its nodes that start there (all of its nodes if none does),
    for a family's ``site_from_line``."""
    stmt = sf.stmt_at(line)
    if stmt is None:
        return None, []
    return stmt, [n for n in ast.walk(stmt) if getattr(n, "lineno", None) == line] or list(ast.walk(stmt))
