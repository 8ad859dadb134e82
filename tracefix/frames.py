"""Map stack frames printed in a log to files under the project root.

A log is often written on another machine, in a container or on Windows, so a frame's path is
matched against the project by its longest path suffix (``/workspace/proj/models/net.py`` finds
``<root>/models/net.py``).  Library frames (site-packages, the standard library, torch itself,
debugger helpers) are recognised by :func:`tracefix.paths.is_library_path`.  Notebook frames
(``Cell In[7], line 12``, ``<ipython-input-7-…>``, ``/tmp/ipykernel_1/2.py``) map to a cell of a
``.ipynb`` under the root (:mod:`tracefix.cellframes`); the line is then a line of that notebook
read as one module (:mod:`tracefix.notebook`).

Standard library only; never imports torch.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .paths import is_library_path, is_notebook_path, split_log_path
from .record import record, replace
from .records import Frame

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", "env", ".env", "site-packages", "dist-packages",
    "node_modules", "__pycache__", ".tracefix", ".tox", ".nox", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".ipynb_checkpoints", ".eggs",
    "build", "dist", "vendor", "_vendor", "third_party", "wandb", ".cache",   # build output, vendored copies
})
MAX_FILES = 50_000
# A symlinked folder leaving the root (`pkg -> ../common/pkg`) is searched for sources only, and
# only so far: such a link may also lead to a dataset of a million files.
LINKED_ENTRIES, LINKED_DEPTH = 20_000, 8
REANCHOR_WINDOW = 20


def _norm_code(text: str) -> str:
    return "".join(text.split())


@record(frozen=True)
class MappedFrame:
    frame: Frame
    local_path: Path                    # absolute, resolved inside root (or a symlink of root leaving it)
    rel_path: str                       # relative to root, "/"-separated
    line: int                           # local line (re-anchored when the file moved the code)
    shift: int = 0                      # line - frame.line
    changed: bool = False               # the logged code line was not found near the logged line
    ambiguous: Tuple[str, ...] = ()     # other equally good candidates (rel paths)
    depth: int = 0                      # trailing path components the logged path shares with it
    whole: bool = False                 # every component of the local path matched


def _project_dir(parent: str, name: str) -> bool:
    """Is this folder searched for sources (not a cache, a build, a virtual environment)?"""
    return (name not in SKIP_DIRS and not name.endswith(".egg-info")
            and not os.path.exists(os.path.join(parent, name, "pyvenv.cfg")))


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class FileIndex:
    """Files under a root, indexed by base name; built once per run."""

    def __init__(self, root: Path, max_files: int = MAX_FILES):
        self.root = Path(root)
        try:
            self.resolved_root = self.root.resolve()
        except (OSError, RuntimeError):
            self.resolved_root = self.root.absolute()
        self.by_name: Dict[str, List[Tuple[str, ...]]] = {}
        self.by_lower_name: Dict[str, List[Tuple[str, ...]]] = {}
        self.files: List[Tuple[str, ...]] = []
        self.truncated = False
        self._build(max_files)
        self.rel_set = frozenset("/".join(parts) for parts in self.files)

    def _build(self, max_files: int) -> None:
        root = str(self.resolved_root)
        linked: List[Tuple[str, ...]] = []
        try:
            walker = os.walk(root, topdown=True, followlinks=False)
            for dirpath, dirnames, filenames in walker:
                dirnames[:] = sorted(d for d in dirnames if _project_dir(dirpath, d))
                rel_dir = os.path.relpath(dirpath, root)
                base = () if rel_dir == "." else tuple(rel_dir.split(os.sep))
                linked += [base + (d,) for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
                for name in sorted(filenames):
                    if not self._add(base + (name,), max_files):
                        return
        except OSError:
            return
        for parts in linked:
            if not self._add_linked(parts, max_files):
                return

    def _add(self, parts: Tuple[str, ...], max_files: int) -> bool:
        """Index one file; False once the index is full."""
        self.files.append(parts)
        self.by_name.setdefault(parts[-1], []).append(parts)
        self.by_lower_name.setdefault(parts[-1].lower(), []).append(parts)
        if len(self.files) >= max_files:
            self.truncated = True
            return False
        return True

    def _add_linked(self, parts: Tuple[str, ...], max_files: int) -> bool:
        """The sources under a symlinked folder that leaves the root, indexed through the link (read
        for the diagnosis; writing through it is refused).  One inside the root is indexed where it
        really is already."""
        top = os.path.join(str(self.resolved_root), *parts)
        real_top = os.path.realpath(top)
        if _within(real_top, str(self.resolved_root)):
            return True
        seen, entries = set(), 0
        for dirpath, dirnames, filenames in os.walk(top, topdown=True, followlinks=True):
            real = os.path.realpath(dirpath)
            rel = os.path.relpath(dirpath, top)
            sub = () if rel == "." else tuple(rel.split(os.sep))
            entries += len(dirnames) + len(filenames)
            if real in seen or _within(real, str(self.resolved_root)) or len(sub) >= LINKED_DEPTH \
                    or entries > LINKED_ENTRIES:
                dirnames[:] = []
                continue
            seen.add(real)
            dirnames[:] = sorted(d for d in dirnames if _project_dir(dirpath, d))
            for name in sorted(filenames):
                if name.endswith((".py", ".ipynb")) and not self._add(parts + sub + (name,), max_files):
                    return False
        return True

    def py_files(self) -> List[str]:
        """Python sources: .py files and Jupyter notebooks (read as modules, tracefix.notebook)."""
        return ["/".join(p) for p in self.files if p[-1].endswith((".py", ".ipynb"))]

    def notebooks(self) -> List[Tuple[str, Path]]:
        """(rel, absolute path) of the .ipynb files under the root, at most MAX_NOTEBOOKS."""
        from .notebook import MAX_NOTEBOOKS
        out = []
        for p in self.files:
            if p[-1].lower().endswith(".ipynb"):
                local = self.inside(self.abs_path("/".join(p)))
                if local is not None:
                    out.append(("/".join(p), local))
                    if len(out) >= MAX_NOTEBOOKS:
                        break
        return out

    def abs_path(self, rel: str) -> Path:
        return self.resolved_root.joinpath(*rel.split("/"))

    def inside(self, path: Path) -> Optional[Path]:
        """The path to read for ``path`` when it is a regular file of the project, else None.

        That is the resolved path when it lies inside the root; for an indexed file that is a
        symlink leaving the root, the link itself (under the resolved root): the user put it in the
        project, so it is read for the diagnosis, while writing through it is refused
        (:func:`tracefix.patcher.writing.safe_path`)."""
        try:
            real = path.resolve()
        except (OSError, RuntimeError):
            return None
        try:
            real.relative_to(self.resolved_root)
        except ValueError:
            real = self._link_out(path)
            if real is None:
                return None
        try:
            if not real.is_file():
                return None
        except OSError:
            return None
        return real

    def _link_out(self, path: Path) -> Optional[Path]:
        """``path`` as the indexed file it names under the root (its folders real, walked), or None."""
        lexical = Path(os.path.abspath(path))
        for base in (self.resolved_root, self.root.absolute()):
            try:
                rel = lexical.relative_to(base).as_posix()
            except ValueError:
                continue
            if rel in self.rel_set:
                return self.abs_path(rel)
        return None

    def candidates(self, parts: Tuple[str, ...]) -> List[Tuple[int, bool, Tuple[str, ...]]]:
        """(matching trailing components, whole local path matched, local parts), best first."""
        if not parts:
            return []
        pool = self.by_name.get(parts[-1])
        fold = False
        if not pool:
            pool = self.by_lower_name.get(parts[-1].lower(), [])
            fold = True
        out = []
        for cand in pool:
            depth = 0
            for a, b in zip(reversed(parts), reversed(cand)):
                if a == b or (fold and a.lower() == b.lower()):
                    depth += 1
                else:
                    break
            out.append((depth, depth == len(cand), cand))
        out.sort(key=lambda t: (-t[0], not t[1], t[2]))
        return out


_INDEX_CACHE: Dict[str, FileIndex] = {}


def get_index(root: Path, fresh: bool = False) -> FileIndex:
    """A cached :class:`FileIndex` for root (``fresh=True`` rebuilds it)."""
    key = str(Path(root).absolute())
    if fresh or key not in _INDEX_CACHE:
        if len(_INDEX_CACHE) > 16:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[key] = FileIndex(Path(root))
    return _INDEX_CACHE[key]


def _read_lines(path: Path) -> Optional[List[str]]:
    from .pysource import read_text  # local import keeps frames.py light
    text, _ = read_text(path)
    return None if text is None else text.split("\n")


def _reanchor(lines: List[str], line: int, code: Optional[str]) -> Tuple[int, bool]:
    """(local line, changed) for a logged (line, code)."""
    if not code or line <= 0:
        return line, False
    want = _norm_code(code)
    if not want:
        return line, False
    if 1 <= line <= len(lines) and _norm_code(lines[line - 1]) == want:
        return line, False
    # nearest match first, then the one above before the one below
    for delta in range(1, REANCHOR_WINDOW + 1):
        for cand in (line - delta, line + delta):
            if 1 <= cand <= len(lines) and _norm_code(lines[cand - 1]) == want:
                return cand, False
    # the log may echo only the first line of a longer statement or a truncated one
    for delta in range(0, REANCHOR_WINDOW + 1):
        for cand in (line - delta, line + delta) if delta else (line,):
            if 1 <= cand <= len(lines):
                local = _norm_code(lines[cand - 1])
                if len(want) >= 8 and local and (local.startswith(want) or want.startswith(local) and len(local) >= 8):
                    return cand, False
    return line, True


_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)")


def _in_function(lines: List[str], line: int, func: str) -> bool:
    """Does ``line`` sit in a def named ``func`` (``<module>``: in none)?  Other ``<...>`` names pass."""
    if not func or (func.startswith("<") and func != "<module>"):
        return True
    text = lines[line - 1]
    depth = len(text) - len(text.lstrip())
    for i in range(line - 2, -1, -1):
        above = lines[i]
        stripped = above.strip()
        if not stripped or stripped.startswith("#"):
            continue
        ind = len(above) - len(above.lstrip())
        if ind >= depth:
            continue
        m = _DEF.match(above)
        if m:
            return m.group(2) == func
        depth = ind
        if ind == 0:
            break
    return func == "<module>"


def map_frame(frame: Frame, root: Path, index: Optional[FileIndex] = None) -> Optional[MappedFrame]:
    """The file under root that a logged frame refers to, or None.

    Never returns a file outside root.  A file found by path suffix counts only when its line reads
    what the traceback shows (whitespace-insensitive) inside the function the frame names; a frame
    without a code line maps only when one file fits best.  The path as printed, absolute and
    inside root, is that very file: the logged code is re-anchored within a few lines when the
    file was edited since, and it maps even when that code is gone (``changed``).  When several
    files fit equally well the first (sorted) is returned with the others in ``ambiguous``.
    """
    cands = frame_candidates(frame, root, index)
    if not cands:
        return None
    best = cands[0]
    ties = tuple(c.rel_path for c in cands[1:] if (c.depth, c.whole) == (best.depth, best.whole))
    if ties and not frame.code:
        return None                   # nothing in the log tells these files apart
    return replace(best, ambiguous=ties) if ties else best


def frame_candidates(frame: Frame, root: Path, index: Optional[FileIndex] = None) -> List[MappedFrame]:
    """Every file under root the logged frame may be, best first (see :func:`map_frame`)."""
    try:
        return _candidates(frame, Path(root), index)
    except (OSError, ValueError, RuntimeError):  # never let a weird path take the run down
        return []


def same_named(frame: Frame, root: Path, index: Optional[FileIndex] = None) -> List[str]:
    """Files under root whose path ends like the frame's (by suffix only, the code not compared):
    what a frame that maps to none of them may still have meant (for an honest note)."""
    path = (frame.path or "").strip()
    if not path or is_notebook_path(path) or path.startswith("<") or is_library_path(path):
        return []
    try:
        index = index or get_index(root)
        return ["/".join(cand) for depth, _whole, cand in index.candidates(split_log_path(path)) if depth > 0][:3]
    except (OSError, ValueError, RuntimeError):
        return []


def mismatch(frame: Frame, rel: str, index: FileIndex) -> str:
    """Why the indexed file ``rel``, found by suffix (:func:`same_named`), is not the logged frame's
    file, read from it: what its line reads instead, where that line sits, or that it cannot be read."""
    local = index.inside(index.abs_path(rel))
    if local is None:
        return f"{rel} cannot be read (a broken symlink, or not a regular file)"
    from .pysource import read_text
    text, why = read_text(local)
    if text is None:
        return f"{rel}: {why}"
    lines = text.split("\n")
    edited = "(edited since the log was written, or another project?)"
    if not 1 <= frame.line <= len(lines):
        return f"{rel} has no line {frame.line} {edited}"
    want, got = (frame.code or "").strip(), lines[frame.line - 1].strip()
    if _norm_code(got) != _norm_code(want):
        return f"{rel}:{frame.line} reads {got!r}, not {want!r} as the log shows {edited}"
    if not _in_function(lines, frame.line, frame.func):
        where = "at the top level" if frame.func == "<module>" else f"in {frame.func}()"
        return f"{rel}:{frame.line} reads {want!r}, but not {where} as the log shows"
    return ""


def _candidates(frame: Frame, root: Path, index: Optional[FileIndex]) -> List[MappedFrame]:
    path = (frame.path or "").strip()
    if not path:
        return []
    if is_notebook_path(path):
        m = _map_notebook_frame(frame, index or get_index(root))
        return [m] if m is not None else []
    if path.startswith("<") and path.endswith(">"):
        return []
    if is_library_path(path):
        return []
    index = index or get_index(root)
    windows = "\\" in path or bool(re.match(r"^[A-Za-z]:", path))
    # 1. the absolute path as printed, inside root: the log was written on this machine, from this file
    if not windows and "\x00" not in path and os.path.isabs(path):
        local = index.inside(Path(path))
        if local is not None:
            return [_mapped(frame, local, index, depth=len(split_log_path(path)), whole=True, same_file=True)]
    # 2. by path suffix (another machine, a container, a relative path): the code must agree
    parts = split_log_path(path)
    out: List[MappedFrame] = []
    for depth, whole, cand in index.candidates(parts):
        if depth <= 0:
            continue
        local = index.inside(index.abs_path("/".join(cand)))
        if local is None:
            continue                  # a symlink out of root, or gone
        m = _mapped(frame, local, index, depth=depth, whole=whole, same_file=False)
        if m is not None:
            out.append(m)
    return out


def _mapped(frame: Frame, local: Path, index: FileIndex, depth: int, whole: bool,
            same_file: bool) -> Optional[MappedFrame]:
    rel = local.relative_to(index.resolved_root).as_posix()
    line, shift, changed = frame.line, 0, False
    if frame.code:
        lines = _read_lines(local)
        if lines is None:
            return None if not same_file else MappedFrame(frame, local, rel, line, depth=depth, whole=whole)
        if not same_file:
            # Another machine's file: only its very line counts (a nearby `loss.backward()` in some
            # other train.py is no evidence), inside the function the frame names.
            if not (1 <= frame.line <= len(lines) and _norm_code(lines[frame.line - 1]) == _norm_code(frame.code)
                    and _in_function(lines, frame.line, frame.func)):
                return None
        else:
            line, changed = _reanchor(lines, frame.line, frame.code)
            shift = line - frame.line
    return MappedFrame(frame=frame, local_path=local, rel_path=rel, line=line, shift=shift,
                       changed=changed, depth=depth, whole=whole)


def _map_notebook_frame(frame: Frame, index: FileIndex) -> Optional[MappedFrame]:
    """A notebook frame -> the .ipynb under root whose cell reads the code the traceback shows.

    ``line`` is then the line of the notebook's virtual module (:mod:`tracefix.notebook`).
    """
    from .cellframes import find_cell
    found = find_cell(frame, index.notebooks())
    if found is None:
        return None
    rel, local, _cell, vline, _others = found
    # ties were broken by the execution count; no "ambiguous": its re-anchoring is for .py lines
    return MappedFrame(frame=frame, local_path=local, rel_path=rel, line=vline, depth=1, whole=True)
