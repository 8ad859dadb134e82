"""Format a report for people and tools: rich, plain, json, quickfix, github, sarif.

The only place that formats for humans.  Text that came from a log or a source file is untrusted:
it is stripped of control characters and, in rich output, never parsed as markup.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, TextIO, Tuple

from tracefix.knowledge import Entry, find_entry
from tracefix.records import INSUFFICIENT, SAFE, UNSAFE, Diagnosis, FixSite, Patch, Site
from tracefix.version import __version__

# formats whose stdout a program reads: the command's own output and tracefix's remarks go to stderr
MACHINE_FORMATS = ("json", "quickfix", "github", "sarif")
_UNSAFE_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def where(site: Site) -> str:
    """``path:line``, or ``nb.ipynb, cell 3 (In [7]), line 2`` for a site in a notebook."""
    if site.cell is None:
        return f"{site.path}:{site.line}"
    if not site.path:               # a cell of the running kernel (the IPython extension)
        return f"In [{site.execution_count}], line {site.cell_line}"
    count = f" (In [{site.execution_count}])" if site.execution_count is not None else ""
    return f"{site.path}, cell {site.cell}{count}, line {site.cell_line}"


def _qf_position(site: Site) -> str:
    """Quickfix ``line:col``: for a notebook site, where its source sits in the .ipynb JSON text."""
    if site.cell is None:
        return f"{site.line}:{site.col + 1}"
    if not site.local_path:
        return "1:1"
    from tracefix.notebook import json_position
    line, col = json_position(site.local_path, site.cell - 1, site.cell_line or 1, site.col)
    return f"{line}:{col + 1}"


def safe(text: str) -> str:
    """Remove escape and control characters (and bidi overrides) so the terminal shows text only."""
    return _UNSAFE_CHARS.sub("", text)


def _how_to_fix(entry: Entry, d: Diagnosis) -> str:
    """The entry's advice for the kind of the first fix site, else its general fix."""
    own = entry.fix_advice(d.fix_sites[0].kind) if d.fix_sites else ""
    return own or _first_paragraph(entry.explanation("fix"))


def _first_paragraph(text: str) -> str:
    parts = text.strip().split("\n\n")
    out = parts[0].replace("\n", " ")
    if out.rstrip().endswith(":"):   # "...like this:" introduces indented example code: keep it
        for part in parts[1:]:
            if not part.startswith("    "):
                break
            out += "\n" + part
    return out


# --- json ---------------------------------------------------------------------------------
def _site(site: Optional[Site], with_reason: bool = False) -> Optional[Dict]:
    if site is None:
        return None
    out = {"path": site.path, "line": site.line, "code": site.code, "local_path": site.local_path}
    if site.cell is not None:   # a notebook: line is the virtual module's, cell/cell_line what users see
        out.update(cell=site.cell, cell_line=site.cell_line, execution_count=site.execution_count)
    if with_reason and isinstance(site, FixSite):
        out.update(col=site.col, reason=site.reason, kind=site.kind, score=site.score, searched=site.searched)
    return out


def _patch(p: Patch) -> Dict:
    return {"summary": p.summary, "applicability": p.applicability, "reason": p.reason, "diff": p.diff}


def _evidence(d: Diagnosis) -> Optional[Dict]:
    ev = d.traceback.evidence
    if ev is None:
        return None
    from tracefix.record import asdict

    return asdict(ev)


def _witness_line(d: Diagnosis) -> Optional[str]:
    ev = d.traceback.evidence
    return None if ev is None else f"The witness saw: {ev.summary}"


