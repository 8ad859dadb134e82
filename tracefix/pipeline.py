"""Wire the stages: read -> match -> collapse ranks -> locate (-> patch, on request)."""
from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import BinaryIO, Dict, List, Optional, Sequence, Set, Tuple

from tracefix.knowledge import Entry, find_entry
from tracefix.matcher import BareMessage, match, normalize
from tracefix.paths import is_notebook_path
from tracefix.reader import read_tracebacks
from tracefix.record import field, record, replace
from tracefix.records import INSUFFICIENT, Diagnosis, FixSite, Traceback

MAX_DIAGNOSES = 50
MAX_UNRECOGNIZED = 50
MAX_COUNTED = 100_000        # distinct errors past those caps that are counted (bounded memory)


@record(frozen=True)
class Report:
    diagnoses: Tuple[Diagnosis, ...]
    unrecognized: Tuple[Tuple[str, str], ...]   # (exception type, message) of unknown errors
    more_diagnoses: int = 0      # distinct known errors past MAX_DIAGNOSES, not shown
    more_unrecognized: int = 0   # distinct unknown errors past MAX_UNRECOGNIZED, not shown


def _first_line(message: str) -> str:
    """What tells two messages apart: the first line (the lines after it may be the program's
    next output, glued on by the reader)."""
    return normalize(message.split("\n", 1)[0])[:500]


def _key(diag: Diagnosis) -> tuple:
    # Ranks print the same stack from different hosts/containers: compare base names only.
    tb = diag.traceback
    frames = tuple((f.path.replace("\\", "/").rsplit("/", 1)[-1], f.line) for f in tb.frames)
    return (diag.entry_id, diag.fields, _first_line(tb.message), frames)


def collect(stream: BinaryIO, entries: Sequence[Entry]) -> Report:
    """Read and match everything in ``stream``; identical errors (from several ranks, or repeated)
    collapse into one, which says how often it was seen; what is past the caps is counted."""
    found: Dict[tuple, Diagnosis] = {}
    counts: Dict[tuple, int] = {}
    unknown: Dict[Tuple[str, str], str] = {}
    past_found: Set[int] = set()
    past_unknown: Set[int] = set()
    for tb in read_tracebacks(stream, BareMessage(entries)):
        diag = match(tb, entries)
        if diag is None:
            if tb.exc_type:
                _add_unknown(unknown, past_unknown, tb)
            continue
        key = _key(diag)
        seen = found.get(key)
        if seen is None:
            if len(found) < MAX_DIAGNOSES:
                found[key], counts[key] = diag, 1
            else:
                _count_past(past_found, key)
        else:
            counts[key] += 1
            ranks = tuple(sorted(set(seen.ranks) | set(diag.ranks)))
            better = diag if ((diag.traceback.anomaly_frames and not seen.traceback.anomaly_frames)
                              or (diag.traceback.evidence and not seen.traceback.evidence)) else seen
            found[key] = replace(better, ranks=ranks, confidence=max(seen.confidence, diag.confidence))
    diagnoses = _drop_weaker_duplicates([_with_count(d, counts[k]) for k, d in found.items()])
    return Report(tuple(diagnoses), tuple((t, m) for (t, _first), m in unknown.items()),
                  len(past_found), len(past_unknown))


def _add_unknown(unknown: Dict[Tuple[str, str], str], past: Set[int], tb: Traceback) -> None:
    key = (tb.exc_type or "", _first_line(tb.message))
    if key in unknown:
        return
    if len(unknown) < MAX_UNRECOGNIZED:
        unknown[key] = "\n".join(normalize(ln) for ln in tb.message.split("\n"))[:500]
    else:
        _count_past(past, key)


def _count_past(past: Set[int], key: tuple) -> None:
    """Count a distinct error past a cap: its hash only, and at most MAX_COUNTED of them."""
    if len(past) < MAX_COUNTED:
        past.add(hash(key))


def _with_count(d: Diagnosis, n: int) -> Diagnosis:
    """``d`` with a note saying how often it was seen, when more often than it has ranks."""
    if n <= max(1, len(d.ranks)):
        return d
    return replace(d, notes=(f"seen {n} times in the log (identical tracebacks are shown once)",) + d.notes)


def _drop_weaker_duplicates(diags: List[Diagnosis]) -> List[Diagnosis]:
    """A bare message that repeats a full traceback's error adds nothing: keep the traceback."""
    full = {(d.entry_id, _first_line(d.traceback.message)) for d in diags if d.traceback.frames}
    return [d for d in diags
            if d.traceback.frames or (d.entry_id, _first_line(d.traceback.message)) not in full]


