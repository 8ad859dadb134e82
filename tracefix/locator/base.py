"""The locate run shared by every error family: frames mapped to files, the crash site, fix sites.

:class:`LocateContext` maps the traceback's frames to files under the root (:mod:`tracefix.frames`),
names the crash site, runs the family's locate module and ranks what it found.  A family's module is
``tracefix/locator/families/<locate name>.py`` (``-`` spelled ``_``) with a ``run(ctx)`` function that
calls ``ctx.add(...)`` for each fix site; the knowledge entry's ``locate`` field names it.
Reads source with :mod:`ast`; never imports torch or libcst, never writes a file.
"""
from __future__ import annotations

import importlib
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from tracefix.frames import FileIndex, MappedFrame, _read_lines, _reanchor, is_library_path, is_notebook_path, map_frame
from tracefix.locator.tracing import indent
from tracefix.pysource import Project, SourceFile
from tracefix.records import Diagnosis, FixSite, Site

TIME_BUDGET_S = 15.0        # a whole-project search stops (with a note) after this long
FIXED_SINCE = "the file seems to have been fixed since this log was written"

Strategy = Callable[["LocateContext"], None]
_FAMILIES: Dict[str, Optional[Strategy]] = {}


def family(name: str) -> Optional[Strategy]:
    """The ``run`` of ``tracefix.locator.families.<name>``; None for 'none' or an unknown name."""
    if name not in _FAMILIES:
        run = None
        if name and name != "none":
            try:
                module = importlib.import_module(f"tracefix.locator.families.{name.replace('-', '_')}")
            except ImportError:
                module = None
            run = getattr(module, "run", None)
        _FAMILIES[name] = run
    return _FAMILIES[name]


def locate(diag: Diagnosis, entry, root: Path) -> Diagnosis:
    """Return diag with crash_site, fix_sites (best first) and notes filled in.  Never raises."""
    try:
        return LocateContext(diag, entry, Path(root)).run()
    except Exception as exc:  # the locator must never take the run down
        return replace(diag, notes=tuple(diag.notes) + (
            f"Could not finish locating the fix site ({type(exc).__name__}: {exc}).",))