def as_dict(diagnoses: Sequence[Diagnosis], unrecognized: Sequence, extra: Optional[Dict] = None,
            more: Sequence[int] = (0, 0)) -> Dict:
    out = {
        "version": __version__,
        "diagnoses": [
            {
                "id": d.entry_id,
                "title": d.title,
                "confidence": d.confidence,
                "exception": {"type": d.traceback.exc_type, "message": d.traceback.message},
                "fields": dict(d.fields),
                "ranks": list(d.ranks),
                "crash_site": _site(d.crash_site),
                "fix_sites": [_site(f, True) for f in d.fix_sites],
                "patches": [_patch(p) for p in d.patches],
                "notes": list(d.notes),
                "evidence": _evidence(d),
            }
            for d in diagnoses
        ],
        "unrecognized": [{"type": t, "message": m} for t, m in unrecognized],
        # distinct errors past the lists' caps, not listed
        "omitted": {"diagnoses": more[0], "unrecognized": more[1]},
    }
    if extra:
        out.update(extra)
    return out


def render_json(out: TextIO, diagnoses, unrecognized, extra: Optional[Dict] = None,
                more: Sequence[int] = (0, 0)) -> None:
    import json

    # ensure_ascii keeps any control character from the log escaped as \uXXXX
    json.dump(as_dict(diagnoses, unrecognized, extra, more), out, indent=2, ensure_ascii=True)
    out.write("\n")


# --- quickfix -----------------------------------------------------------------------------
def render_quickfix(out: TextIO, diagnoses: Sequence[Diagnosis], unrecognized=(), extra=None,
                    root: Optional[str] = None) -> None:
    """``path:line:col: id: message`` — fix sites first, then the crash site.  Paths are relative
    to the current directory (where an editor runs the command), not to ``root``."""
    base = _from_cwd(root)
    for d in diagnoses:
        for f in d.fix_sites:
            cell = f"({where(f)}) " if f.cell is not None else ""
            out.write(safe(f"{base}{f.path}:{_qf_position(f)}: {d.entry_id}: fix here: {cell}{f.reason}") + "\n")
        c = d.crash_site
        if c is not None:
            msg = d.traceback.message.split("\n", 1)[0][:200]
            cell = f"({where(c)}) " if c.cell is not None else ""
            out.write(safe(f"{base}{c.path}:{_qf_position(c)}: {d.entry_id}: crashed here: {cell}"
                           f"{d.traceback.exc_type or 'error'}: {msg}") + "\n")


# --- github ---------------------------------------------------------------------------------
GITHUB_DIFF_LINES = 40      # of the recommended patch, in the fix site's annotation


def _gh_data(text: str) -> str:
    """A workflow command's message: % CR LF escaped (GitHub shows %0A as a new line)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    """A workflow command's property value: the message escapes plus : and ,."""
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def _gh_line(kind: str, site: Optional[Site], base: str, title: str, message: str) -> str:
    props = []
    if site is not None and site.cell is None:
        props += [f"file={_gh_prop(base + site.path)}", f"line={site.line}"]
        if getattr(site, "col", None) is not None:
            props.append(f"col={site.col + 1}")
    elif site is not None:
        message = f"{where(site)}: {message}"
    props.append(f"title={_gh_prop(title)}")
    return f"::{kind} {','.join(props)}::{_gh_data(safe(message))}"


def render_github(out: TextIO, diagnoses: Sequence[Diagnosis], root: Optional[str] = None) -> None:
    """GitHub Actions workflow commands: an ``::error`` at the crash site, a ``::warning`` at each
    fix site (the first carries the recommended patch: its summary, safety and diff), paths
    relative to the current directory (the workspace, in a workflow)."""
    base = _from_cwd(root)
    for d in diagnoses:
        message = d.traceback.message.split("\n", 1)[0][:300]
        exc = d.traceback.exc_type or "error"
        first = d.fix_sites[0] if d.fix_sites else None
        fix_at = f" (fix: {where(first)})" if first is not None else ""
        out.write(_gh_line("error", d.crash_site, base, f"tracefix {d.entry_id}: crashed here",
                           f"{exc}: {message}{fix_at}") + "\n")
        best = d.patches[0] if d.patches else None
        for i, f in enumerate(d.fix_sites[:3]):
            text = f.reason
            if i == 0 and best is not None:
                diff = best.diff.splitlines()
                shown = "\n".join(diff[:GITHUB_DIFF_LINES]) + ("\n..." if len(diff) > GITHUB_DIFF_LINES else "")
                text += f"\n\nPatch ({best.applicability}): {best.summary}\n{shown}"
                if best.reason:
                    text += f"\n{best.applicability} because: {best.reason}"
            out.write(_gh_line("warning", f, base, f"tracefix {d.entry_id}: fix here", text) + "\n")


