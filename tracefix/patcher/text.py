"""Source text as bytes on disk: encoding, BOM and line endings, kept exactly as found.

The fixers work on a copy with every line ending turned into "\\n" (libcst refuses mixed endings);
``restore`` maps the fixed text back onto the original lines, so untouched lines keep their own
ending byte for byte and new lines take the file's most common one.
"""
from __future__ import annotations

import difflib
import io
import re
import tokenize
from typing import List, Optional, Tuple

from tracefix.patcher.errors import PatchError
from tracefix.pysource import module_spans
from tracefix.record import record

BOM = b"\xef\xbb\xbf"
_NEWLINE = re.compile(r"(\r\n|\r|\n)")


@record(frozen=True)
class Decoded:
    text: str          # decoded, BOM removed, line endings as in the file
    encoding: str      # codec name for encoding back ("utf-8", "latin-1", ...)
    bom: bool


def decode(data: bytes, name: str) -> Decoded:
    bom = data.startswith(BOM)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise PatchError(f"{name}: cannot tell its encoding ({exc.msg if hasattr(exc, 'msg') else exc})") from None
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    body = data[len(BOM):] if bom else data
    try:
        text = body.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise PatchError(f"{name}: cannot decode it as {encoding} ({exc})") from None
    return Decoded(text, encoding, bom)


def decode_any(data: bytes, name: str) -> Decoded:
    """:func:`decode`, or for a ``.ipynb`` its code cells as one module (tracefix.notebook)."""
    if name.lower().endswith(".ipynb"):
        from tracefix.notebook import build, load_json
        nb = load_json(data)
        if nb is None:
            raise PatchError(f"{name}: not a readable Jupyter notebook")
        return Decoded(build(nb).text, "utf-8", False)
    return decode(data, name)


def encode(text: str, encoding: str, bom: bool, name: str) -> bytes:
    try:
        data = text.encode(encoding)
    except (UnicodeEncodeError, LookupError) as exc:
        raise PatchError(f"{name}: the patched text cannot be written as {encoding} ({exc})") from None
    return (BOM + data) if bom else data


