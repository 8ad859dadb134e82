"""What a fixer sees: the diagnosis, the project root, and the files it reads (cached)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from tracefix.patcher.cstedit import Source
from tracefix.patcher.errors import PatchError
from tracefix.patcher.text import Decoded, decode_any, normalize
from tracefix.record import record, field
from tracefix.records import Diagnosis, FixSite


@record
class Option:
    """One way to fix a site: new texts ("\\n" endings) by relative path, and how safe it is."""

    summary: str
    applicability: str                      # "safe" | "unsafe"
    reason: str
    texts: Dict[str, str] = field(default_factory=dict)
    alternative: bool = False
    demote: bool = False                    # rank after the other sites' main fixes


class Context:
    def __init__(self, diag: Diagnosis, root: Path) -> None:
        self.diag = diag
        self.root = Path(root)
        self._decoded: Dict[str, Optional[Decoded]] = {}
        self._text: Dict[str, Optional[str]] = {}
        self._sources: Dict[Tuple[str, str], Optional[Source]] = {}
        self.in_part = True     # until a fixer needs a file whole (see cstedit.NeedWhole)

    def decoded(self, rel: str) -> Optional[Decoded]:
        if rel not in self._decoded:
            path = self.root / rel
            try:
                self._decoded[rel] = decode_any(path.read_bytes(), rel)
            except (OSError, PatchError):
                self._decoded[rel] = None
        return self._decoded[rel]

    def text(self, rel: str) -> Optional[str]:
        if rel not in self._text:
            d = self.decoded(rel)
            self._text[rel] = None if d is None else normalize(d.text)
        return self._text[rel]

    def source(self, rel: str, text: Optional[str] = None) -> Optional[Source]:
        """``rel`` (or ``text`` standing for it) parsed; parsed once per text, then shared by the fixers.

        A long file's own text is parsed in part, around the lines the diagnosis names in it (fix
        sites, crash site), until a fixer needs a file whole (:meth:`needs_whole`)."""
        keep = None
        if text is None and self.in_part:
            sites = [*self.diag.fix_sites, *([self.diag.crash_site] if self.diag.crash_site else [])]
            keep = [s.line for s in sites if s.path == rel] or None
        text = self.text(rel) if text is None else text
        if text is None:
            return None
        key = (rel, text)
        if key not in self._sources:
            self._sources[key] = Source.parse(str(text), keep)
        return self._sources[key]

    def frame_files(self) -> List[str]:
        """The traceback's files (its anomaly trace's too) that are under the root, as relative paths."""
        rels: List[str] = []
        tb = self.diag.traceback
        for frame in (*tb.frames, *tb.anomaly_frames):
            path = frame.path.replace("\\", "/")
            if "site-packages/" in path or "dist-packages/" in path or path.startswith("<"):
                continue
            parts = [p for p in path.split("/") if p and p != "."]
            for k in range(len(parts)):
                tail = "/".join(parts[k:])
                if (self.root / tail).is_file():
                    rels.append(tail)
                    break
        return rels

    def needs_whole(self) -> None:
        """Parse every file whole from now on (a fixer asked a partly parsed one about the rest)."""
        self.in_part = False
        self._sources = {key: src for key, src in self._sources.items() if src is None or not src.partial}


Fixer = Callable[[Context, FixSite], List[Option]]
FIXERS: Dict[str, Fixer] = {}


def fixer(*kinds: str) -> Callable[[Fixer], Fixer]:
    """Register a fix function for FixSite kinds (adding a kind means adding one function)."""
    def register(fn: Fixer) -> Fixer:
        for kind in kinds:
            FIXERS[kind] = fn
        return fn
    return register
