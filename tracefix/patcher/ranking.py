"""Fix sites -> ranked patches (first = recommended)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

from tracefix.families import families, of_kind, part
from tracefix.patcher.context import FIXERS, Context, Fixer, Option
from tracefix.patcher.cstedit import NeedWhole
from tracefix.patcher.text import compiles, merge_edit, restore, unified_diff
from tracefix.record import replace
from tracefix.records import INSUFFICIENT, SAFE, UNSAFE, Diagnosis, FixSite, Patch



def fixer_for(kind: str) -> Optional[Fixer]:
    """The fixer of a fix-site kind: its family's fix.py registers it with @fixer when first loaded,
    so only the families present in a diagnosis pay for their libcst code."""
    if kind not in FIXERS:
        fam = of_kind(kind)
        if fam is not None:
            part(fam, "fix")
    return FIXERS.get(kind)


def propose(diag: Diagnosis, root: Path) -> Tuple[Patch, ...]:
    """Patches for ``diag.fix_sites``: every site's main fix in site order, then the alternatives."""
    ctx = Context(diag, Path(root))
    main: List[Tuple[bool, Patch]] = []
    alternatives: List[Patch] = []
    seen = set()
    for site in diag.fix_sites:
        fix = fixer_for(site.kind)
        if fix is None:
            continue
        try:
            try:
                options = fix(ctx, site)
            except NeedWhole:  # it asked a partly parsed file about the rest: ask again, whole
                ctx.needs_whole()
                options = fix(ctx, site)
        except Exception:  # a fixer bug must not take the diagnosis down; the site just gets no patch
            continue
        for option in options:
            patch = _to_patch(ctx, option, (site.path, site.line))
            if patch is None or patch.diff in seen:
                continue
            seen.add(patch.diff)
            if option.alternative:
                alternatives.append(patch)
            else:
                main.append((option.demote, patch))
    main.sort(key=lambda item: item[0])  # stable: site order otherwise
    # An insufficient patch (the error moves one line on) is listed, never recommended: last.
    alternatives.sort(key=lambda p: p.applicability == INSUFFICIENT)
    patches = [p for _, p in main] + alternatives
    together = _together(ctx, diag, patches)
    patches = _guesses_hedged(diag, _rivals_hedged(diag, patches, together))
    return tuple(([together] if together else []) + patches)


def _cause(kind: str) -> str:
    """What a fix-site kind blames: a write, a cast, or (anything else) itself."""
    return next((c for fam in families() for c, prefixes in fam.rival_causes.items() if kind.startswith(prefixes)),
                kind)


def _rivals_hedged(diag: Diagnosis, patches: List[Patch], together: Optional[Patch]) -> List[Patch]:
    """Where the sites are rival explanations (which write, which cast), a safe fix of a less
    likely site, or of one of several equally likely ones, may leave the error: say so (unsafe)."""
    if not diag.rival_sites or not diag.fix_sites:
        return patches
    best = max(s.score for s in diag.fix_sites)
    top = [s for s in diag.fix_sites if s.score == best]
    kinds = {(s.path, s.line): s.kind for s in diag.fix_sites}
    chosen = {(s.path, s.line): s.value_from for s in diag.fix_sites}
    top_values = {s.value_from for s in top if s.value_from}
    rival_of_top = {_cause(s.kind) for s in top}
    covered = set(together.covers) if together is not None else set()
    out = []
    for p in patches:
        # only a rival cause (another write, another cast) is in doubt; a different remedy of the
        # same cause (drop the GradScaler instead of the bf16 cast) fixes it as well
        if p.applicability == SAFE and p.origin is not None and _cause(kinds.get(p.origin, "")) in rival_of_top:
            where = f"{p.origin[0]}:{p.origin[1]}"
            if p.origin in covered:
                why = (f"it fixes only {where} of the {len(covered)} equally likely sites; where the others "
                       f"run too, the error remains (patch 1 fixes them all)")
                p = replace(p, applicability=UNSAFE, reason=why)
            elif p.origin not in {(s.path, s.line) for s in top} and chosen.get(p.origin) not in top_values:
                # (a site applying the same chosen dtype as a top site is on its path: it fixes it too)
                why = (f"{where} is a less likely site than {top[0].path}:{top[0].line}: the change keeps "
                       f"behaviour, but the error remains unless it comes from here")
                p = replace(p, applicability=UNSAFE, reason=why)
        out.append(p)
    return out


