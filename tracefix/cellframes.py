"""Which notebook cell a traceback frame ran in (``Cell In[7], line 12``, ``<ipython-input-7-…>``,
``/tmp/ipykernel_1/2.py``): the cell of a ``.ipynb`` under the root whose line reads the code the
traceback shows; the execution count is only a tie-breaker.  Used by tracefix.frames.
"""
from __future__ import annotations

import contextlib
import contextvars
import re
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

from tracefix.notebook import Cell, read_virtual
from tracefix.paths import is_library_path, is_notebook_path

_EXEC_COUNT_RX = re.compile(r"^(?:Cell|Input) In\s*\[\s*(\d+)\s*\]|^<ipython-input-(\d+)-")


def execution_count(frame_path: str) -> Optional[int]:
    """``In [7]`` of a cell frame's path (``Cell In[7]``, ``<ipython-input-7-…>``), or None."""
    m = _EXEC_COUNT_RX.search((frame_path or "").strip())
    if not m:
        return None
    return int(m.group(1) or m.group(2))


def _norm(code: str) -> str:
    return "".join(code.split())


_PREFERRED: "contextvars.ContextVar[Tuple[str, ...]]" = contextvars.ContextVar("tracefix_notebooks", default=())


@contextlib.contextmanager
def preferring(frames: Sequence, notebooks: Sequence[Tuple[str, Path]]):
    """While locating one traceback: prefer the notebooks that read ALL its notebook frames.

    One frame alone (``loss.backward()`` at line 6) may match cells of several notebooks under the
    root; the traceback's other cell frames tell them apart.
    """
    cell_frames = [f for f in frames if f.path and is_notebook_path(f.path) and not is_library_path(f.path)]
    score: Dict[str, int] = {}
    for f in cell_frames:
        for rel in {hit[1] for hit in _candidates(f, notebooks)}:
            score[rel] = score.get(rel, 0) + 1
    best = max(score.values(), default=0)
    token = _PREFERRED.set(tuple(sorted(r for r, n in score.items() if n == best and best)))
    try:
        yield
    finally:
        _PREFERRED.reset(token)


def _candidates(frame, notebooks: Sequence[Tuple[str, Path]]):
    """(rank, rel, path, cell) of every cell that reads the frame's code at the frame's line."""
    if not frame.code or frame.line <= 0:
        return []
    want = _norm(frame.code)
    if not want:
        return []
    count = execution_count(frame.path)
    found = []
    for rel, path in notebooks:
        v = read_virtual(path)
        if v is None:
            continue
        for cell in v.cells:
            if frame.line <= len(cell.raw) and _norm(cell.raw[frame.line - 1]) == want:
                rank = 2
                if count is not None and cell.execution_count == count:
                    rank = 0
                elif count is not None and cell.execution_count is None and cell.ordinal == count:
                    rank = 1
                found.append((rank, rel, path, cell))
    return found


def find_cell(frame, notebooks: Sequence[Tuple[str, Path]]) -> Optional[Tuple[str, Path, Cell, int, Tuple[str, ...]]]:
    """(rel, path, cell, virtual line, other candidates) for a notebook frame, or None.

    The cell must read, at the frame's line, the code the traceback shows.  Ties are broken by
    the execution count (saved count first, then the position a fresh top-to-bottom run gives),
    then by the later cell.
    """
    found = _candidates(frame, notebooks)
    if not found:
        return None
    preferred = _PREFERRED.get()
    # Without an execution count to go by, the later of two identical cells is the one that ran last
    # (a kernel's history holds every re-run of a cell).
    found.sort(key=lambda t: (bool(preferred) and t[1] not in preferred, t[0], t[1],
                              -t[3].index if t[0] == 2 else t[3].index))
    rank, rel, path, cell = found[0]
    others = tuple(dict.fromkeys(f"{r}#cell{c.index + 1}" for k, r, _, c in found[1:] if k == rank and r != rel))
    return rel, path, cell, cell.start + frame.line - 1, others