class LocateContext:
    """One diagnosis being located: the project, the mapped frames, the notes and fix sites found."""

    def __init__(self, diag: Diagnosis, entry, root: Path):
        self.diag = diag
        self.entry = entry
        self.strategy = getattr(entry, "locate", "none") if entry is not None else "none"
        self.root = root
        self.index = FileIndex(root)
        self.project = Project(self.index)
        self.notes: List[str] = []
        self.sites: List[FixSite] = []
        self.mapped: List[MappedFrame] = []          # user frames that map, innermost first
        self.anomaly_mapped: List[MappedFrame] = []
        self.library_search = False
        self.deadline = time.monotonic() + TIME_BUDGET_S
        self.out_of_time = False

    def run(self) -> Diagnosis:
        if not self.index.resolved_root.is_dir():
            self.notes.append(f"The project root {self.root} is not a folder; no source was searched.")
            return replace(self.diag, notes=tuple(self.diag.notes) + tuple(self.notes))
        if self.index.truncated:
            self.notes.append(f"The project has more than {len(self.index.files)} files; only the first "
                              f"{len(self.index.files)} were indexed.")
        tb = self.diag.traceback
        self.mapped = self._map_frames(tb.frames, report=True)
        self.anomaly_mapped = self._map_frames(tb.anomaly_frames, report=False)
        crash_site = None
        if self.mapped:
            m = self.mapped[0]
            sf = self.project.source(m.rel_path)
            code = (sf.line_text(m.line) if sf else self._raw_line(m)).strip()
            crash_site = Site(path=m.rel_path, line=m.line, code=code, local_path=str(m.local_path),
                              col=indent(sf.line_text(m.line)) if sf else 0)
        strategy = family(self.strategy)
        if strategy is not None:
            strategy(self)
            # The crash file's name matched several files equally well: analyse each, so that the
            # competing fix sites tie and nothing is applied on a guess.
            if self.mapped and self.mapped[0].ambiguous:
                saved = self.mapped
                for alt in self._alternatives(saved[0]):
                    self.mapped = [alt] + saved[1:]
                    strategy(self)
                self.mapped = saved
        for rel, err in sorted(self.project.errors.items()):
            self.notes.append(f"{rel} {err}; it was skipped.")
        sites = rank(self.sites)
        notes = tuple(dict.fromkeys(list(self.diag.notes) + self.notes))
        return replace(self.diag, crash_site=crash_site, fix_sites=tuple(sites), notes=notes)

    def _alternatives(self, m: MappedFrame) -> List[MappedFrame]:
        out = []
        for rel in m.ambiguous:
            local = self.index.inside(self.index.abs_path(rel))
            if local is None:
                continue
            line, changed = m.frame.line, False
            if m.frame.code:
                lines = _read_lines(local)
                if lines is not None:
                    line, changed = _reanchor(lines, m.frame.line, m.frame.code)
            out.append(MappedFrame(frame=m.frame, local_path=local, rel_path=rel, line=line,
                                   shift=line - m.frame.line, changed=changed,
                                   ambiguous=tuple(r for r in (m.rel_path,) + m.ambiguous if r != rel)))
        return out

    def _raw_line(self, m: MappedFrame) -> str:
        try:
            with open(m.local_path, "rb") as f:
                for i, raw in enumerate(f, 1):
                    if i == m.line:
                        return raw.decode("utf-8", "replace")
        except OSError:
            pass
        return ""

    def _map_frames(self, frames: Sequence, report: bool) -> List[MappedFrame]:
        out: List[MappedFrame] = []
        for fr in reversed(tuple(frames)):
            path = fr.path or ""
            if is_library_path(path):
                continue
            if is_notebook_path(path):
                if report:
                    self.notes.append(f"The frame {path} is notebook or interactive code; it cannot be "
                                      f"mapped to a file under the root.")
                continue
            m = map_frame(fr, self.root, self.index)
            if m is None:
                if report and path and not (path.startswith("<") and path.endswith(">")):
                    self.notes.append(f"{path} (from the log) was not found under {self.root}.")
                continue
            if report:
                if m.ambiguous:
                    self.notes.append(f"{path} matches several files ({', '.join((m.rel_path,) + m.ambiguous)}); "
                                      f"{m.rel_path} was used.")
                if m.changed:
                    self.notes.append(f"{m.rel_path} changed since the log was written: line {fr.line} no "
                                      f"longer reads {fr.code!r}.")
                elif m.shift:
                    self.notes.append(f"{m.rel_path} changed since the log was written: the logged line "
                                      f"{fr.line} is now line {m.line}.")
            out.append(m)
        return out

    def add(self, sf: SourceFile, line: int, col: int, kind: str, reason: str, score: float) -> None:
        """Record a fix site; col is an ast (UTF-8 byte) offset and is turned into characters."""
        text = sf.line_text(line)
        try:
            col = len(text.encode("utf-8")[:max(col, 0)].decode("utf-8", "ignore"))
        except Exception:
            col = max(col, 0)
        self.sites.append(FixSite(path=sf.rel, line=line, code=text.strip(),
                                  local_path=str(sf.path), col=col, reason=reason, kind=kind,
                                  score=round(score, 3)))

    def crash_closure(self) -> List[str]:
        if not self.mapped:
            return []
        files: List[str] = []
        for m in self.mapped:
            for rel in self.project.closure(m.rel_path):
                if rel not in files:
                    files.append(rel)
        return files

    def search_files(self, needles: Tuple[str, ...] = ()) -> List[str]:
        """The crash file's import closure, or every project file when no user frame maps."""
        files = self.crash_closure()
        if not files:
            self.library_note()
            return self.project.py_files(needles)
        return files

    def over_budget(self) -> bool:
        if not self.out_of_time and time.monotonic() > self.deadline:
            self.out_of_time = True
            self.notes.append("The project is large; the search for fix sites stopped early and may be incomplete.")
        return self.out_of_time

    def library_note(self) -> None:
        if not self.library_search:
            self.library_search = True
            self.notes.append("The crash happened inside a library; all project files were searched.")


def rank(sites: Iterable[FixSite]) -> List[FixSite]:
    best: Dict[Tuple[str, int, str], FixSite] = {}
    order: Dict[Tuple[str, int, str], int] = {}
    for i, s in enumerate(sites):
        key = (s.path, s.line, s.kind)
        if key not in best:
            best[key] = s
            order[key] = i
        elif s.score > best[key].score:
            best[key] = s
    return sorted(best.values(), key=lambda s: (-s.score, order[(s.path, s.line, s.kind)]))