def split_lines(text: str) -> List[Tuple[str, str]]:
    """(content, ending) pairs; only \\r\\n, \\r and \\n end a line (as in Python source)."""
    if "\r" not in text:
        parts = text.split("\n")
        lines = [(part, "\n") for part in parts[:-1]]
        if parts[-1]:
            lines.append((parts[-1], ""))
        return lines
    parts = _NEWLINE.split(text)
    lines = [(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
    if parts[-1]:
        lines.append((parts[-1], ""))
    return lines


def normalize(text: str) -> str:
    return "".join(c + ("\n" if e else "") for c, e in split_lines(text))


def dominant_newline(text: str) -> str:
    counts = {nl: 0 for nl in ("\n", "\r\n", "\r")}
    for _, ending in split_lines(text):
        if ending:
            counts[ending] += 1
    best = max(counts.values())
    if best == 0:
        return "\n"
    return next(nl for nl in ("\n", "\r\n", "\r") if counts[nl] == best)


def restore(original: str, fixed_normalized: str) -> str:
    """Put ``fixed_normalized`` (\\n endings) back into ``original``'s line endings."""
    if "\r" not in fixed_normalized:
        # One kind of line ending in the file: every line gets it, so no alignment is needed.
        if "\r" not in original:
            return str(fixed_normalized)
        crlf = original.count("\r\n")
        if crlf == original.count("\r") == original.count("\n"):
            return fixed_normalized.replace("\n", "\r\n")
        if "\n" not in original:
            return fixed_normalized.replace("\n", "\r")
    old = split_lines(original)
    new = split_lines(fixed_normalized)
    newline = dominant_newline(original)
    matcher = difflib.SequenceMatcher(None, [c for c, _ in old], [c for c, _ in new], autojunk=False)
    out: List[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for k in range(j2 - j1):
            content, ending = new[j1 + k]
            if ending:
                i = i1 + k
                ending = old[i][1] if i < i2 and old[i][1] else newline
            out.append(content + ending)
    return "".join(out)


def _shift_hunk(header: str, by: int) -> str:
    m = _HUNK.match(header)
    if not m:
        return header
    old, new = int(m.group(1)), int(m.group(3))
    # difflib writes "-0,0" for an empty side: it then means "before line 0", so it moves as well
    return (f"@@ -{old + by}{m.group(2) or ''} +{new + by}{m.group(4) or ''} @@"
            + header[m.end():])


def line_at(text: str, line: int) -> str:
    lines = split_lines(text)
    return lines[line - 1][0] if 1 <= line <= len(lines) else ""


def first_difference(a: str, b: str) -> int:
    """1-based number of the first line where ``a`` and ``b`` differ."""
    la, lb = split_lines(a), split_lines(b)
    for i, (x, y) in enumerate(zip(la, lb), start=1):
        if x != y:
            return i
    return min(len(la), len(lb)) + 1


TRIM_DIFF_ABOVE = 400   # lines
_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def unified_diff(rel: str, before: str, after: str) -> str:
    a = [c + e for c, e in split_lines(before)]
    b = [c + e for c, e in split_lines(after)]
    # difflib sees only the lines between the common head and tail (and three of context), whose
    # hunks then move down by the lines cut from the head: the same diff, for a long file in far less time
    # (difflib may then place an inserted copy of a neighbouring line elsewhere: as valid a diff)
    cut = 0
    if len(a) > TRIM_DIFF_ABOVE:
        head, end, _ = changed_run(a, b)
        tail = len(a) - end
        cut = max(0, head - 3)
        a, b = a[cut:len(a) - max(0, tail - 3)], b[cut:len(b) - max(0, tail - 3)]
    out = []
    for line in difflib.unified_diff(a, b, f"a/{rel}", f"b/{rel}", lineterm="\n"):
        if cut and line.startswith("@@"):
            line = _shift_hunk(line, cut)
        if line.endswith(("\n", "\r")):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


# Below this size compiling the whole text is as cheap as finding the statements an edit touched.
COMPILE_WHOLE_BELOW = 20_000


def compile_error(old: str, new: str, name: str) -> Optional[str]:
    """Why ``new``, an edit of ``old`` (a module that compiles), does not compile; None when it does.

    Only the module-level statements holding the lines that differ, and one on each side, are
    compiled: the others are ``old``'s, and compiling one module-level statement does not depend
    on the rest, except for ``from __future__`` imports (a text naming ``__future__`` is compiled
    whole)."""
    if "\r" in old or "\r" in new:
        old, new = normalize(old), normalize(new)
    spans = None if len(new) < COMPILE_WHOLE_BELOW or "__future__" in new else module_spans(old)
    if spans:
        o, n = old.split("\n"), new.split("\n")
        a, end, _ = changed_run(o, n)
        first, last = a + 1, max(a + 1, end)  # old lines (1-based) that the edit replaced
        starts = [span[0] for span in spans]
        # from the statement before the first one touched: an indented new line may continue it
        before = [x for x in starts if x <= first][-2:]
        s = before[0] if len(before) == 2 else None
        if s is not None:
            # ... to the one after the first one left alone: a new line may decorate it
            after = [x for x in starts if x > last][1:2]
            e = after[0] if after else len(o) + 1
            new = "\n" * (s - 1) + "\n".join(n[s - 1:e - 1 + len(n) - len(o)]) + "\n"
    try:
        compile(new, name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return str(exc)
    return None


def compiles(old: str, new: str, name: str) -> bool:
    return compile_error(old, new, name) is None


def changed_run(old: List[str], new: List[str]) -> Tuple[int, int, int]:
    """The one run of lines an edit replaced (between the common head and tail): its first index,
    its end in ``old`` and its end in ``new``."""
    a = 0
    while a < len(old) and a < len(new) and old[a] == new[a]:
        a += 1
    b = 0
    while b < len(old) - a and b < len(new) - a and old[-1 - b] == new[-1 - b]:
        b += 1
    return a, len(old) - b, len(new) - b


def merge_edit(original: str, edited: str, other: str) -> Optional[str]:
    """``edited`` (an edit of ``original``) with ``other``'s edit of ``original`` applied too;
    None when the two edits touch the same lines, or adjacent ones where one only inserts (its
    place next to the other edit is then ambiguous)."""
    base = original.splitlines(keepends=True)
    mine, theirs = edited.splitlines(keepends=True), other.splitlines(keepends=True)
    if mine == base:
        return other
    edits = []
    for lines in (mine, theirs):
        a, e, n = changed_run(base, lines)
        edits.append((a, e, lines[a:n]))
    (a1, e1, _), (a2, e2, _) = edits
    apart = e2 < a1 or e1 < a2
    touching = (e2 == a1 or e1 == a2) and a1 < e1 and a2 < e2  # two replaced runs, side by side
    if not (apart or touching):
        return None
    out, at = [], 0
    for a, e, new in sorted(edits, key=lambda t: t[0]):
        out += base[at:a] + new
        at = e
    return "".join(out + base[at:])
