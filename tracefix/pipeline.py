"""Wire the stages: read -> match -> collapse ranks -> locate (-> patch, on request)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, Dict, Iterable, List, Optional, Sequence, Tuple

from tracefix.knowledge import Entry, find_entry
from tracefix.matcher import BareMessage, keywords, match, normalize
from tracefix.reader import read_tracebacks
from tracefix.records import Diagnosis, Traceback

MAX_DIAGNOSES = 50
MAX_UNRECOGNIZED = 50


@dataclass(frozen=True)
class Report:
    diagnoses: Tuple[Diagnosis, ...]
    unrecognized: Tuple[Tuple[str, str], ...]   # (exception type, message) of unknown errors


def _key(tb: Traceback, entry_id: str) -> tuple:
    # Ranks print the same stack from different hosts/containers: compare base names only.
    frames = tuple((f.path.replace("\\", "/").rsplit("/", 1)[-1], f.line) for f in tb.frames)
    return (entry_id, normalize(tb.message), frames)


def collect(stream: BinaryIO, entries: Sequence[Entry]) -> Report:
    """Read and match everything in ``stream``; identical errors from several ranks collapse."""
    found: Dict[tuple, Diagnosis] = {}
    unknown: Dict[Tuple[str, str], None] = {}
    for tb in read_tracebacks(stream, keywords(entries), BareMessage(entries)):
        diag = match(tb, entries)
        if diag is None:
            if tb.exc_type and len(unknown) < MAX_UNRECOGNIZED:
                unknown.setdefault((tb.exc_type, normalize(tb.message)[:500]), None)
            continue
        key = _key(tb, diag.entry_id)
        seen = found.get(key)
        if seen is None:
            if len(found) < MAX_DIAGNOSES:
                found[key] = diag
        else:
            ranks = tuple(sorted(set(seen.ranks) | set(diag.ranks)))
            better = diag if (diag.traceback.anomaly_frames and not seen.traceback.anomaly_frames) else seen
            found[key] = replace(better, ranks=ranks, confidence=max(seen.confidence, diag.confidence))
    diagnoses = _drop_weaker_duplicates(list(found.values()))
    return Report(tuple(diagnoses), tuple(unknown))


def _drop_weaker_duplicates(diags: List[Diagnosis]) -> List[Diagnosis]:
    """A bare message that repeats a full traceback's error adds nothing: keep the traceback."""
    full = {(d.entry_id, normalize(d.traceback.message)) for d in diags if d.traceback.frames}
    return [d for d in diags
            if d.traceback.frames or (d.entry_id, normalize(d.traceback.message)) not in full]


def locate_all(report: Report, entries: Sequence[Entry], root: Path) -> Report:
    from tracefix.locator import locate

    out = []
    for d in report.diagnoses:
        entry = find_entry(entries, d.entry_id)
        out.append(locate(d, entry, root) if entry is not None else d)
    return replace(report, diagnoses=tuple(out))


def propose_all(report: Report, root: Path) -> Report:
    from tracefix.patcher import propose

    return replace(report, diagnoses=tuple(replace(d, patches=propose(d, root)) for d in report.diagnoses))


def diagnose(stream: BinaryIO, entries: Sequence[Entry], root: Path, patches: bool = False) -> Report:
    report = locate_all(collect(stream, entries), entries, root)
    return propose_all(report, root) if patches else report