def locate_all(report: Report, entries: Sequence[Entry], root: Path, search: Optional[bool] = None) -> Report:
    """Locate every diagnosis; ``search``: may the project be searched when no frame maps (None:
    when root is a project; the CLI says True when the user named --root)."""
    from tracefix.locator import locate

    out = []
    for d in report.diagnoses:
        entry = find_entry(entries, d.entry_id)
        if entry is None:
            out.append(d)
        elif any(is_notebook_path(f.path) for f in d.traceback.frames):
            from tracefix.frames import get_index
            from tracefix.cellframes import preferring
            with preferring(d.traceback.frames, get_index(root, fresh=True).notebooks()):
                out.append(locate(d, entry, root, search))
        else:
            out.append(locate(d, entry, root, search))
    if any(_in_notebook(d) for d in out):
        from tracefix.cellsites import annotate
        out = [annotate(d, root) if _in_notebook(d) else d for d in out]
    return replace(report, diagnoses=tuple(out))


def _in_notebook(d: Diagnosis) -> bool:
    sites = ([d.crash_site] if d.crash_site else []) + list(d.fix_sites)
    return any(s.path.lower().endswith(".ipynb") for s in sites)


def _covering_first(d: Diagnosis) -> Diagnosis:
    """The sites whose fix the locator knows leaves a use unreduced (``FixSite.uncovered``: their
    patches are insufficient) after the others, on the cheap path too, so that the first site is
    the same with or without patches (--no-patch, quickfix)."""
    sites = sorted(d.fix_sites, key=lambda s: bool(s.uncovered))   # stable: the locator's order
    return d if list(sites) == list(d.fix_sites) else replace(d, fix_sites=tuple(sites))


def _recommended_first(sites: Tuple[FixSite, ...], patches) -> Tuple[FixSite, ...]:
    """The sites with the one the recommended patch fixes first: when every fix of the best-ranked
    site only moves the error (insufficient), "fix site" names the line the recommendation changes."""
    first = patches[0] if patches and patches[0].applicability != INSUFFICIENT else None
    if first is None or first.origin is None or not sites or (sites[0].path, sites[0].line) == first.origin:
        return sites
    k = next((i for i, s in enumerate(sites) if (s.path, s.line) == first.origin), None)
    if k is None:
        return sites
    # (scores stay: whether the evidence settles on one site is the locator's verdict, not ours)
    return (sites[k],) + sites[:k] + sites[k + 1:]


def propose_all(report: Report, root: Path) -> Report:
    # Importing libcst and parsing the sources make some 10^5 objects that all live until the
    # patches are made; the cyclic collector would walk them again and again (about a tenth of a
    # diagnosis with a patch).  Paused for this bounded step only: reference counting still frees.
    was_on = gc.isenabled()
    gc.disable()
    try:
        return _propose_all(report, root)
    finally:
        if was_on:
            gc.enable()


def _propose_all(report: Report, root: Path) -> Report:
    from tracefix.patcher import explain_unpatchable, propose

    out = []
    for d in report.diagnoses:
        patches = propose(d, root)
        notes = d.notes
        if not patches and d.fix_sites:
            notes += (f"no automatic patch: {explain_unpatchable(d.fix_sites[0])}",)
        d = replace(d, patches=patches, notes=notes, fix_sites=_recommended_first(d.fix_sites, patches))
        if _in_notebook(d):
            from tracefix.cellsites import annotate_notes
            d = annotate_notes(d)
        out.append(d)
    return replace(report, diagnoses=tuple(out))


def merge(reports: Sequence[Report], entries: Sequence[Entry], root: Path, patches: bool,
          search: Optional[bool] = None) -> Report:
    """Several logs' reports as one, located (and patched when asked)."""
    diags: List[Diagnosis] = []
    unknown: List[Tuple[str, str]] = []
    seen = set()
    for r in reports:
        diags += r.diagnoses
        for t, m in r.unrecognized:
            key = (t, _first_line(m))
            if key not in seen:
                seen.add(key)
                unknown.append((t, m))
    more = (sum(r.more_diagnoses for r in reports), sum(r.more_unrecognized for r in reports))
    report = locate_all(Report(tuple(diags), tuple(unknown), *more), entries, root, search)
    report = replace(report, diagnoses=tuple(_covering_first(d) for d in report.diagnoses))
    # libcst costs ~0.1-0.3 s to import: only pay for it when there is a site to patch
    if patches and any(d.fix_sites for d in report.diagnoses):
        report = propose_all(report, root)
    return report


MAX_ROOT_FRAMES = 200       # distinct user frames compared when choosing the project root