# --- sarif ----------------------------------------------------------------------------------
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _sarif_location(site: Site, message: str = "", index: Optional[int] = None) -> Dict:
    region: Dict[str, int] = {"startLine": site.line}
    if site.col is not None:
        region["startColumn"] = site.col + 1
    loc: Dict = {"physicalLocation": {"artifactLocation": {"uri": site.path, "uriBaseId": "SRCROOT"},
                                      "region": region}}
    if site.cell is not None:
        loc["physicalLocation"]["region"] = {"startLine": site.line}
        message = f"{where(site)}: {message}" if message else where(site)
    if message:
        loc["message"] = {"text": safe(message)}
    if index is not None:
        loc["id"] = index
    return loc


def _sarif_changes(patch: Patch) -> List[Dict]:
    """The patch's files as SARIF artifact changes: one replacement per run of changed lines, in
    character offsets of the file's text with its line endings read as "\\n"."""
    import difflib

    changes = []
    for path, old, new in patch.files:
        a, b = old.splitlines(True), new.splitlines(True)
        starts = [0]
        for line in a:
            starts.append(starts[-1] + len(line))
        replacements = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag != "equal":
                replacements.append({"deletedRegion": {"charOffset": starts[i1], "charLength": starts[i2] - starts[i1]},
                                     "insertedContent": {"text": "".join(b[j1:j2])}})
        changes.append({"artifactLocation": {"uri": path, "uriBaseId": "SRCROOT"}, "replacements": replacements})
    return changes


