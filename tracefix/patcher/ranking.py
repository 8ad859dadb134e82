"""Fix sites -> ranked patches (first = recommended)."""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import List, Tuple

import tracefix.patcher as _package
from tracefix.patcher.context import FIXERS, Context, Option
from tracefix.patcher.cstedit import NeedWhole
from tracefix.patcher.text import compiles, restore, unified_diff
from tracefix.records import INSUFFICIENT, Diagnosis, FixSite, Patch

# Every fix_*.py module registers its fix-site kinds with @fixer: adding one needs no edit here.
for _mod in pkgutil.iter_modules(_package.__path__):
    if _mod.name.startswith("fix_"):
        importlib.import_module(f"tracefix.patcher.{_mod.name}")


def propose(diag: Diagnosis, root: Path) -> Tuple[Patch, ...]:
    """Patches for ``diag.fix_sites``: every site's main fix in site order, then the alternatives."""
    ctx = Context(diag, Path(root))
    main: List[Tuple[bool, Patch]] = []
    alternatives: List[Patch] = []
    seen = set()
    for site in diag.fix_sites:
        fix = FIXERS.get(site.kind)
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
    return tuple([p for _, p in main] + alternatives)


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
    """Does the evidence single out one fix site? (no when the top two tie on different lines)"""
    sites = sorted(diag.fix_sites, key=lambda s: -s.score)
    if not sites:
        return False
    if len(sites) == 1:
        return True
    first, second = sites[0], sites[1]
    return not (first.score == second.score and (first.path, first.line) != (second.path, second.line))


def patchable(site: FixSite) -> bool:
    return site.kind in FIXERS