def project_root(reports: Sequence[Report], start: Path) -> Tuple[Path, Optional[str]]:
    """The folder whose files the logs' frames are in, for a run without --root: ``start`` (the
    current directory), or the nearest folder above it that holds a project marker (as
    ``tracefix undo`` finds ``.tracefix/``) when more of the frames map under that folder than
    under ``start`` (``cd models && tracefix ../crash.log``).  Returns (root, the marker found),
    the marker None when ``start`` stays."""
    from tracefix.frames import frame_candidates, get_index
    from tracefix.paths import is_library_path

    frames, seen = [], set()
    for r in reports:
        for d in r.diagnoses:
            for f in d.traceback.frames + d.traceback.anomaly_frames:
                path = f.path or ""
                key = (path, f.line, f.code)
                if not path or key in seen or is_library_path(path) or (
                        path.startswith("<") and path.endswith(">") and not is_notebook_path(path)):
                    continue
                seen.add(key)
                frames.append(f)
    frames = frames[:MAX_ROOT_FRAMES]

    def mapped(root: Path) -> int:
        index = get_index(root)
        return sum(1 for f in frames if frame_candidates(f, root, index))

    if not frames:
        return start, None
    here = mapped(start)
    if here == len(frames):
        return start, None
    from tracefix.locator.base import PROJECT_MARKERS
    for folder in (start, *start.parents):
        marker = next((m for m in PROJECT_MARKERS if _exists(folder / m)), None)
        if marker is not None:
            if folder != start and mapped(folder) > here:
                return folder, marker
            break
    return start, None


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:         # a folder above that we may not read
        return False


def diagnose(stream: BinaryIO, entries: Sequence[Entry], root: Path, patches: bool = False,
             search: Optional[bool] = None) -> Report:
    """The whole diagnose path for one stream."""
    return merge([collect(stream, entries)], entries, root, patches, search)


def _norm_code(code: Optional[str]) -> str:
    return "".join((code or "").split())


def stale_crash_site(d: Diagnosis) -> Optional[str]:
    """Why the crash line in the local file no longer reads what the traceback showed, or None."""
    site = d.crash_site
    if site is None:
        return None
    base = site.path.rsplit("/", 1)[-1]
    for frame in reversed(d.traceback.frames):
        if frame.path.replace("\\", "/").rsplit("/", 1)[-1] == base and frame.code:
            if _norm_code(frame.code) != _norm_code(site.code):
                return (f"{site.path}:{site.line} no longer reads {frame.code!r} as the traceback showed "
                        f"(edited since the log was written?); nothing written")
            return None
    return None


@record
class Applied:
    """What ``apply_recommended`` did: files written, problems (exit 3), already-applied notes, and
    cautions (the exit status stays 0): a written patch labelled unsafe, with its reason; a written
    file that had other hard links, which keep the old text; unsafe: the reasons of the written
    patches labelled unsafe, for the report's summary on stdout."""

    written: List[str]
    problems: List[str]
    already: List[str]
    cautions: List[str] = field(default_factory=list)
    unsafe: List[str] = field(default_factory=list)


def _count(n: int, noun: str) -> str:
    return f"there is 1 {noun}" if n == 1 else f"there are {n} {noun}es" if noun.endswith("ch") else \
        f"there are {n} {noun}s"


def apply_recommended(report: Report, root: Path, pick: Optional[int] = None) -> Applied:
    """Write the recommended (or --pick N) patch of every settled diagnosis."""
    from tracefix.families import anomaly_helps
    from tracefix.patcher import PatchError, apply, explain_unpatchable, settled
    from tracefix.patcher.writing import hard_links

    written: List[str] = []
    problems: List[str] = []
    already: List[str] = []
    cautions: List[str] = []
    unsafe: List[str] = []
    journal = _load_journal(root)
    session = f"{os.getpid()}-{id(report)}"
    for d in report.diagnoses:
        fingerprint = _fingerprint(d)
        on_disk = _on_disk(journal, fingerprint, root)
        if on_disk is not None:
            # this very traceback was patched before and the files still hold that patch
            said, refused = _said_on_disk(d.entry_id, on_disk, pick)
            (problems if refused else already).append(said)
            continue
        if not d.patches:
            why = explain_unpatchable(d.fix_sites[0]) if d.fix_sites else "no fix site was found in the project"
            problems.append(f"{d.entry_id}: no automatic patch: {why}")
            continue
        if pick is None and d.fix_sites[0].searched:
            problems.append(f"{d.entry_id}: the fix site was found by searching the project, not from the log's "
                            f"frames; nothing written (review the patches and choose one with --pick N)")
            continue
        if pick is None and not settled(d):
            # the forward trace of --anomaly pinpoints only some families' sites; the witness covers every family
            how = "tracefix run --anomaly" if anomaly_helps(d.entry_id) else "tracefix run -- <command>"
            problems.append(f"{d.entry_id}: several fix sites are equally likely; nothing written "
                            f"(choose one with --pick N, or run `{how}` to pinpoint it)")
            continue
        index = (pick or 1) - 1
        if not 0 <= index < len(d.patches):
            problems.append(f"{d.entry_id}: --pick {pick}: {_count(len(d.patches), 'patch')}")
            continue
        chosen = d.patches[index]
        if chosen.applicability == "insufficient":
            what = f"patch {index + 1}" if pick else "no patch fixes it; the only one"
            problems.append(f"{d.entry_id}: {what} is insufficient, nothing written: {chosen.reason}")
            continue
        stale = stale_crash_site(d)
        if not stale and any(p.lower().endswith(".ipynb") for p, _, _ in d.patches[index].files):
            from tracefix.cellsites import stale as stale_cells
            stale = stale_cells(d, root)
        if stale:
            problems.append(f"{d.entry_id}: {stale}")
            continue
        links = hard_links(root, [rel for rel, _, _ in chosen.files])   # before the write gives a new inode
        try:
            done = apply(chosen, root, session=session)
        except PatchError as exc:
            problems.append(f"{d.entry_id}: {exc}")
            continue
        written += done
        cautions += [f"{d.entry_id}: {rel} had {links[rel]} hard links; the patch replaced this one only, so the "
                     "other links still hold the old text (tracefix undo does not join them again)"
                     for rel in done if rel in links]
        if done:
            journal[fingerprint] = {"patch": index + 1, "summary": chosen.summary,
                                    "files": {rel: _sha256(root / rel) for rel in done}}
            _save_journal(root, journal)
            if chosen.applicability == "unsafe":
                unsafe.append(f"{', '.join(done)}: {chosen.reason}")
                cautions.append(f"{d.entry_id}: the patch written to {', '.join(done)} is unsafe: {chosen.reason} "
                                "(review it; tracefix undo reverts it)")
    return Applied(written, problems, already, cautions, unsafe)


