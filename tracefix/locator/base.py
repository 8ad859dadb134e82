"""The locate run shared by every error family: frames mapped to files, the crash site, fix sites.

:class:`LocateContext` maps the traceback's frames to files under the root (:mod:`tracefix.frames`),
names the crash site, runs the family's locate function and ranks what it found.  The knowledge
entry's ``locate`` field names that function in its family's ``locate.py`` (:mod:`tracefix.families`);
it calls ``ctx.add(...)`` for each fix site.
Reads source with :mod:`ast`; never imports torch or libcst, never writes a file.
"""
from __future__ import annotations

import time
import ast
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from tracefix.families import of_locate, part
from tracefix.frames import FileIndex, MappedFrame, _read_lines, _reanchor, frame_candidates, mismatch, same_named
from tracefix.locator.evidence import apply_evidence
from tracefix.locator.tracing import indent
from tracefix.paths import is_library_path, is_notebook_path
from tracefix.pysource import Project, SourceFile
from tracefix.record import replace
from tracefix.records import Diagnosis, FixSite, Site
from tracefix.vocab import LOSS_FN_NAMES

TIME_BUDGET_S = 15.0        # a whole-project search stops (with a note) after this long
FIXED_SINCE = "the file seems to have been fixed since this log was written"

Strategy = Callable[["LocateContext"], None]
_STRATEGIES: Dict[str, Optional[Strategy]] = {}


def family(name: str) -> Optional[Strategy]:
    """The function in its family's ``locate.py`` that an entry's ``locate`` name points at (see
    :mod:`tracefix.families`); None for 'none' or an unknown name."""
    if name not in _STRATEGIES:
        fam = of_locate(name) if name and name != "none" else None
        module = part(fam, "locate") if fam is not None else None
        _STRATEGIES[name] = getattr(module, fam.locate[name], None) if module is not None else None
    return _STRATEGIES[name]


def _rival_sites(name: str) -> bool:
    fam = of_locate(name)
    return fam.rival_sites if fam is not None else True


def locate(diag: Diagnosis, entry, root: Path, search: Optional[bool] = None) -> Diagnosis:
    """Return diag with crash_site, fix_sites (best first) and notes filled in.  Never raises.

    ``search``: may the project be searched when no frame of the log maps (None: when root is a
    project, :func:`is_project`)."""
    try:
        return LocateContext(diag, entry, Path(root), search).run()
    except Exception as exc:  # the locator must never take the run down
        return replace(diag, notes=tuple(diag.notes) + (
            f"Could not finish locating the fix site ({type(exc).__name__}: {exc}).",))