def render_sarif(out: TextIO, diagnoses: Sequence[Diagnosis], entries: Sequence[Entry] = (),
                 root: Optional[str] = None) -> None:
    """SARIF 2.1.0: a result per diagnosis at its crash site (the fix sites as related locations),
    ``fixes`` holding the patches (the recommended one first) as replacements in the files."""
    import json
    from pathlib import Path

    rules, results = [], []
    for d in diagnoses:
        if d.entry_id not in {r["id"] for r in rules}:
            entry = find_entry(entries, d.entry_id)
            rule: Dict = {"id": d.entry_id, "shortDescription": {"text": d.title}}
            if entry is not None:
                rule["fullDescription"] = {"text": " ".join(entry.explanation("what").split())}
                rule["help"] = {"text": entry.explanation("fix")}
            rules.append(rule)
        message = f"{d.traceback.exc_type or 'error'}: {d.traceback.message.splitlines()[0][:300] if d.traceback.message else ''}"
        if d.fix_sites:
            message += f" (fix: {where(d.fix_sites[0])})"
        first = d.crash_site or (d.fix_sites[0] if d.fix_sites else None)
        result: Dict = {"ruleId": d.entry_id, "level": "error", "message": {"text": safe(message)}}
        if first is not None:
            result["locations"] = [_sarif_location(first)]
        if d.fix_sites:
            result["relatedLocations"] = [_sarif_location(f, f"fix here: {f.reason}", i)
                                          for i, f in enumerate(d.fix_sites, 1)]
        fixes = [{"description": {"text": safe(f"{p.summary} ({p.applicability}"
                                                + (f": {p.reason})" if p.reason else ")"))},
                  "artifactChanges": _sarif_changes(p)} for p in d.patches if p.files]
        if fixes:
            result["fixes"] = fixes
        results.append(result)
    run: Dict = {"tool": {"driver": {"name": "tracefix", "version": __version__, "rules": rules}},
                 "results": results}
    if root is not None:
        run["originalUriBaseIds"] = {"SRCROOT": {"uri": Path(root).resolve().as_uri() + "/"}}
    json.dump({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, out, indent=2, ensure_ascii=True)
    out.write("\n")


def _from_cwd(root: Optional[str]) -> str:
    """The prefix that makes a root-relative path relative to the current directory ("" when
    the root is the current directory; absolute where no relative path exists)."""
    if root is None:
        return ""
    import os

    try:
        rel = os.path.relpath(root)
    except ValueError:  # another drive (Windows)
        rel = os.path.abspath(root)
    return "" if rel == "." else rel.replace("\\", "/").rstrip("/") + "/"


def _explain_command(entry: Entry) -> str:
    """The command that shows ``entry`` in full (a user entry needs its --knowledge folder)."""
    import shlex
    from pathlib import Path

    from tracefix.knowledge import builtin_dir

    folder = Path(entry.source).parent if entry.source else None
    if folder is None or folder.resolve() == builtin_dir().resolve():
        return f"tracefix explain {entry.id}"
    return f"tracefix explain --knowledge {shlex.quote(str(folder))} {entry.id}"


# --- plain --------------------------------------------------------------------------------
def _plain_site(label: str, site: Site, reason: str = "") -> List[str]:
    head = f"  {label}{where(site)}"
    if reason:
        head += f"  ({reason})"
    return [head, f"      {site.code}"]


def missing_crash_site(d: Diagnosis) -> str:
    """Why there is no crash site, in words that say what the log showed."""
    from tracefix.paths import is_library_path

    frames = d.traceback.frames
    if not frames:
        return "the log shows the message without its stack frames"
    if all(is_library_path(f.path) for f in frames):
        return "inside a library (no frame of your code in the traceback)"
    return "not in a file under --root"


def _tag(i: int, p: Patch) -> str:
    if p.applicability == "insufficient":
        return "not applicable"   # the error would only move on: shown, never written
    return "recommended" if i == 1 else f"alternative {i - 1}"


def _shown(d: Diagnosis, full: bool) -> Tuple[Sequence[Patch], Sequence[Tuple[int, Patch]], int]:
    """The patches shown with their diff, the alternatives shown on one line each, and how many
    (not applicable) are left out: the first screen holds the recommended patch only (``full``:
    every patch with its diff)."""
    if full or len(d.patches) <= 1:
        return d.patches, (), 0
    rest = list(enumerate(d.patches[1:], 2))
    listed = [(i, p) for i, p in rest if p.applicability != INSUFFICIENT]
    return d.patches[:1], listed, len(rest) - len(listed)


def _hidden(d: Diagnosis, full: bool) -> bool:
    """Does the short form leave something out that --all shows?"""
    return not full and (len(d.fix_sites) > 1 or len(d.patches) > 1)


def _other_places(d: Diagnosis) -> str:
    """The other fix sites' places on one line (the short form's ``also:``)."""
    shown = [where(f) for f in d.fix_sites[1:5]]
    more = len(d.fix_sites) - 1 - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _alternative_line(i: int, p: Patch, width: int = 110) -> str:
    line = f"  patch {i} ({_tag(i, p)}, {p.applicability}): {p.summary}"
    return line if len(line) <= width else line[:width - 3] + "..."


def _left_out_line(d: Diagnosis, entry: Optional[Entry], left_out: int) -> str:
    """The pointer to what the short form leaves out."""
    parts = []
    if left_out:
        parts.append(f"{left_out} more patch{'es' if left_out > 1 else ''} not applicable")
    what = "--all shows every site's reason and every patch's diff"
    if entry is not None:
        what += f"; {_explain_command(entry)} for the whole story"
    return "  (" + (", ".join(parts) + "; " if parts else "") + what + ")"


def _applicable(d: Diagnosis) -> bool:
    return any(p.applicability in (SAFE, UNSAFE) for p in d.patches)


def plain_lines(d: Diagnosis, entry: Optional[Entry], full: bool = False) -> List[str]:
    """The plain report of one diagnosis: the short form (crash site, fix site, the recommended
    patch, the alternatives one line each), or with ``full`` every site and patch."""
    exc = d.traceback
    lines = [f"{d.entry_id}: {d.title}  [confidence {d.confidence:.2f}]"]
    first = exc.message.split("\n", 1)[0]
    if len(first) > 300:
        first = first[:300] + "..."
    lines.append(f"  {exc.exc_type + ': ' if exc.exc_type else ''}{first}")
    if d.ranks:
        lines.append(f"  ranks: {', '.join(map(str, d.ranks))}")
    witness = _witness_line(d)
    if witness:
        lines.append(f"  {witness}")
    if entry is not None:
        lines += ["", f"  What happens: {_first_paragraph(entry.explanation('what'))}"]
        if full:
            lines.append(f"  Why: {_first_paragraph(entry.explanation('why'))}")
    lines.append("")
    if d.crash_site is not None:
        lines += _plain_site("crash site: ", d.crash_site)
    else:
        lines.append(f"  crash site: {missing_crash_site(d)}")
    if d.fix_sites:
        lines += _plain_site("fix site:   ", d.fix_sites[0], d.fix_sites[0].reason)
        if full:
            for f in d.fix_sites[1:5]:
                lines += _plain_site("also:       ", f, f.reason)
        elif len(d.fix_sites) > 1:
            lines.append("  also:       " + _other_places(d))
    else:
        lines.append("  fix site:   none found in the project")
    for note in d.notes:
        lines.append(f"  note: {note}")
    shown, listed, left_out = _shown(d, full)
    for i, p in enumerate(shown, 1):
        lines += ["", f"  patch {i} ({_tag(i, p)}, {p.applicability}): {p.summary}"]
        if p.reason:
            lines.append(f"    {p.applicability} because: {p.reason}")
        lines += ["    " + ln for ln in p.diff.rstrip("\n").split("\n")] if p.diff else []
    if listed:
        lines.append("")
        lines += [_alternative_line(i, p) for i, p in listed]
    if entry is not None and (full or not _applicable(d)):
        lines += ["", f"  How to fix: {_how_to_fix(entry, d)}"]
    if _hidden(d, full):
        lines += ["", _left_out_line(d, entry, left_out)]
    elif entry is not None:
        lines.append(f"  ({_explain_command(entry)} for the whole story)")
    return lines


def _unrecognized_line(t: str, m: str) -> str:
    return safe(f"unrecognized: {t}: {m.splitlines()[0] if m else ''}"[:300])


def _cut_notes(diagnoses, unrecognized, more: Sequence[int]) -> Tuple[str, str]:
    """The notes that say the list of diagnoses, of unrecognized errors, was cut ("and N more");
    "" for a list that was not."""
    return (f"and {more[0]} more diagnoses (of other errors; only the first {len(diagnoses)} are shown)"
            if more[0] else "",
            f"unrecognized: and {more[1]} more (only the first {len(unrecognized)} are shown)" if more[1] else "")


def render_plain(out: TextIO, diagnoses, unrecognized, entries: Sequence[Entry] = (), extra=None,
                 source: str = "the input", more: Sequence[int] = (0, 0), full: bool = False) -> None:
    for i, d in enumerate(diagnoses):
        if i:
            out.write("\n")
        out.write("\n".join(safe(ln) for ln in plain_lines(d, find_entry(entries, d.entry_id), full)) + "\n")
    if not diagnoses:
        out.write(f"tracefix: no known PyTorch error found in {source}\n")
    more_diagnoses, more_unrecognized = _cut_notes(diagnoses, unrecognized, more)
    if more_diagnoses:
        out.write(more_diagnoses + "\n")
    for t, m in unrecognized:
        out.write(_unrecognized_line(t, m) + "\n")
    if more_unrecognized:
        out.write(more_unrecognized + "\n")
    for k, v in (extra or {}).items():
        out.write(safe(f"{k.replace('_', ' ')}: {v}") + "\n")


# --- rich ---------------------------------------------------------------------------------
def render_rich(out: TextIO, diagnoses, unrecognized, entries: Sequence[Entry] = (), extra=None,
                color: Optional[bool] = None, source: str = "the input", more: Sequence[int] = (0, 0),
                full: bool = False) -> None:
    from rich.console import Console, Group
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.text import Text

    console = Console(file=out, force_terminal=color, no_color=(color is False), highlight=False,
                      emoji=False, markup=False)

    def excerpt(label: str, site: Site, reason: str = "") -> List:
        head = Text()
        head.append(label, style="bold")
        head.append(safe(where(site)), style="cyan")
        if reason:
            head.append("  " + safe(reason), style="italic")
        parts: List = [head]
        src = _context(site)
        if src is not None:
            text, start = src
            parts.append(Syntax(text, "python", line_numbers=True, start_line=start,
                                highlight_lines={site.cell_line if site.cell is not None else site.line},
                                theme="ansi_dark", word_wrap=True))
        else:
            parts.append(Text("    " + safe(site.code)))
        return parts

    for d in diagnoses:
        entry = find_entry(entries, d.entry_id)
        body: List = []
        exc = d.traceback
        msg = Text(safe(f"{exc.exc_type + ': ' if exc.exc_type else ''}{exc.message.splitlines()[0] if exc.message else ''}"[:400]),
                   style="red")
        body.append(msg)
        if d.ranks:
            body.append(Text(f"ranks: {', '.join(map(str, d.ranks))}", style="dim"))
        witness = _witness_line(d)
        if witness:
            body.append(Text(safe(witness), style="bold"))
        if entry is not None:
            body.append(Text(safe(_first_paragraph(entry.explanation("what")))))
            if full:
                body.append(Text(safe("Why: " + _first_paragraph(entry.explanation("why"))), style="dim"))
        if d.crash_site is not None:
            body += excerpt("crash site: ", d.crash_site)
        else:
            body.append(Text("crash site: " + missing_crash_site(d), style="yellow"))
        if d.fix_sites:
            body += excerpt("fix site:   ", d.fix_sites[0], d.fix_sites[0].reason)
            for f in d.fix_sites[1:5] if full else ():
                head = Text("also:       ", style="bold")
                head.append(safe(where(f)), style="cyan")
                head.append("  " + safe(f.reason), style="italic")
                body.append(head)
            if not full and len(d.fix_sites) > 1:
                head = Text("also:       ", style="bold")
                head.append(safe(_other_places(d)), style="cyan")
                body.append(head)
        else:
            body.append(Text("fix site: none found in the project", style="yellow"))
        for note in d.notes:
            body.append(Text("note: " + safe(note), style="yellow"))
        shown, listed, left_out = _shown(d, full)
        for i, p in enumerate(shown, 1):
            style = {"safe": "bold green", "unsafe": "bold yellow"}.get(p.applicability, "bold red")
            t = Text(f"patch {i} ({_tag(i, p)}, {p.applicability}): ", style=style)
            t.append(safe(p.summary))
            body.append(t)
            if p.reason:
                body.append(Text(f"  {p.applicability} because: " + safe(p.reason),
                                 style="yellow" if p.applicability == "unsafe" else "red"))
            if p.diff:
                body.append(Syntax(safe(p.diff), "diff", theme="ansi_dark", word_wrap=True))  # never crop a change away
        for i, p in listed:
            body.append(Text(safe(_alternative_line(i, p, console.width - 6).strip()),
                             style="green" if p.applicability == "safe" else "yellow"))
        if entry is not None and (full or not _applicable(d)):
            body.append(Text(safe("How to fix: " + _how_to_fix(entry, d))))
        if _hidden(d, full):
            body.append(Text(safe(_left_out_line(d, entry, left_out).strip()), style="dim"))
        title = Text(f"{d.entry_id}: ", style="bold")
        room = console.width - 6 - len(title)          # the panel's corners and padding take 6
        confidence = f"  [{d.confidence:.2f}]"
        head = safe(d.title)
        if len(head) + len(confidence) > room:
            confidence = ""                             # the words matter more than the number
            head = fit_words(head, room)
        title.append(head)
        title.append(confidence, style="dim")
        console.print(Panel(Group(*body), title=title, title_align="left", border_style="red"))
    if not diagnoses:
        console.print(Text(f"tracefix: no known PyTorch error found in {source}", style="yellow"))
    more_diagnoses, more_unrecognized = _cut_notes(diagnoses, unrecognized, more)
    if more_diagnoses:
        console.print(Text(more_diagnoses, style="yellow"))
    for t, m in unrecognized:
        console.print(Text(_unrecognized_line(t, m), style="dim"))
    if more_unrecognized:
        console.print(Text(more_unrecognized, style="dim"))
    for k, v in (extra or {}).items():
        console.print(Text(safe(f"{k.replace('_', ' ')}: {v}"), style="bold"))


def fit_words(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns at a word boundary, with "…" when cut."""
    if len(text) <= width:
        return text
    cut = text[:max(width - 1, 0)]
    space = cut.rfind(" ")
    if space > 0:
        cut = cut[:space]
    return cut.rstrip(" ,;:(") + "…"


def _context(site: Site, around: int = 2):
    """A few local lines around the site, read lazily (only rich output shows them)."""
    if not site.local_path:
        return None
    if site.cell is not None:
        from tracefix.notebook import read_virtual
        from pathlib import Path
        v = read_virtual(Path(site.local_path))
        hit = v.at(site.line) if v is not None else None
        if hit is None:
            return None
        cell, line = hit
        lo = max(1, line - around)
        return "\n".join(safe(x) for x in cell.raw[lo - 1:line + around]), lo
    try:
        with open(site.local_path, encoding="utf-8", errors="replace") as fh:
            lines = []
            for i, line in enumerate(fh, 1):
                if i > site.line + around:
                    break
                if i >= site.line - around:
                    lines.append(safe(line.rstrip("\r\n")))
    except OSError:
        return None
    if not lines:
        return None
    return "\n".join(lines), max(1, site.line - around)


def emit(out: TextIO, report, fmt: str, entries: Sequence[Entry] = (), extra: Optional[Dict] = None,
         color: Optional[bool] = None, source: str = "the input", root: Optional[str] = None,
         full: bool = False) -> None:
    """Write ``report`` (a pipeline.Report) in ``fmt``: rich, plain, json, quickfix, github or sarif.
    ``source`` names what was read, for "no known PyTorch error found in ..."; ``root`` is the
    project the paths are relative to (quickfix prints them relative to the current directory);
    ``full`` (--all): rich and plain show every site's reason and every patch's diff."""
    more = (report.more_diagnoses, report.more_unrecognized)
    if fmt == "json":
        render_json(out, report.diagnoses, report.unrecognized, extra, more)
    elif fmt == "quickfix":
        render_quickfix(out, report.diagnoses, root=root)
    elif fmt == "github":
        render_github(out, report.diagnoses, root=root)
    elif fmt == "sarif":
        render_sarif(out, report.diagnoses, entries, root=root)
    elif fmt == "plain":
        render_plain(out, report.diagnoses, report.unrecognized, entries, extra, source=source, more=more,
                     full=full)
    else:
        render_rich(out, report.diagnoses, report.unrecognized, entries, extra, color=color, source=source,
                    more=more, full=full)
    out.flush()