JOURNAL = Path(".tracefix") / "applied.json"


def _fingerprint(d: Diagnosis) -> str:
    import hashlib  # (here: --apply only; ~3 ms of start-up the diagnose path does not pay)

    frames = "|".join(f"{f.path.replace(chr(92), '/').rsplit('/', 1)[-1]}:{f.line}" for f in d.traceback.frames)
    return hashlib.sha256(f"{d.entry_id}\n{normalize(d.traceback.message)}\n{frames}".encode()).hexdigest()


def _sha256(path: Path) -> str:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _load_journal(root: Path) -> Dict[str, dict]:
    import json

    try:
        data = json.loads((root / JOURNAL).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_journal(root: Path, journal: Dict[str, dict]) -> None:
    from tracefix.patcher import PatchError
    from tracefix.patcher.writing import state_dir
    import json

    path = root / JOURNAL
    try:
        state_dir(root)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(journal, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except (OSError, PatchError):
        pass  # the journal only makes a repeated --apply a no-op; losing it loses nothing else


@record(frozen=True)
class OnDisk:
    """A journal entry whose files still hold the patch it wrote: that patch's number (None in a
    journal of an older tracefix, which did not record it), its summary and the files."""

    number: Optional[int]
    summary: str
    files: Tuple[str, ...]


def _on_disk(journal: Dict[str, dict], fingerprint: str, root: Path) -> Optional[OnDisk]:
    """The patch of this traceback that is in place (not undone, not edited since), or None."""
    from tracefix.patcher.writing import journal_files

    entry = journal.get(fingerprint)
    files = journal_files(entry)
    if not files or not all(_sha256(root / rel) == digest for rel, digest in files.items()):
        return None
    number = entry.get("patch") if "files" in entry else None
    summary = entry.get("summary") if "files" in entry else None
    return OnDisk(number if isinstance(number, int) else None, summary if isinstance(summary, str) else "",
                  tuple(sorted(files)))


def _said_on_disk(entry_id: str, on_disk: OnDisk, pick: Optional[int]) -> Tuple[str, bool]:
    """What to say about a patch already in place, and whether it refuses what was asked (exit 3).

    The patch asked for (--pick N, or the recommended patch 1) being the one on disk is "already
    applied".  Another patch of this traceback on disk is never written over: --pick N asked for a
    patch that cannot be applied (refused); a plain --apply leaves the earlier choice in place (the
    error has its patch, exit 0) and says which it is."""
    where = ", ".join(on_disk.files)
    wanted = pick or 1
    if on_disk.number in (None, wanted):
        return f"{entry_id}: already applied to {where} (tracefix undo to revert)", False
    what = f"patch {on_disk.number}" + (f" ({on_disk.summary})" if on_disk.summary else "")
    if pick is not None:
        return (f"{entry_id}: --pick {pick}: {what} is already applied to {where}; nothing written "
                f"(tracefix undo reverts it, then --pick {pick} can be applied)"), True
    return (f"{entry_id}: {what} is already applied to {where}, not the recommended patch 1; nothing written "
            "(tracefix undo reverts it before another can be applied)"), False
