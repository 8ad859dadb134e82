"""Jupyter notebooks as Python modules: read one as a module, find a cell's line in the file, write
cells back.

A notebook is read as ONE virtual module: its code cells in order, each preceded by a marker
comment line (``# %% tracefix cell 3``).  IPython-only lines (``%magic``, ``!shell``,
``x = !cmd``, ``obj?``, non-Python ``%%`` cells) become ``pass`` placeholders so that ``ast``
parses the rest, and line counts stay as IPython numbers them.  The locator and the patcher then
work on that text unchanged (cross-cell names, classes, imports); :class:`Virtual` maps virtual
lines to (cell, line in cell).  Which cell a traceback frame ran in is :mod:`tracefix.cellframes`;
a diagnosis's sites named by their cells, :mod:`tracefix.cellsites`.

Standard library only (``json``): the CLI never imports nbformat or IPython.
"""
from __future__ import annotations

import ast
import difflib
import json
import re
import stat
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from tracefix.record import record

MARK = "# %% tracefix cell "
_MARK_RX = re.compile(r"^# %% tracefix cell (\d+)$")
PLACEHOLDER = "pass  # tracefix: IPython-only line"
MAX_NOTEBOOKS = 200
MAX_BYTES = 20_000_000
# Cell magics whose body is still Python (IPython runs it as such, numbering lines from the magic).
_PY_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug", "python", "python3"}
_LINE_MAGIC_RX = re.compile(r"^\s*(?:[%!]|[\w.,\s\[\]]+=\s*[%!])")
_HELP_RX = re.compile(r"^\s*[\w.]+\?\??\s*$|^\s*\?\??[\w.]+\s*$")


@record(frozen=True)
class Cell:
    index: int                       # 0-based position in the notebook's cell list (all cell types)
    execution_count: Optional[int]   # as saved in the file (None when never run or not saved)
    ordinal: int                     # 1-based position among non-empty code cells (a fresh run's In [N])
    start: int                       # virtual line of the cell's first source line
    lines: Tuple[str, ...]           # the virtual lines of the cell (placeholders in place of magics)
    raw: Tuple[str, ...]             # the cell's own source lines, as saved


@record(frozen=True)
class Virtual:
    text: str
    cells: Tuple[Cell, ...]

    def at(self, vline: int) -> Optional[Tuple[Cell, int]]:
        """(cell, 1-based line within the cell) for a virtual line, or None (a marker line)."""
        for c in self.cells:
            if c.start <= vline < c.start + max(len(c.lines), 1) and c.lines:
                return c, vline - c.start + 1
        return None


def _source_lines(source) -> List[str]:
    text = "".join(source) if isinstance(source, list) else (source or "")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    return text.split("\n") if text else []


def _parses(lines: Sequence[str]) -> bool:
    try:
        ast.parse("\n".join(lines) + "\n")
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def neutralise(lines: Sequence[str]) -> List[str]:
    """The cell's lines with IPython-only syntax replaced by placeholders (same line count)."""
    lines = list(lines)
    if _parses(lines):
        return lines
    out = list(lines)
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        name = lines[first].lstrip()[2:].split(None, 1)[0] if lines[first].lstrip()[2:].strip() else ""
        out[first] = PLACEHOLDER
        if name not in _PY_CELL_MAGICS:       # %%bash, %%writefile, %%html...: not Python at all
            return ["# tracefix: not Python" if ln.strip() else ln for ln in out]
    for i, ln in enumerate(out):
        if i != first or not ln.lstrip().startswith("%%"):
            if ln.strip() and (_LINE_MAGIC_RX.match(ln) or _HELP_RX.match(ln)) and ln != PLACEHOLDER:
                out[i] = _indent(ln) + PLACEHOLDER
    if _parses(out):
        return out
    # still not Python (a typo, a half-written cell): keep its line count, hide it from ast
    return ["# tracefix: not Python" if ln.strip() else ln for ln in lines]


def load_json(data: bytes) -> Optional[dict]:
    try:
        nb = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return None
    return nb