class LocateContext:
    """One diagnosis being located: the project, the mapped frames, the notes and fix sites found."""

    _search_note: Optional[str] = None   # the note a search without mapped frames added

    def __init__(self, diag: Diagnosis, entry, root: Path, search: Optional[bool] = None):
        self.diag = diag
        self.entry = entry
        self.strategy = getattr(entry, "locate", "none") if entry is not None else "none"
        self.root = root
        # Searching beyond the traceback's own files: only in a project (or a --root named by the user).
        self.search_allowed = is_project(root) if search is None else search
        self._index: Optional[FileIndex] = None
        self._project: Optional[Project] = None
        self.notes: List[str] = []
        self.sites: List[FixSite] = []
        self.mapped: List[MappedFrame] = []          # user frames that map, innermost first
        self.anomaly_mapped: List[MappedFrame] = []
        self.foreign = False                         # the log's own frames are not under root
        self.searched = False                        # fix sites come from a search of the project
        self.deadline = time.monotonic() + TIME_BUDGET_S
        self.out_of_time = False

    @property
    def index(self) -> FileIndex:
        """Built on first use: a bare message outside a project never walks the folder."""
        if self._index is None:
            self._index = FileIndex(self.root)
            if self._index.truncated:
                self.notes.append(f"The project has more than {len(self._index.files)} files; only the first "
                                  f"{len(self._index.files)} were indexed.")
        return self._index

    @property
    def project(self) -> Project:
        if self._project is None:
            self._project = Project(self.index)
        return self._project

    def statement(self, i: int = 0) -> Optional[Tuple[MappedFrame, SourceFile, ast.stmt]]:
        """(frame, its file, its statement) of the i-th mapped frame (0: the crash site); None when
        there is no such frame or its file does not parse."""
        if i >= len(self.mapped):
            return None
        m = self.mapped[i]
        sf = self.project.source(m.rel_path)
        stmt = sf.stmt_at(m.line) if sf is not None and sf.tree is not None else None
        return (m, sf, stmt) if stmt is not None else None

    def run(self) -> Diagnosis:
        if not Path(self.root).is_dir():
            self.notes.append(f"The project root {self.root} is not a folder; no source was searched.")
            return replace(self.diag, notes=tuple(self.diag.notes) + tuple(self.notes))
        tb = self.diag.traceback
        self.mapped = self._map_frames(tb.frames, report=True)
        self.anomaly_mapped = self._map_frames(tb.anomaly_frames, report=False) if self.mapped else []
        crash_site = None
        if self.mapped:
            m = self.mapped[0]
            sf = self.project.source(m.rel_path)
            code = (sf.line_text(m.line) if sf else self._raw_line(m)).strip()
            crash_site = Site(path=m.rel_path, line=m.line, code=code, local_path=str(m.local_path),
                              col=indent(sf.line_text(m.line)) if sf else 0)
        strategy = family(self.strategy)
        if strategy is not None and not self.foreign:
            strategy(self)
            # The crash file's name matched several files equally well: analyse each, so that the
            # competing fix sites tie and nothing is applied on a guess.
            if self.mapped and self.mapped[0].ambiguous:
                saved = self.mapped
                for alt in self._alternatives(saved[0]):
                    self.mapped = [alt] + saved[1:]
                    strategy(self)
                self.mapped = saved
                # rivals, not partners: no patch may fix "all of them" at once
                self.sites = [replace(s, ambiguous=True) for s in self.sites]
            apply_evidence(self)
        if self._project is not None:
            for rel, err in sorted(self._project.errors.items()):
                self.notes.append(f"{rel} {err}; it was skipped.")
        sites = rank(self.sites)
        said = self._search_note
        if said is not None and not sites and said in self.notes:
            # the note promised candidates; say that the search found none
            self.notes[self.notes.index(said)] = said.split(";")[0] + "; the project was searched, and no fix site was found."
        notes = tuple(dict.fromkeys(list(self.diag.notes) + self.notes))
        return replace(self.diag, crash_site=crash_site, fix_sites=tuple(sites), notes=notes,
                       rival_sites=_rival_sites(self.strategy))

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
        """User frames that map to files under root, innermost first (see :func:`frame_candidates`).

        Where a frame fits several files, the one in the folder that also holds the other frames'
        files wins; a frame without a code line that still fits several maps to none."""
        user = []
        for fr in reversed(tuple(frames)):
            path = fr.path or ""
            if is_library_path(path) or not path:
                continue
            if not is_notebook_path(path) and path.startswith("<") and path.endswith(">"):
                continue            # <string>, <frozen ...>: no file anywhere
            user.append(fr)
        cands = [frame_candidates(fr, self.root, self.index) for fr in user]
        out: List[MappedFrame] = []
        missing: List[str] = []
        for i, (fr, cs) in enumerate(zip(user, cands)):
            if not cs:
                if is_notebook_path(fr.path):
                    if report:
                        self.notes.append(f"The frame {fr.path} is notebook or interactive code; no notebook cell "
                                          f"under the root reads its line {fr.code!r}.")
                else:
                    missing.append(fr.path)
                continue
            others = [c for j, c in enumerate(cands) if j != i and c]
            # each candidate's rank once: suffix depth, whole path, agreement with the other frames
            tiers = {id(c): (c.depth, c.whole, _agreement(c, others)) for c in cs}
            keyed = sorted(cs, key=lambda c: (-tiers[id(c)][0], not tiers[id(c)][1], -tiers[id(c)][2]))
            best = keyed[0]
            ties = tuple(c.rel_path for c in keyed[1:] if tiers[id(c)] == tiers[id(best)])
            if ties and not fr.code:
                if report:
                    self.notes.append(f"{fr.path} (from the log) matches several files "
                                      f"({', '.join((best.rel_path,) + ties)}) and the log shows no code to tell "
                                      f"them apart; none was used.")
                continue
            m = replace(best, ambiguous=ties) if ties else best
            if report:
                if m.ambiguous:
                    self.notes.append(f"{fr.path} matches several files ({', '.join((m.rel_path,) + m.ambiguous)}); "
                                      f"each was analysed, so their fix sites are equally likely (--apply "
                                      f"writes one only with --pick N; pass the right folder as --root to choose).")
                if m.changed:
                    self.notes.append(f"{m.rel_path} changed since the log was written: line {fr.line} no "
                                      f"longer reads {fr.code!r}.")
                elif m.shift:
                    self.notes.append(f"{m.rel_path} changed since the log was written: the logged line "
                                      f"{fr.line} is now line {m.line}.")
            out.append(m)
        if report:
            if user and (not out or out[0].frame is not user[0]):
                # The innermost frame of user code is where the reasoning starts: matching only some
                # outer line (`main()`) proves nothing, so nothing is proposed.
                self.foreign = True
                out = []
                shown = ", ".join(f"{_base(fr.path)}:{fr.line}" for fr in user[:3])
                alike = same_named(user[0], self.root, self.index)
                # each file's own reason, read from it: a claim about its line must be true
                why = [r for r in (mismatch(user[0], rel, self.index) for rel in alike) if r] if user[0].code else []
                if why:
                    self.notes.append(
                        f"The log does not come from the files under {self.root} as they are now: "
                        f"{' and '.join(alike)} there may be the log's {_base(user[0].path)}, but "
                        f"{'; '.join(dict.fromkeys(why))}; nothing is proposed.")
                else:
                    self.notes.append(f"The log does not come from the files under {self.root}: no file there "
                                      f"reads what its innermost frames show ({shown}); nothing is proposed.")
            else:
                for path in missing:
                    self.notes.append(f"{path} (from the log) was not found under {self.root}.")
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
                                  score=round(score, 3), searched=self.searched))

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
        """The crash file's import closure, or (see :meth:`project_files`) the project's files."""
        return self.crash_closure() or self.project_files(needles)

    def project_files(self, needles: Tuple[str, ...] = ()) -> List[str]:
        """Every project file holding one of ``needles``, for a search beyond the traceback's files.

        With mapped frames: the files under the folder that holds them all.  None when the log's own frames are not under root.  Without a mapped frame (a crash inside
        a library, a bare message) only a project is searched, and what is found there is a
        candidate (:attr:`FixSite.searched`) that ``--apply`` writes only with ``--pick``."""
        if self.foreign:
            return []
        if not self.mapped:
            if not self.search_allowed:
                self._note_once(f"{self.root} is not a project (no .git, pyproject.toml, setup.py, setup.cfg or "
                                f"requirements*.txt), so it was not searched; pass --root DIR to search a folder.")
                return []
            self.searched = True
            where = ("The crash happened inside a library" if self.diag.traceback.frames
                     else "The log shows the message without its stack frames")
            self._search_note = (f"{where}; the project was searched, and the fix sites found that way are "
                                 f"candidates (apply one with --pick N).")
            self._note_once(self._search_note)
        files = self.project.py_files(needles)
        if self.mapped:
            # The folder that holds the log's files is the project; a sibling experiment is not.
            home = _common_folder([m.rel_path for m in self.mapped])
            files = [f for f in files if f.startswith(home)]
        if len(files) > MAX_SEARCH_FILES:
            self._note_once(f"Only the first {MAX_SEARCH_FILES} of {len(files)} matching files were searched.")
            files = files[:MAX_SEARCH_FILES]
        return files

    def loss_functions(self) -> Iterator[Tuple[SourceFile, ast.AST]]:
        """The project's functions a framework's loop takes its loss from (``training_step``,
        ``compute_loss``... :data:`tracefix.vocab.LOSS_FN_NAMES`), with their files."""
        for _rel, sf in self.sources(self.project_files(tuple("def " + n for n in sorted(LOSS_FN_NAMES)))):
            for fn in sf.functions():
                if fn.name in LOSS_FN_NAMES:
                    yield sf, fn

    def sources(self, rels: Iterable[str]) -> Iterator[Tuple[str, SourceFile]]:
        """(rel, parsed file) for each of rels, once each, until the search's time budget runs out."""
        seen: Set[str] = set()
        for rel in rels:
            if rel in seen:
                continue
            seen.add(rel)
            if self.over_budget():
                return
            sf = self.project.source(rel)
            if sf is not None:
                yield rel, sf

    def _note_once(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def over_budget(self) -> bool:
        if not self.out_of_time and time.monotonic() > self.deadline:
            self.out_of_time = True
            self.notes.append("The project is large; the search for fix sites stopped early and may be incomplete.")
        return self.out_of_time


PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")
MAX_SEARCH_FILES = 2000


def is_project(root: Path) -> bool:
    """Does root look like a project (not $HOME or /tmp)?  A VCS folder, packaging or requirements file."""
    root = Path(root)
    try:
        if any((root / m).exists() for m in PROJECT_MARKERS):
            return True
        return any(root.glob("requirements*.txt"))
    except OSError:
        return False


def _agreement(cand: MappedFrame, others: List[List[MappedFrame]]) -> int:
    """How much the other frames' files share cand's folder (a monorepo: the right experiment)."""
    here = cand.rel_path.split("/")[:-1]
    total = 0
    for cs in others:
        best = 0
        for c in cs:
            there = c.rel_path.split("/")[:-1]
            n = 0
            for a, b in zip(here, there):
                if a != b:
                    break
                n += 1
            best = max(best, n + (1 if len(here) == len(there) == n else 0))
        total += best
    return total


def _common_folder(rels: List[str]) -> str:
    """'exp/a/' for exp/a/train.py and exp/a/models/net.py; '' when they share no folder."""
    parts = [r.split("/")[:-1] for r in rels]
    common: List[str] = []
    for level in zip(*parts):
        if any(x != level[0] for x in level):
            break
        common.append(level[0])
    return "".join(c + "/" for c in common)


def _base(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


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
