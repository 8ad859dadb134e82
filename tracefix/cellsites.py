"""A diagnosis's notebook sites named by their cell (``nb.ipynb, cell 3, line 2``) instead of a line
of the notebook's virtual module (tracefix.notebook), in its sites, reasons, notes and evidence;
and whether a notebook traceback still matches the notebooks under the root.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Optional

from tracefix.frames import get_index, map_frame
from tracefix.notebook import Virtual, read_virtual
from tracefix.paths import is_library_path, is_notebook, is_notebook_path
from tracefix.record import replace
from tracefix.records import Frame


def annotate_site(site, root: Path):
    """site with cell, execution_count and cell_line set when it lies in a notebook."""
    if site is None or not is_notebook(site.path):
        return site
    path = Path(site.local_path) if site.local_path else Path(root) / site.path
    v = read_virtual(path)
    hit = v.at(site.line) if v is not None else None
    if hit is None:
        return site
    cell, line = hit
    return replace(site, cell=cell.index + 1, cell_line=line, execution_count=cell.execution_count,
                   code=cell.raw[line - 1].strip() if line <= len(cell.raw) else site.code)


_LINE_RX = re.compile(r"\bline (\d+)\b")


def _cell_words(text: str, v: Virtual, rel: str, own: Optional[int]) -> str:
    """'line 11' of the virtual module -> 'line 5' (same cell) or 'cell 2, line 5'."""
    def sub(m: "re.Match[str]") -> str:
        hit = v.at(int(m.group(1)))
        if hit is None:
            return m.group(0)
        cell, line = hit
        return f"line {line}" if own == cell.index + 1 else f"cell {cell.index + 1}, line {line}"
    text = _LINE_RX.sub(sub, text)
    return re.sub(re.escape(rel) + r":(\d+)\b",
                  lambda m: f"{rel}, {_cell_words('line ' + m.group(1), v, rel, None)}", text)


def annotate(diag, root: Path):
    """A diagnosis whose notebook sites name their cell (a post-pass after locating)."""
    fix_sites = []
    for s in diag.fix_sites:
        s = annotate_site(s, root)
        v = read_virtual(Path(s.local_path)) if s.cell is not None and s.local_path else None
        if v is not None:
            s = replace(s, reason=_cell_words(s.reason, v, s.path, s.cell))
        fix_sites.append(s)
    diag = replace(diag, crash_site=annotate_site(diag.crash_site, root), fix_sites=tuple(fix_sites))
    return annotate_evidence(annotate_notes(diag), root)


def annotate_evidence(diag, root: Path):
    """The witness's words name the cells its notebook sites map to, as the sites do:
    ``add_ at 3330693015.py:9`` (the kernel's file of a cell) -> ``add_ at nb.ipynb, cell 3, line 9``."""
    ev = diag.traceback.evidence
    places = _evidence_places(ev, root) if ev is not None else {}
    if not places:
        return diag

    def words(text: str) -> str:
        for rx, place in places.items():
            text = rx.sub(place, text)
        return text
    ev = replace(ev, summary=words(ev.summary))
    return replace(diag, traceback=replace(diag.traceback, evidence=ev), notes=tuple(words(n) for n in diag.notes),
                   fix_sites=tuple(replace(s, reason=words(s.reason)) for s in diag.fix_sites))


def _evidence_places(ev, root: Path) -> Dict["re.Pattern[str]", str]:
    """``name:line`` as the witness writes a notebook site (its file's base name) -> the cell's place."""
    out: Dict["re.Pattern[str]", str] = {}
    for es in ev.sites:
        if not (es.path and es.code and is_notebook_path(es.path)):
            continue
        m = map_frame(Frame(path=es.path, line=es.line, func="", code=es.code), root, get_index(root))
        v = read_virtual(m.local_path) if m is not None and is_notebook(m.rel_path) else None
        hit = v.at(m.line) if v is not None else None
        if hit is None:
            continue
        base = re.split(r"[\\/]", es.path.strip())[-1]
        rx = re.compile(r"(?<![\w.-])" + re.escape(f"{base}:{es.line}") + r"(?!\d)")
        out[rx] = f"{m.rel_path}, cell {hit[0].index + 1}, line {hit[1]}"
    return out


def annotate_notes(diag):
    """Notes naming ``nb.ipynb:N`` (a virtual line) name the cell instead; safe to repeat."""
    notes = list(diag.notes)
    for s in [diag.crash_site] + list(diag.fix_sites):
        if s is not None and is_notebook(s.path) and s.local_path:
            v = read_virtual(Path(s.local_path))
            if v is not None:
                notes = [re.sub(re.escape(s.path) + r":(\d+)\b",
                                lambda m: f"{s.path}, {_cell_words('line ' + m.group(1), v, s.path, None)}", n)
                         for n in notes]
    return replace(diag, notes=tuple(notes))


def label(site) -> str:
    """``nb.ipynb, cell 3 (In [7]), line 2`` for a notebook site, ``path:line`` otherwise."""
    if getattr(site, "cell", None) is None:
        return f"{site.path}:{site.line}"
    count = f" (In [{site.execution_count}])" if site.execution_count is not None else ""
    return f"{site.path}, cell {site.cell}{count}, line {site.cell_line}"


def stale(diag, root: Path) -> Optional[str]:
    """Why a notebook traceback no longer matches the notebooks under root, or None."""
    frames = [f for f in diag.traceback.frames if f.path and not is_library_path(f.path)
              and is_notebook_path(f.path) and f.code]
    if not frames:
        return None
    index = get_index(root, fresh=True)
    for f in frames:
        if map_frame(f, root, index) is None:
            return (f"no notebook cell under {root} reads {f.code!r} at line {f.line} as the traceback's "
                    f"{f.path} showed (edited since the log was written?); nothing written")
    return None