def build(nb: dict) -> Virtual:
    """The virtual module of a parsed notebook (nbformat 4 layout)."""
    out: List[str] = []
    cells: List[Cell] = []
    ordinal = 0
    for index, cell in enumerate(nb.get("cells") or []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        raw = _source_lines(cell.get("source"))
        if any(ln.strip() for ln in raw):
            ordinal += 1
        count = cell.get("execution_count")
        out.append(f"{MARK}{index + 1}")
        virt = neutralise(raw)
        cells.append(Cell(index=index, execution_count=count if isinstance(count, int) else None,
                          ordinal=ordinal, start=len(out) + 1, lines=tuple(virt), raw=tuple(raw)))
        out.extend(virt)
    return Virtual("\n".join(out) + "\n", tuple(cells))


_ANSI_RX = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_TRACEBACK_HEAD = "Traceback (most recent call last)"


def error_log(data: bytes) -> Optional[bytes]:
    """A saved notebook read as a log: the traceback of each error output (as IPython showed it,
    without colours), and the streams that hold a Python traceback (a ``!python train.py`` cell),
    in the cells' order; None when ``data`` is not a notebook."""
    nb = load_json(data)
    if nb is None:
        return None
    parts = []
    for cell in nb["cells"]:
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for out in outputs if isinstance(outputs, list) else ():
            text = _output_text(out) if isinstance(out, dict) else ""
            if text:
                parts.append(_ANSI_RX.sub("", text).rstrip("\n") + "\n")
    return "\n".join(parts).encode("utf-8", "replace")


def _output_text(out: dict) -> str:
    """The log text of one output: an error's traceback, a stream holding a traceback, else ''."""
    if out.get("output_type") == "error":
        tb = out.get("traceback")
        if isinstance(tb, list) and tb:
            return "\n".join(t for t in tb if isinstance(t, str))
        return f"{out.get('ename') or 'Error'}: {out.get('evalue') or ''}"
    if out.get("output_type") == "stream":
        text = out.get("text")
        text = "".join(t for t in text if isinstance(t, str)) if isinstance(text, list) else text
        return text if isinstance(text, str) and _TRACEBACK_HEAD in text else ""
    return ""


def from_sources(sources: Sequence[Tuple[int, str]]) -> dict:
    """A notebook dict from (execution count, source) pairs: what a kernel's history holds."""
    return {"cells": [{"cell_type": "code", "execution_count": n, "metadata": {}, "outputs": [],
                       "source": src} for n, src in sources], "metadata": {}, "nbformat": 4,
            "nbformat_minor": 5}


_CACHE: Dict[Tuple[str, int, int], Optional[Virtual]] = {}


def read_virtual(path: Path) -> Optional[Virtual]:
    """The virtual module of a ``.ipynb`` file (cached by path, size and mtime), or None."""
    try:
        st = Path(path).stat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key not in _CACHE:
            if len(_CACHE) > 64:
                _CACHE.clear()
            nb = load_json(Path(path).read_bytes())
            _CACHE[key] = None if nb is None else build(nb)
        return _CACHE[key]
    except OSError:
        return None


def read_text(path: Path) -> Tuple[Optional[str], Optional[str]]:
    """Like :func:`tracefix.pysource.read_text` for a notebook: (virtual text, None) or (None, why)."""
    v = read_virtual(path)
    if v is None:
        return None, "is not a readable Jupyter notebook"
    return v.text, None


# --- positions in the file --------------------------------------------------------------------
def json_position(path: Path, cell_index: int, cell_line: int, col: int) -> Tuple[int, int]:
    """(line, 0-based column) in the .ipynb file's text of a cell's source line and column: the
    column counts the JSON string's indentation, opening quote and escapes (for editors)."""
    line = json_line(path, cell_index, cell_line)
    try:
        raw = Path(path).read_text(encoding="utf-8-sig").split("\n")[line - 1]
    except (OSError, UnicodeDecodeError, IndexError):
        return line, col
    whole = _string_source(raw)
    if whole is not None:       # the cell's source as one string: the line starts inside it
        source, start = whole, _line_offset(whole, cell_line)
    else:
        try:
            source, start = json.loads(raw.strip().rstrip(",")), 0
        except ValueError:
            return line, col
    if not isinstance(source, str):
        return line, col
    prefix = json.dumps(source[:start + col], ensure_ascii=raw.isascii())[1:-1]
    value = raw.index('"', raw.index(":") + 1) if whole is not None else raw.index('"')
    return line, value + 1 + len(prefix)


_STRING_SOURCE_RX = re.compile(r'^\s*"source":\s*("(?:[^"\\]|\\.)*")\s*,?\s*$')
_EOL_RX = re.compile(r"\r\n|\r|\n")


def _string_source(raw: str) -> Optional[str]:
    """The value of a ``"source": "..."`` file line (a cell's source saved as one string), or None."""
    m = _STRING_SOURCE_RX.match(raw)
    if not m:
        return None
    try:
        return json.loads(m.group(1))
    except ValueError:
        return None


def _line_offset(text: str, line: int) -> int:
    """Where the 1-based ``line`` of ``text`` starts (any line ending)."""
    pos = 0
    for _ in range(line - 1):
        m = _EOL_RX.search(text, pos)
        if m is None:
            break
        pos = m.end()
    return pos


def json_line(path: Path, cell_index: int, cell_line: int) -> int:
    """The line of the .ipynb file that holds a cell's source line (for editors), else 1: the
    line's own JSON string, or the ``"source"`` line when the cell's source is one string."""
    try:
        lines = Path(path).read_text(encoding="utf-8-sig").split("\n")
    except (OSError, UnicodeDecodeError):
        return 1
    v = read_virtual(Path(path))
    want = next((c.raw[cell_line - 1] for c in (v.cells if v else ()) if c.index == cell_index
                 and 1 <= cell_line <= len(c.raw)), None)

    def holds(i: int) -> bool:      # the file line i (0-based) is that source line as a JSON string
        text = lines[i].strip().rstrip(",") if 0 <= i < len(lines) else ""
        try:
            return want is not None and json.loads(text).rstrip("\n") == want
        except ValueError:
            return False

    def holds_whole(i: int) -> bool:   # the file line i is a "source" string whose line cell_line is it
        whole = _string_source(lines[i])
        got = _source_lines(whole) if whole is not None else []
        return want is not None and len(got) >= cell_line and got[cell_line - 1] == want
    seen = -1
    for i, ln in enumerate(lines):   # nbformat's layout: sorted keys, one source line per file line
        if re.match(r'^\s*"cell_type":', ln):
            seen += 1
        if seen == cell_index and re.match(r'^\s*"source":\s*\[\s*$', ln) and holds(i + cell_line):
            return i + 1 + cell_line
        if seen == cell_index and holds_whole(i):
            return i + 1
    # another layout: the line, when it is unique
    hits = [i for i in range(len(lines)) if holds(i) or holds_whole(i)]
    return hits[0] + 1 if len(hits) == 1 else 1


# --- writing back -----------------------------------------------------------------------------------
class LayoutError(ValueError):
    """The notebook cannot be rewritten without changing bytes outside the patched cells."""


def _dump(nb: dict, indent, ensure_ascii: bool, separators, final_nl: str, crlf: bool) -> str:
    text = json.dumps(nb, indent=indent, ensure_ascii=ensure_ascii, separators=separators) + final_nl
    return text.replace("\n", "\r\n") if crlf else text


def _layout(raw: str, nb: dict):
    """The json.dumps settings that reproduce raw byte for byte, or LayoutError."""
    crlf = "\r\n" in raw
    body = raw.replace("\r\n", "\n") if crlf else raw
    final_nl = body[len(body.rstrip("\n")):]
    lines = body.split("\n")
    indents = []
    if len(lines) > 1:
        second = lines[1]
        indents.append(len(second) - len(second.lstrip(" ")) or None)
    indents += [1, 2, 4, None]
    for indent in dict.fromkeys(indents):
        seps = [None] if indent is not None else [(", ", ": "), (",", ":"), (",", ": ")]
        for separators in seps:
            for ensure_ascii in (False, True):
                if _dump(nb, indent, ensure_ascii, separators, final_nl, crlf) == raw:
                    return indent, ensure_ascii, separators, final_nl, crlf
    raise LayoutError("its JSON layout cannot be reproduced exactly")


def write_back(data: bytes, old_text: str, new_text: str) -> bytes:
    """The notebook ``data`` with the cells whose virtual text changed from old_text to new_text.

    Only ``source`` of changed cells is replaced (list-of-lines or string form kept); outputs,
    metadata, key order, indent, escaping and final newline stay as they were.
    """
    bom = data.startswith(b"\xef\xbb\xbf")
    raw = data.decode("utf-8-sig")
    nb = load_json(data)
    if nb is None:
        raise LayoutError("it is not a readable notebook")
    layout = _layout(raw, nb)
    v = build(nb)
    if v.text != old_text:
        raise LayoutError("it changed since the patch was made")
    new_cells = _split(new_text, v)
    for cell, new_lines in zip(v.cells, new_cells):
        if tuple(new_lines) == cell.lines:
            continue
        src = _restore(cell, new_lines)
        node = nb["cells"][cell.index]
        text = "\n".join(src)
        if isinstance(node.get("source"), list):
            parts = [ln + "\n" for ln in src]
            if parts and not _ends_nl(node["source"]):
                parts[-1] = parts[-1][:-1]
            node["source"] = parts
        else:
            node["source"] = text + ("\n" if _ends_nl(node.get("source") or "") else "")
    out = _dump(nb, *layout).encode("utf-8")
    return (b"\xef\xbb\xbf" + out) if bom else out


def _ends_nl(source) -> bool:
    text = "".join(source) if isinstance(source, list) else source
    return text.endswith("\n")


def _split(text: str, v: Virtual) -> List[List[str]]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    marks = [i for i, ln in enumerate(lines) if _MARK_RX.match(ln)]
    want = [f"{MARK}{c.index + 1}" for c in v.cells]
    if [lines[i] for i in marks] != want:
        raise LayoutError("the patch moved code across cells")
    out: List[List[str]] = []
    for k, i in enumerate(marks):
        end = marks[k + 1] if k + 1 < len(marks) else len(lines)
        body = lines[i + 1:end]
        if k == 0 and i > 0:        # lines put above the first cell (an import) join the first cell
            body = lines[:i] + body
        out.append(body)
    return out


def _restore(cell: Cell, new_lines: Sequence[str]) -> List[str]:
    """New virtual lines of a cell -> its source: unchanged lines keep the original (magics too)."""
    sm = difflib.SequenceMatcher(None, list(cell.lines), list(new_lines), autojunk=False)
    out: List[str] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            out.extend(cell.raw[i1:i2])
        else:
            for ln in new_lines[j1:j2]:
                if PLACEHOLDER.split("  ", 1)[1] in ln or ln.lstrip().startswith("# tracefix: not Python"):
                    raise LayoutError("the patch touches an IPython-only line")
                out.append(ln)
    return out


def cell_sources(old_text: str, new_text: str, data: bytes) -> List[Tuple[Cell, str, str]]:
    """(cell, old source, new source) for every cell a virtual-text patch changes."""
    nb = load_json(data)
    if nb is None:
        return []
    v = build(nb)
    if v.text != old_text:
        return []
    out = []
    for cell, new_lines in zip(v.cells, _split(new_text, v)):
        if tuple(new_lines) != cell.lines:
            out.append((cell, "\n".join(cell.raw), "\n".join(_restore(cell, new_lines))))
    return out


def cell_diff(rel: str, data: bytes, old_text: str, new_text: str) -> Optional[str]:
    """A unified diff per changed cell, its header naming the cell; None when it cannot be made."""
    try:
        changes = cell_sources(old_text, new_text, data)
    except LayoutError:
        return None
    if not changes:
        return None
    out = []
    for cell, old, new in changes:
        count = f" In [{cell.execution_count}]" if cell.execution_count is not None else ""
        name = f"{rel} (cell {cell.index + 1}{count})"
        a = [ln + "\n" for ln in old.split("\n")]
        b = [ln + "\n" for ln in new.split("\n")]
        out += list(difflib.unified_diff(a, b, f"a/{name}", f"b/{name}", lineterm="\n"))
    return "".join(out)