def _guesses_hedged(diag: Diagnosis, patches: List[Patch]) -> List[Patch]:
    """A safe fix of a site that is only a guess (``FixSite.guess``) may leave the error: unsafe."""
    guesses = {(s.path, s.line): s.guess for s in diag.fix_sites if s.guess}
    return [replace(p, applicability=UNSAFE, reason=guesses[p.origin])
            if p.applicability == SAFE and p.origin in guesses else p for p in patches]


def _tied(diag: Diagnosis) -> List[FixSite]:
    """The best-ranked sites when two or more on different lines share the top score."""
    sites = sorted(diag.fix_sites, key=lambda s: -s.score)
    if len(sites) < 2:
        return []
    top = [s for s in sites if s.score == sites[0].score]
    return top if len({(s.path, s.line) for s in top}) > 1 else []


def _together(ctx: Context, diag: Diagnosis, patches: List[Patch]) -> Optional[Patch]:
    """One patch applying the safe main fix of each of the equally likely top sites (a model cast
    twice, in its builder and again by its caller: removing one cast leaves the error).  Every
    part keeps behaviour, so their sum does; None when a site has no safe fix or two overlap."""
    tied = _tied(diag)
    if not tied or any(s.ambiguous or s.searched for s in tied):
        return None         # copies the log may have come from, or search finds: rivals, not partners
    parts: List[Patch] = []
    for site in tied:
        mine = [p for p in patches if p.origin == (site.path, site.line)]
        if not mine or mine[0].applicability != SAFE:
            return None
        parts.append(mine[0])
    texts: Dict[str, Tuple[str, str]] = {}
    for part in parts:
        for rel, old, new in part.files:
            base = texts.get(rel, (old, old))[1]
            merged = merge_edit(old, base, new)
            if merged is None:
                return None
            texts[rel] = (old, merged)
    files = []
    for rel, (old, new) in texts.items():
        if not compiles(old, new, rel):
            return None
        files.append((rel, old, new))
    diff = "".join(_diff(ctx, rel, old, new) for rel, old, new in files)
    where = ", ".join(f"{s.path}:{s.line}" for s in tied)
    return Patch(summary=f"Fix each of the {len(tied)} equally likely sites ({where}) at once: "
                         + "; ".join(dict.fromkeys(p.summary for p in parts)),
                 applicability=SAFE, reason="", diff=diff, files=tuple(files),
                 origin=(tied[0].path, tied[0].line), covers=tuple((s.path, s.line) for s in tied))


def _to_patch(ctx: Context, option: Option, origin=None):
    files = []
    for rel, fixed in option.texts.items():
        decoded = ctx.decoded(rel)
        if decoded is None:
            return None
        new = restore(decoded.text, fixed)
        if new == decoded.text:
            continue
        if not compiles(ctx.text(rel) or "", str(fixed), rel):
            return None
        files.append((rel, decoded.text, new))
    if not files:
        return None
    diff = "".join(_diff(ctx, rel, old, new) for rel, old, new in files)
    return Patch(summary=option.summary, applicability=option.applicability, reason=option.reason,
                 diff=diff, files=tuple(files), origin=origin)


def _diff(ctx: Context, rel: str, old: str, new: str) -> str:
    if rel.lower().endswith(".ipynb"):      # a notebook: one hunk per changed cell, named by the cell
        from tracefix.notebook import cell_diff
        try:
            per_cell = cell_diff(rel, (ctx.root / rel).read_bytes(), old, new)
        except OSError:
            per_cell = None
        if per_cell:
            return per_cell
    return unified_diff(rel, old, new)


def settled(diag: Diagnosis) -> bool:
    """Does the evidence single out one fix site? (no when the top two tie on different lines,
    unless the first patch fixes every one of them at once)"""
    if not diag.fix_sites:
        return False
    tied = _tied(diag)
    if not tied:
        return True
    first = diag.patches[0] if diag.patches else None
    return first is not None and set(first.covers) >= {(s.path, s.line) for s in tied}
