"""The witness's evidence (``Traceback.evidence``) outranks inference, for every family.

The family's locate module reasons from the source as if there were no evidence; this pass then
reads what the crashing process saw:

* a fix site the family found on a line the witness names is confirmed and moves to the top, in
  the family's own order (a criterion built with ``reduction='none'`` still before the loss line);
* a site of a kind the evidence speaks to (an in-place write, a cast of the parameters) on a line
  the witness did not see is demoted: the process showed the culprit is elsewhere;
* when the family found nothing on the witness's lines (or only sites the evidence contradicts),
  the lines themselves become fix sites, of the kind their code shows (``x += y``,
  ``nn.ReLU(inplace=True)``, ``model.half()``...).

Sites a family derives from a line the witness names (the config value behind a cast, a loss
module's ``return``) are left where the family ranked them: they are that line's reason.
"""
from __future__ import annotations

import ast
from typing import List, Optional, Tuple

from tracefix.frames import frame_candidates
from tracefix.locator.tracing import is_true, value_col
from tracefix.pysource import SourceFile, const_str, keyword, last_name
from tracefix.records import Evidence, FixSite, Frame

CONFIRMED = 0.97            # above anything inferred from the source alone
DEMOTE = 0.5
ANY = None

# The fix-site kinds a piece of evidence speaks to directly: on another line than the witness's,
# such a site is contradicted.  Other kinds are reasons behind a line (a config value, a loss
# module's return): the family's order among them stands.
DIRECT = {
    "inplace-write": ANY,
    "param-update": ANY,
    "half-params": {"model-cast", "torch-dtype-fp16", "default-dtype", "param-dtype"},
    "nonscalar-loss": set(),
}
ROLES = {"construct", "write", "step", "cast", "param", "creator", "caller"}


def apply_evidence(ctx) -> None:
    """Re-rank ``ctx.sites`` with the witness's evidence, or add sites from it (see module doc)."""
    ev: Optional[Evidence] = getattr(ctx.diag.traceback, "evidence", None)
    if ev is None or ctx.foreign:
        return
    lines = _local_lines(ctx, ev)
    if not lines:
        return
    direct = DIRECT.get(ev.kind, set())

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
    if ev.kind == "param-update":
        _caller_before_backward(ctx, ev)
    for n, (rel, line) in enumerate(lines):
        sf = ctx.project.source(rel)
        if sf is not None:
            _site_from_line(ctx, sf, line, ev, CONFIRMED - 0.01 * n)


def _caller_before_backward(ctx, ev: Evidence) -> None:
    """A parameter written inside a helper (a pruning callback, a clamp) called between the forward
    and the backward: the call in the training step is what moves (below the backward), not the
    write inside the helper, which is meant to change the parameters."""
    back = _mapped_site(ctx, ev.site("backward"))
    if back is None:
        return
    for es in ev.sites:
        if es.role != "caller":
            continue
        call = _mapped_site(ctx, es)
        if call is None or call[0] != back[0] or not call[1] < back[1]:
            continue
        sf = ctx.project.source(call[0])
        stmt = sf.stmt_at(call[1]) if sf is not None else None
        bstmt = sf.stmt_at(back[1]) if sf is not None else None
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and bstmt is not None
                and sf.scope_of(stmt) is sf.scope_of(bstmt)):
            continue
        ctx.add(sf, stmt.lineno, stmt.col_offset, "param-update-before-backward",
                f"Seen by the witness: {ev.summary}. {sf.line_text(stmt.lineno).strip()} changes parameters "
                f"in place between the forward pass and backward(); it belongs after the backward (and the "
                f"optimizer step).", CONFIRMED + 0.005)
        return


def _mapped_site(ctx, es) -> Optional[Tuple[str, int]]:
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
        key = _mapped_site(ctx, s) if s.role in ROLES else None
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


def _site_from_line(ctx, sf: SourceFile, line: int, ev: Evidence, score: float) -> None:
    """A fix site of the kind the code on ``line`` shows, for what the evidence says happened."""
    stmt = sf.stmt_at(line)
    if stmt is None:
        return
    why = f"Seen by the witness: {ev.summary}"
    nodes = [n for n in ast.walk(stmt) if getattr(n, "lineno", None) == line] or list(ast.walk(stmt))
    if ev.kind in ("inplace-write", "param-update"):
        # a module the witness saw built with inplace=True here, whatever expression said so
        built_inplace = any(es.role == "construct" and "inplace=True" in es.detail
                            and _mapped_site(ctx, es) == (sf.rel, line) for es in ev.sites)
        for n in nodes:
            if isinstance(n, ast.Call):
                kw = keyword(n, "inplace")
                if kw is not None and (is_true(kw.value) or built_inplace and not isinstance(kw.value, ast.Constant)):
                    return ctx.add(sf, kw.lineno, kw.col_offset, "inplace-kwarg", why, score)
                out = keyword(n, "out")
                if out is not None:
                    return ctx.add(sf, out.lineno, out.col_offset, "inplace-out", why, score)
        if isinstance(stmt, ast.AugAssign):
            return ctx.add(sf, line, stmt.target.col_offset, "inplace-augassign", why, score)
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Subscript) for t in stmt.targets):
            target = next(t for t in stmt.targets if isinstance(t, ast.Subscript))
            return ctx.add(sf, line, target.col_offset, "inplace-subscript", why, score)
        for n in nodes:
            if isinstance(n, ast.Call):
                name = last_name(n.func)
                if name == "step" and ev.kind == "param-update":
                    return ctx.add(sf, n.lineno, n.col_offset, "optimizer-step-between", why, score)
                if name.endswith("_") and not name.startswith("_"):
                    return ctx.add(sf, n.lineno, n.col_offset, "inplace-method", why, score)
    elif ev.kind == "half-params":
        for n in nodes:
            if not isinstance(n, ast.Call):
                continue
            name = last_name(n.func)
            for kwname in ("torch_dtype", "dtype"):
                kw = keyword(n, kwname)
                if kw is not None and name not in ("to", "type") and kwname == "torch_dtype":
                    return ctx.add(sf, kw.lineno, kw.col_offset, "torch-dtype-fp16", why, score)
            if name.endswith("set_default_dtype"):
                return ctx.add(sf, n.lineno, n.col_offset, "default-dtype", why, score)
            if name in ("half", "bfloat16", "to", "type") and isinstance(n.func, ast.Attribute):
                col = (n.func.end_col_offset or 0) - len(name)
                return ctx.add(sf, n.lineno, max(col, 0), "model-cast", why, score)
            kw = keyword(n, "dtype")
            if kw is not None:
                return ctx.add(sf, kw.lineno, kw.col_offset, "param-dtype", why, score)
    elif ev.kind == "nonscalar-loss":
        for n in nodes:
            if isinstance(n, ast.Call):
                kw = keyword(n, "reduction")
                if kw is not None and const_str(kw.value) == "none":
                    return ctx.add(sf, kw.lineno, kw.col_offset, "criterion-reduction", why, score)
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            return ctx.add(sf, line, stmt.value.col_offset, "per-sample-return", why, score)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            return ctx.add(sf, line, value_col(sf, stmt), "loss-assignment", why, score)
    return None

