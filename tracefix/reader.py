"""Find tracebacks and bare error lines in a log: bytes in, ``Traceback`` records out.

Bounded: the input is read in chunks.  A stream (a pipe, a small file) has its first MiBs and
its final chunk parsed line by line, and a chunk in the middle only when it, or a neighbour,
holds a traceback header (one ``bytes.find`` pass, so a GB log costs about one memory scan).
A big regular file is not streamed: ``scan`` finds the headers by offset (in two processes
where it can) and only the first and last chunk and a chunk around each header are read.  A
message pasted with no traceback is therefore found in a small log, and at the head or the end
of a big one.  Knows logs, knows nothing of PyTorch: the caller passes a ``bare`` predicate for
messages pasted without a traceback.

Witness evidence (``tracefix-witness-data: {json}``, printed by tracefix's interpreter hook right
after Python's traceback) is attached to the exception that precedes it in the same rank's
lines (the last one of a chain), when its exception type agrees; a block with no such exception
before it, with broken or truncated JSON, or of an unknown version is ignored.  The summary line
(``tracefix-witness: ...``) only ends an exception message; the data line carries everything.
"""
from __future__ import annotations

import codecs
import os
import re
import stat
from typing import BinaryIO, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from tracefix import scan
from tracefix.hooks import WITNESS_DATA_MARK, WITNESS_MARK
from tracefix.record import record, field, replace
from tracefix.records import Evidence, EvidenceSite, Frame, Traceback

CHUNK = 1 << 20
FULL_SCAN = 2 << 20          # always parse this much of the head: small pastes get every heuristic
SEEK_MIN = 32 << 20          # a regular file this big is searched by offset, not streamed
MAX_EXTEND = 32 << 20        # how far past its range a file read follows an open traceback
MAX_LINE = 8192              # longer lines are cut: a 1 GB progress line must not reach the regexes
MAX_CARRY = 1 << 20          # an unterminated line longer than this keeps only its tail
MAX_FRAMES_HEAD, MAX_FRAMES_TAIL = 40, 200   # a 10,000-frame stack keeps both ends
MAX_MESSAGE_LINES, MAX_MESSAGE_CHARS = 30, 8192
HEADER = "Traceback (most recent call last)"
# One needle: each costs a pass over every chunk.  "most recent call last" also survives a coloured
# "Traceback" word; an anomaly block always precedes a traceback, and neighbours are parsed too.
NEEDLES = (b"most recent call last",)

# --- line cleaning -------------------------------------------------------------------------
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?|\x9b[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_RANK = re.compile(
    r"^\s*(?:\[(?:rank|default|trainer)(?P<r1>\d+)\]:?|\[(?P<r2>\d+),\d+\]<std(?:err|out)>:|(?P<r3>\d{1,4}):(?=\s{0,3}(?:Traceback|File \"|\w+(?:Error|Exception)\b)))\s?"
)
_TIMESTAMP = re.compile(
    r"^\s*(?:\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?"
    r"(?:\s*[-|]?\s*(?:\[?[A-Za-z_][\w.]*\]?\s*[-|:]\s*)?(?:\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?)\s*[-|:]?)?\s?"
    r"|[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+\S+:\d+\]\s?"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.<>]*:)"
)
_PYTEST_E = re.compile(r"^E {1,8}")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_FENCED_LINE = re.compile(r"^\s*(```|~~~)(?P<inner>.*\S.*?)\1\s*$")   # ```RuntimeError: ...``` on one line
# e-mail/markdown quoting: any run of ">" markers (">", "> >", ">>"), then the space that belongs to it
_QUOTE = re.compile(r"^[ \t]*(?P<marks>>(?:[ \t]*>)*)(?P<space>[ \t]?)")

# a line-number column (`cat -n`, `grep -n`, `nl`, an editor or pager): "    11\t", "11: ", "  11 | "
_NUMBERED = re.compile(r"^ *(\d{1,9})(?:(\t)|(:)(?!\d) ?| ?([|│]) ?)")
_CONTEXT = 2                 # lines either side that tell a numbering from a number in the output

# --- structure ------------------------------------------------------------------------------
_FILE = re.compile(r'^(?P<ind>\s*)File "(?P<path>[^"]{1,1000})", line (?P<line>\d+)(?:, in (?P<func>.*))?$')
_IPY_FILE = re.compile(r"^(?P<ind>\s*)File (?P<path>[^\s\"].{0,1000}?):(?P<line>\d+), in (?P<func>.*)$")
_IPY_CELL = re.compile(r"^(?P<ind>\s*)(?:Cell|Input) In ?\[(?P<cell>[\d ]*)\], line (?P<line>\d+)(?:, in (?P<func>.*))?$")
_IPY_OLD = re.compile(r"^(?P<ind>\s*)(?P<path>(?:<ipython-input-[\w-]+>|[~/.A-Za-z]\S*\.py|[A-Za-z]:\\.{1,1000}?\.py)) in (?P<func>[\w<>.]+|<cell line: \d+>)\(.*$")
_IPY_ARROW = re.compile(r"^-*> ?(?P<line>\d+)\s(?P<code>.*)$")
_IPY_CONTEXT = re.compile(r"^\s*\d+\s")
_IPY_RULE = re.compile(r"^-{20,}$")
_IPY_HEAD = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)\s{2,}Traceback \(most recent call last\)")
_RICH_FRAME = re.compile(r"^[│|┃]\s*(?P<path>\S.{0,1000}?):(?P<line>\d+) in (?P<func>\S+)\s*[│|┃]?\s*$")
_RICH_CODE = re.compile(r"^[│|┃]\s*❱\s*(?P<line>\d+)\s*[│|┃]\s?(?P<code>.*?)\s*[│|┃]?\s*$")
_RICH_END = re.compile(r"^\s*╰")
_PYTEST_FRAME = re.compile(r"^(?P<path>[^\s:][^:]{0,1000}\.py):(?P<line>\d+):(?: in (?P<func>\S+))?(?:\s+\w+)?$")
_PYTEST_CODE = re.compile(r"^>\s+(?P<code>\S.*)$")
_CARET = re.compile(r"^\s*[~^]+\s*$")
_EXC = re.compile(
    r"^(?P<ind>\s*)(?P<type>(?:[A-Za-z_]\w*(?:\.|::))*(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Warning)|Error|StopIteration))"
    r"(?::\s?(?P<msg>.*)|\s*)$"
)
_CHAIN = re.compile(r"During handling of the above exception|The above exception was the direct cause")
_ANOMALY = re.compile(
    r"(?:Error detected in (?P<node>[\w:.]+)\.\s*)?(?:Previous calculation was induced by (?P<prev>[\w:.]+)\.\s*)?"
    r"Traceback of forward call that (?:caused the error|induced the previous calculation):?"
)
_WORDY = re.compile(r"[A-Za-z]{2}")   # a message continuation line has words, not binary debris
# how a training loop reports progress ("step 1", "epoch 3 loss 0.52", "loss: 0.5", "iter=100")
_PROGRESS = re.compile(r"^[A-Za-z_][\w-]*(?:[ \t]+|[ \t]*=[ \t]*|:[ \t]+)[-+]?\.?\d[\w.%/+-]*[,:;]?(?:[ \t]|$)")
_SENTENCE_END = (".", "!", "?")
_REPEATED = re.compile(r"^\s*\[Previous line repeated \d+ more times?\]\s*$")
# a new log record, not more of an exception's message: timestamps, glog, banners, progress bars,
# and the lines tools print as a run ends (wandb, logging's default format, Slurm, "Exception ignored")
_LOGLINE = re.compile(r"^\s*(?:\[?\d{4}-\d{2}-\d{2}|[IWEF]\d{4} \d{2}:|=====|\*{5}|Epoch\b|\d+%\||"
                      r"wandb:|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):[\w.]*:|srun:|slurmstepd:|Exception ignored in)")
_FLAT_SPLIT = re.compile(r'(?<!\s)\s+(?=File "[^"]+", line \d+)')   # lookbehind: linear on long blank runs
_FLAT_EXC = re.compile(r"\s(?=(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception): )")
_FLAT_CODE = re.compile(r'^(File "[^"]+", line \d+, in \S+)\s+(.+)$')
# What a runner raises in its own process after its child failed: a notebook runner's message
# quotes the cell and the kernel's traceback, which is read as a record of its own; torchrun's
# names the failed ranks, whose tracebacks they printed themselves.  The wrapper adds nothing.
_RUNNER_WRAPPERS = ("nbclient.exceptions.CellExecutionError", "nbconvert.preprocessors.execute.CellExecutionError",
                    "papermill.exceptions.PapermillExecutionError",
                    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError")
# The same, where the wrapper's type is a general one: (type, the file its innermost frame is in).
# `accelerate launch` raises CalledProcessError for the script it ran, which printed its own error,
# from a RuntimeError whose message is the tail of that output: the cause is a copy (cut short
# when the tail is), dropped with the wrapper.
_RUNNER_WRAPPER_FRAMES = (("subprocess.CalledProcessError", "accelerate/commands/launch.py"),)
# a message of caret marks only (`RuntimeError: ^^^^`): a quoted traceback cut after a caret line
_CARETS = re.compile(r"[\s^~]*")


def _quoted_text(tb: Traceback) -> str:
    """The lines a traceback printed (frames, their code, the exception line), to tell a later
    fragment of a copy of it (see _RankParser._emit)."""
    lines = [f'File "{f.path}", line {f.line}, in {f.func}\n{f.code or ""}' for f in tb.frames]
    return "\n".join(lines + [f"{tb.exc_type}: {tb.message}"])


def _runner_wrapper(exc_type: Optional[str], frames: List[Frame]) -> bool:
    if exc_type in _RUNNER_WRAPPERS:
        return True
    where = frames[-1].path.replace("\\", "/") if frames else ""
    return any(exc_type == t and where.endswith(f) for t, f in _RUNNER_WRAPPER_FRAMES)


def clean_line(text: str) -> str:
    """Drop terminal escapes and control characters; cut overlong lines."""
    if len(text) > MAX_LINE:
        text = text[:MAX_LINE]
    if "\x1b" in text or "\x9b" in text:
        text = _ANSI.sub("", text)
    return _CONTROL.sub("", text).rstrip()


def _unquote(text: str, block: Optional[Tuple[int, bool]]) -> Tuple[str, Optional[Tuple[int, bool]]]:
    """``text`` without its quote markers, and the quoting of the traceback block being read
    ((depth, whether a space follows the markers), set by a quoted header line).  Inside a block
    the space after the markers is stripped only if the header had one, so that every line keeps
    its indentation relative to the others (frames vs. their code lines)."""
    m = _QUOTE.match(text)
    if m is None:
        return text, (block if block is not None and not text.strip() else None)   # an unquoted line ends it
    depth = m.group("marks").count(">")
    if HEADER in text:
        block = (depth, bool(m.group("space")))
    if block is not None and block == (depth, False):
        return text[m.end("marks"):], block
    return text[m.end():], block


def _number(line: str) -> Optional[Tuple[int, str]]:
    """(number, style) of a line-number prefix, or None."""
    m = _NUMBERED.match(line)
    return None if m is None else (int(m.group(1)), m.group(2) or m.group(3) or m.group(4))


def _numbering(lines: Sequence[str], k: int) -> int:
    """Length of the line-number prefix of ``lines[k]``, or 0: a prefix counts only when it is
    one of three consecutive lines numbered n, n+1, n+2 in the same style (a number that is part
    of the output, or a rank label such as srun's "0: ", repeats or stands alone)."""
    line = lines[k]
    if not line.lstrip(" ")[:1].isdigit():    # (cheaper than the match, on most lines)
        return 0
    m = _NUMBERED.match(line)
    if m is None:
        return 0
    n, style = int(m.group(1)), m.group(2) or m.group(3) or m.group(4)

    def has(j: int) -> bool:
        return 0 <= j < len(lines) and _number(lines[j]) == (n + j - k, style)

    if has(k - 1) and (has(k - 2) or has(k + 1)) or has(k + 1) and has(k + 2):
        return m.end()
    return 0


def _in_context(windows: Iterable[Tuple[int, Optional[bytes]]], held: List[str]
                ) -> Iterator[Tuple[int, Optional[List[str]], int, int]]:
    """``(number of lines[lo], lines, lo, hi)`` per parsed chunk: ``lines[lo:hi]`` are to be read,
    with up to ``_CONTEXT`` lines either side for ``_numbering`` (a chunk's last lines wait in
    ``held`` for the next chunk, so results do not depend on where chunks were cut).
    ``(n, None, 0, 0)`` marks a gap."""
    before: List[str] = []
    held_no = 0
    for first_line, chunk in windows:
        if chunk is None:
            if held:
                yield held_no, before + held, len(before), len(before) + len(held)
            before, held[:] = [], []
            yield first_line, None, 0, 0
            continue
        start = held_no if held else first_line
        lines = _lines(chunk)
        lines[:0] = before + held        # (in place: no second list of a chunk's lines)
        lo = len(before)
        hi = max(lo, len(lines) - _CONTEXT)
        if hi > lo:
            yield start, lines, lo, hi
        before, held[:] = lines[max(0, hi - _CONTEXT):hi], lines[hi:]
        held_no = start + hi - lo
        del lines          # not alive while the next chunk is read (peak memory)
    if held:
        yield held_no, before + held, len(before), len(before) + len(held)


def split_prefix(text: str) -> Tuple[Optional[int], str]:
    """Strip rank, timestamp/logger and pytest prefixes; return (rank, rest)."""
    rank, text, _stamped = _split_prefix(text)
    return rank, text


def _split_prefix(text: str) -> Tuple[Optional[int], str, bool]:
    """(rank, rest, whether a timestamp/logger prefix was stripped)."""
    rank, stamped = None, False
    m = _RANK.match(text)
    if m:
        rank = int(m.group("r1") or m.group("r2") or m.group("r3"))
        text = text[m.end():]
    m = _TIMESTAMP.match(text)
    if m and m.end() > 0:
        text, stamped = text[m.end():], True
        m = _RANK.match(text)
        if m and rank is None:
            rank = int(m.group("r1") or m.group("r2") or m.group("r3"))
            text = text[m.end():]
    return rank, text, stamped


_WITNESS_MAX_SITES = 16


def parse_evidence(text: str) -> Optional[Evidence]:
    """The Evidence of one ``tracefix-witness-data: {json}`` line (prefixes already stripped);
    None for anything malformed: truncated JSON, another version, missing fields."""
    got = _parse_witness(text)
    return got[0] if got else None


def _parse_witness(text: str) -> Optional[Tuple[Evidence, str]]:
    """(evidence, the exception type it explains) of a data line, or None."""
    text = text.strip()
    if not text.startswith(WITNESS_DATA_MARK):
        return None
    raw = text[len(WITNESS_DATA_MARK):].strip()
    import json

    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("v") != 1:
        return None
    kind, summary, sites = data.get("kind"), data.get("summary"), data.get("sites", [])
    if not isinstance(kind, str) or not isinstance(summary, str) or not isinstance(sites, list):
        return None
    out = []
    for item in sites[:_WITNESS_MAX_SITES]:
        if not isinstance(item, dict):
            return None
        role, path, line = item.get("role"), item.get("path"), item.get("line")
        if not isinstance(role, str) or not isinstance(path, str) or type(line) is not int or line < 0:
            return None
        fields = [item.get(k, "") for k in ("code", "detail", "module")]
        out.append(EvidenceSite(role, path, line, *(f if isinstance(f, str) else str(f) for f in fields)))
    exc = data.get("exc")
    return Evidence(kind, clean_line(summary), tuple(out), raw), exc if isinstance(exc, str) else ""


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


# --- decoding --------------------------------------------------------------------------------
def _sniff(head: bytes) -> Optional[str]:
    if head.startswith(codecs.BOM_UTF32_LE) or head.startswith(codecs.BOM_UTF32_BE):
        return "utf-32"
    sample = head[:4096]
    if head.startswith(codecs.BOM_UTF16_LE) or head.startswith(codecs.BOM_UTF16_BE):
        # A BOM followed by text without NUL bytes is UTF-8 garbage that happens to start with FF FE.
        zeros = sample[3::2].count(0) if head.startswith(codecs.BOM_UTF16_LE) else sample[2::2].count(0)
        if len(sample) < 64 or zeros > 0.2 * (len(sample) // 2):
            return "utf-16"
        return None
    if len(sample) >= 8:
        even, odd = sample[0::2].count(0), sample[1::2].count(0)
        half = len(sample) // 2
        if odd > 0.4 * half and even < 0.05 * half:
            return "utf-16-le"
        if even > 0.4 * half and odd < 0.05 * half:
            return "utf-16-be"
    return None


def _utf8_chunks(stream: BinaryIO, size: int) -> Iterator[bytes]:
    """Raw chunks, transcoded to UTF-8 when the input is UTF-16/32 (PowerShell 5 redirection)."""
    read = getattr(stream, "read1", None) or stream.read
    first = b""
    while len(first) < 4096:
        try:
            piece = read(size)
        except (OSError, ValueError):
            piece = b""
        if not piece:
            break
        first += piece
        if len(first) >= 4:
            break
    encoding = _sniff(first)
    if encoding is None:
        if first:
            yield first
        while True:
            try:
                piece = read(size)
            except (OSError, ValueError):  # interrupted or closed stdin: diagnose what we have
                return
            if not piece:
                return
            yield piece
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    piece = first
    while piece:
        text = decoder.decode(piece)
        if text.startswith("\ufeff"):
            text = text[1:]
        yield text.encode("utf-8", "replace")
        try:
            piece = read(size)
        except (OSError, ValueError):
            break
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail.encode("utf-8", "replace")


class _Chunk:
    """``head + body[start:end]``: a run of whole lines, joined only when it is parsed.

    Most chunks of a big log are skipped after a needle test; keeping the carried partial line
    apart from the freshly read block spares two copies of every byte.  (A memory-mapped file
    was measured slower than read(): page faults cost more than the copies.)
    """

    __slots__ = ("head", "body", "start", "end")

    def __init__(self, head: bytes, body, start: int, end: int):
        self.head, self.body, self.start, self.end = head, body, start, end

    def __len__(self) -> int:
        return len(self.head) + self.end - self.start

    def has(self, needle: bytes) -> bool:
        if self.body.find(needle, self.start, self.end) >= 0 or needle in self.head:
            return True
        k = len(needle) - 1   # a needle straddling the seam
        return bool(self.head) and k > 0 and needle in self.head[-k:] + self.body[self.start:self.start + k]

    def join(self) -> bytes:
        body = self.body
        if not self.head and self.start == 0 and self.end == len(body) and isinstance(body, bytes):
            return body
        return self.head + body[self.start:self.end]


def _last_eol(buf, start: int, end: int) -> int:
    """Index of the last line end in buf[start:end], not a "\\r" that may be half of "\\r\\n"."""
    cut = max(buf.rfind(b"\n", start, end), buf.rfind(b"\r", start, end))
    if 0 <= cut == end - 1 and buf[cut] == 13:
        cut = max(buf.rfind(b"\n", start, cut), buf.rfind(b"\r", start, cut))
    return cut


def _line_chunks(pieces: Iterable[bytes]) -> Iterator[_Chunk]:
    """Chunks cut at line ends (\\n or \\r), so no line is split between two of them."""
    carry = b""
    for piece in pieces:
        cut = _last_eol(piece, 0, len(piece))
        if cut < 0:
            carry = carry + piece
            if len(carry) > MAX_CARRY:
                carry = carry[-MAX_LINE:]
            continue
        yield _Chunk(carry, piece, 0, cut + 1)
        carry = piece[cut + 1:]
        if len(carry) > MAX_CARRY:
            carry = carry[-MAX_LINE:]
    if carry:
        yield _Chunk(b"", carry, 0, len(carry))


def _line_count(data: bytes) -> int:
    """Lines ended in ``data`` (at \\n, \\r\\n or \\r, as ``_lines`` splits them)."""
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")


def _windows(stream: BinaryIO, needles: Sequence[bytes], size: int) -> Iterator[Tuple[int, Optional[bytes]]]:
    """(first line number, chunk) for chunks worth parsing; (n, None) marks a skipped gap.

    A chunk is parsed when it is in the head, is the last one, holds a needle, or neighbours a
    chunk that holds one (a traceback can straddle the cut; an anomaly block precedes its error).
    Line numbers stop counting across skipped chunks: counting them would cost a second pass.
    """
    consumed = 0
    line_no = 1
    before_hit = False                       # did the chunk before the held one hit?
    held: Optional[Tuple[_Chunk, bool]] = None  # the chunk waiting for its successor's verdict
    for chunk in _line_chunks(_utf8_chunks(stream, size)):
        hit = consumed < FULL_SCAN or any(chunk.has(n) for n in needles)
        consumed += len(chunk)
        if held is not None:
            h_chunk, h_hit = held
            if h_hit or before_hit or hit:
                data = h_chunk.join()
                yield line_no, data
                line_no += _line_count(data)
            else:
                yield line_no, None
            before_hit = h_hit
        held = (chunk, hit)
    if held is not None:
        yield line_no, held[0].join()


def _regular_file(stream: BinaryIO, minimum: int) -> Optional[int]:
    """Size of the regular file behind ``stream`` when it is at least ``minimum`` bytes, unread
    and not UTF-16/32 (those are transcoded as a stream)."""
    try:
        st = os.fstat(stream.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size < max(minimum, 1) or stream.tell() != 0:
            return None
        head = stream.read(4096)
        stream.seek(0)
    except (AttributeError, OSError, ValueError):   # io.UnsupportedOperation is both
        return None
    return None if _sniff(head) else st.st_size


def _line_start(read_at: scan.ReadAt, pos: int) -> int:
    """Start of the line holding byte ``pos`` (``pos`` itself when that line is overlong)."""
    if pos <= 0:
        return 0
    lo = max(0, pos - MAX_LINE)
    window = read_at(lo, pos - lo)
    cut = max(window.rfind(b"\n"), window.rfind(b"\r"))
    if cut < 0:
        return 0 if lo == 0 else pos
    start = lo + cut + 1
    if window[cut] == 13 and read_at(start, 1) == b"\n":
        start += 1
    return start


def _line_end(read_at: scan.ReadAt, pos: int, size: int) -> int:
    """End of the line holding byte ``pos - 1`` (``pos`` itself when that line is overlong)."""
    if pos >= size:
        return size
    window = read_at(pos - 1, MAX_LINE + 1) if pos > 0 else b""
    if window[:1] == b"\n" or (window[:1] == b"\r" and window[1:2] != b"\n"):
        return pos
    window = window[1:]
    ends = [i for i in (window.find(b"\n"), window.find(b"\r")) if i >= 0]
    if not ends:
        return pos if len(window) == MAX_LINE else pos + len(window)
    cut = min(ends)
    if window[cut] == 13 and window[cut + 1:cut + 2] == b"\n":
        cut += 1
    return pos + cut + 1


def _file_windows(stream: BinaryIO, size: int, file_size: int,
                  busy: Callable[[], bool]) -> Iterator[Tuple[int, Optional[bytes]]]:
    """``_windows`` for a big regular file: only the first and last chunk and a chunk either side
    of every needle are read at all; the needle search runs over the file in parallel where it
    can.  A range is read on while ``busy()`` (a traceback is still open at its end), up to
    ``MAX_EXTEND`` bytes.  (No ``FULL_SCAN`` head: a file this big is a log, not a paste.)"""
    read_at = scan.reader_at(stream)
    head_end = min(file_size, size)
    tail_start = max(head_end, file_size - size)
    spans = [(0, head_end), (tail_start, file_size)]
    for needle in NEEDLES:
        spans += scan.regions(read_at, needle, head_end, tail_start, size)
    line_no, done = 1, 0
    # Slack: aligning each range to whole lines must not make two of them share a line.
    for lo, hi in scan.merge(spans, slack=2 * MAX_LINE):
        lo = max(done, _line_start(read_at, lo))      # both clamp to the file
        hi = _line_end(read_at, hi, file_size)
        if lo >= hi:
            continue                           # already read while a traceback was open
        if lo > done > 0:
            yield line_no, None
        limit = hi + MAX_EXTEND
        while True:
            pieces = (read_at(at, min(size, hi - at)) for at in range(lo, hi, size))
            for chunk in _line_chunks(pieces):
                data = chunk.join()
                yield line_no, data
                line_no += _line_count(data)
            done = hi
            if hi >= file_size or hi >= limit or not busy():
                break
            lo, hi = hi, _line_end(read_at, min(hi + size, file_size), file_size)


def _lines(chunk: bytes) -> List[str]:
    # Lines end at \n, \r\n or \r only -- the cuts _line_chunks makes -- so that line numbers and
    # the lines themselves do not depend on where chunks were cut (str.splitlines also splits at
    # \x0b, \x0c, \x1c-\x1e, \x85, \u2028/9, which the chunk cutter does not know about).
    text = chunk.decode("utf-8", "replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _unflatten(text: str) -> List[str]:
    """A traceback pasted onto one line: put its frames and exception back on lines of their own."""
    head, _, rest = text.partition(HEADER)
    out = [head + HEADER + ":"] if not head.strip() else [head, HEADER + ":"]
    pieces = _FLAT_SPLIT.split(rest.lstrip(": "))
    for i, piece in enumerate(pieces):
        piece = piece.strip()
        if not piece.startswith("File "):
            continue
        if i == len(pieces) - 1:
            parts = _FLAT_EXC.split(piece)
            piece, exc = parts[0], " ".join(parts[1:])
        else:
            exc = ""
        m = _FLAT_CODE.match(piece)
        if m:
            out += ["  " + m.group(1), "    " + m.group(2)]
        else:
            out.append("  " + piece)
        if exc:
            out.append(exc)
    return out


# --- the state machine -----------------------------------------------------------------------
@record
class _Builder:
    """Accumulates one traceback for one rank."""

    line_no: int
    rank: Optional[int]
    base_indent: int = 0
    has_header: bool = False
    style: str = "py"              # py | ipython | rich | pytest
    frames: List[Frame] = field(default_factory=list)
    dropped_frames: int = 0
    exc_type: Optional[str] = None
    message: List[str] = field(default_factory=list)
    message_chars: int = 0
    anomaly: Tuple[Tuple[Frame, ...], Optional[str]] = ((), None)
    last_file_indent: int = -1
    awaiting_code: bool = False
    stamped: bool = False          # the exception line carried a timestamp/logger prefix

    def add_frame(self, frame: Frame, indent: int = 0) -> None:
        if len(self.frames) >= MAX_FRAMES_HEAD + MAX_FRAMES_TAIL:
            del self.frames[MAX_FRAMES_HEAD]
            self.dropped_frames += 1
        self.frames.append(frame)
        self.last_file_indent = indent
        self.awaiting_code = True

    def set_code(self, code: str) -> None:
        if self.frames and self.awaiting_code:
            f = self.frames[-1]
            self.frames[-1] = Frame(f.path, f.line, f.func, code.strip())
        self.awaiting_code = False

    def set_line(self, line: int, code: str) -> None:
        if self.frames:
            f = self.frames[-1]
            self.frames[-1] = Frame(f.path, line or f.line, f.func, code.strip())
        self.awaiting_code = False

    def add_message(self, text: str) -> bool:
        if len(self.message) >= MAX_MESSAGE_LINES or self.message_chars >= MAX_MESSAGE_CHARS:
            return False
        self.message.append(text)
        self.message_chars += len(text)
        return True

    def build(self, cause_of_next: bool = False) -> Traceback:
        return Traceback(
            exc_type=self.exc_type,
            message="\n".join(self.message).strip()[:MAX_MESSAGE_CHARS],
            frames=tuple(self.frames),
            anomaly_frames=self.anomaly[0],
            anomaly_node=self.anomaly[1],
            cause_of_next=cause_of_next,
            rank=self.rank,
            line_no=self.line_no,
            has_header=self.has_header,
        )


def _continues(cur: _Builder, text: str, stripped: str) -> bool:
    """Whether a line after an exception's message is more of it.  Python prints a multi-line
    message verbatim, so this is a judgement on the line's shape: details indented under the
    exception line, text after an empty message or after a line ending in ':', the rest of a
    hard-wrapped sentence and whole sentences (CUDA's "CUDA kernel errors might be asynchronously
    reported ...") are; a short progress line ("step 1", "epoch 3 loss 0.52") and a phrase after
    a finished sentence are the program's next output."""
    if not cur.message or _indent(text) > cur.base_indent:
        return True
    last = cur.message[-1]
    if last.endswith(":"):
        return True
    if _PROGRESS.match(stripped) and len(stripped.split()) <= 4:
        return False
    if last.endswith(_SENTENCE_END):
        return stripped[:1].isupper() and len(stripped.split()) >= 3
    return True


@record
class _Anomaly:
    node: Optional[str]
    frames: List[Frame] = field(default_factory=list)
    open: bool = True
    age: int = 0


class _RankParser:
    """Line-by-line parser for the lines of one rank (ranks interleave in torchrun logs)."""

    ANOMALY_TTL = 400   # lines an anomaly block waits for its exception

    def __init__(self, rank: Optional[int], bare: Optional[Callable[[str], bool]]):
        self.rank = rank
        self.bare = bare
        self.cur: Optional[_Builder] = None
        self.state = "idle"          # idle | frames | message
        self.anomaly: Optional[_Anomaly] = None
        self.chain_pending = False
        self.stamped = False         # the line being fed had a timestamp/logger prefix
        self.out: List[Traceback] = []
        self.last_text = ""          # the last traceback with frames, as printed (see _quoted_text)

    # -- emit --
    def _emit(self, cause_of_next: bool = False) -> None:
        cur, self.cur = self.cur, None
        self.state = "idle"
        if cur is None:
            return
        if not cur.frames and cur.exc_type is None and not cur.message:
            return
        if _runner_wrapper(cur.exc_type, cur.frames):
            if cur.exc_type not in _RUNNER_WRAPPERS:     # its cause copies the child's output
                while self.out and self.out[-1].cause_of_next:
                    self.out.pop()
            return      # a runner's wrapper of its child's error (see _RUNNER_WRAPPERS)
        if not cur.frames and not cur.has_header and any(m.strip() for m in cur.message) \
                and all(_CARETS.fullmatch(m) or m.strip() in self.last_text for m in cur.message):
            # `RuntimeError: <a piece of the traceback just printed>`: a copy of it cut short (a
            # launcher's RuntimeError(stderr tail)), carets or a line of it, not an error of its own
            return
        tb = cur.build(cause_of_next)
        if tb.frames:
            self.last_text = _quoted_text(tb)
        self.out.append(tb)

    def _start(self, line_no: int, header: bool, indent: int) -> _Builder:
        chained = self.chain_pending
        if self.cur is not None:
            self._emit(cause_of_next=chained)
        elif chained and self.out:
            self.out[-1] = replace(self.out[-1], cause_of_next=True)
        self.chain_pending = False
        b = _Builder(line_no=line_no, rank=self.rank, base_indent=indent, has_header=header)
        if self.anomaly is not None and not self.anomaly.open:
            b.anomaly = (tuple(self.anomaly.frames), self.anomaly.node)
            self.anomaly = None
        return b

    def finish(self) -> None:
        if self.cur is not None:
            self._emit()

    def gap(self) -> None:
        """Lines were skipped: nothing spans a gap."""
        self.finish()
        self.anomaly = None
        self.chain_pending = False

    # -- feed --
    def _witness(self, text: str) -> None:
        """A witness line: it ends an exception message; the data line is attached to the
        exception just emitted (the last of its chain) when the exception types agree."""
        if self.cur is not None and self.state == "message":
            self._emit()
        if not text.startswith(WITNESS_DATA_MARK) or self.cur is not None or not self.out:
            return
        got = _parse_witness(text)
        if got is None:
            return
        ev, exc = got
        last = self.out[-1]
        if last.evidence is not None or not last.message:
            return
        if exc and last.exc_type and last.exc_type.rsplit(".", 1)[-1] != exc.rsplit(".", 1)[-1]:
            return
        self.out[-1] = replace(last, evidence=ev)

    def feed(self, text: str, line_no: int, stamped: bool = False) -> None:
        self.stamped = stamped
        if text.startswith("tracefix-witness"):
            if text.startswith(WITNESS_MARK) or text.startswith(WITNESS_DATA_MARK):
                self._witness(text)
                return
        if self.anomaly is not None:
            self.anomaly.age += 1
            if self.anomaly.age > self.ANOMALY_TTL:
                self.anomaly = None
        if not text.strip():
            self._blank()
            return
        if HEADER in text and 'File "' in text[text.index(HEADER):]:
            for piece in _unflatten(text):
                self._feed(piece, line_no)
            return
        self._feed(text, line_no)

    def _blank(self) -> None:
        if self.state == "message":
            self._emit()
        elif self.cur is not None and self.cur.style == "ipython":
            return
        if self.anomaly is not None and self.anomaly.open and self.anomaly.frames:
            self.anomaly.open = False

    def _feed(self, text: str, line_no: int) -> None:
        stripped = text.strip()
        # anomaly-mode warning: its frames are the forward trace of the next error
        if "Traceback of forward call" in text:
            m = _ANOMALY.search(text)
            if m:
                if self.state == "message":
                    self._emit()
                self.anomaly = _Anomaly(node=m.group("node") or m.group("prev"))
                return
        if self.anomaly is not None and self.anomaly.open:
            if self._anomaly_line(text, stripped):
                return
        if _CHAIN.search(text):
            if self.cur is not None:
                self._emit(cause_of_next=True)
            elif self.out:
                self.out[-1] = replace(self.out[-1], cause_of_next=True)
            return
        if HEADER in text:
            self._header(text, line_no)
            return
        if self.cur is not None and self.cur.style == "rich" and self.state == "frames":
            self._rich(text, stripped)
            return
        m = _FILE.match(text)
        if m:
            self._frame(m, line_no, _indent(text))
            return
        if self.state == "frames" and self.cur is not None:
            if self._in_frames(text, stripped, line_no):
                return
        elif self.state == "idle":
            if self._idle_frame(text, line_no):
                return
        self._other(text, stripped, line_no)

    def _anomaly_line(self, text: str, stripped: str) -> bool:
        a = self.anomaly
        assert a is not None
        m = _FILE.match(text)
        if m:
            a.frames.append(Frame(m.group("path"), int(m.group("line")), (m.group("func") or "").strip()))
            return True
        if stripped.startswith("(Triggered internally at") or "python_anomaly_mode.cpp" in stripped:
            a.open = False
            return True
        if a.frames and not _CARET.match(text) and _indent(text) > 2 and not _EXC.match(stripped):
            f = a.frames[-1]
            if f.code is None:
                a.frames[-1] = Frame(f.path, f.line, f.func, stripped)
            return True
        if _CARET.match(text):
            return True
        a.open = False
        return False

    def _header(self, text: str, line_no: int) -> None:
        ipy = _IPY_HEAD.match(text.strip())
        b = self._start(line_no, True, _indent(text))
        if ipy:
            b.style = "ipython"
            b.exc_type = None
        elif "╭" in text or "┏" in text:
            b.style = "rich"
        self.cur = b
        self.state = "frames"

    def _frame(self, m: "re.Match[str]", line_no: int, indent: int) -> None:
        if self.cur is None or self.state != "frames":
            self.cur = self._start(line_no, False, max(0, indent - 2))
            self.state = "frames"
        self.cur.add_frame(Frame(m.group("path"), int(m.group("line")), (m.group("func") or "").strip()), indent)

    def _idle_frame(self, text: str, line_no: int) -> bool:
        """A stack pasted without its header (mid-stack) in other layouts."""
        for rx in (_IPY_CELL, _IPY_FILE):
            m = rx.match(text)
            if m:
                self.cur = self._start(line_no, False, 0)
                self.cur.style = "ipython"
                self.state = "frames"
                self._ipy_frame(m, rx)
                return True
        m = _PYTEST_FRAME.match(text.strip())
        if m and m.group("func"):
            self.cur = self._start(line_no, False, 0)
            self.cur.style = "pytest"
            self.state = "frames"
            self.cur.add_frame(Frame(m.group("path"), int(m.group("line")), m.group("func")))
            return True
        return False

    def _ipy_frame(self, m: "re.Match[str]", rx: "re.Pattern[str]") -> None:
        assert self.cur is not None
        if rx is _IPY_CELL:
            path = f"Cell In[{m.group('cell').strip()}]"
        else:
            path = m.group("path")
        line = int(m.group("line")) if "line" in m.groupdict() and m.group("line") else 0
        self.cur.add_frame(Frame(path, line, (m.group("func") or "").strip()), _indent(m.string))

    def _in_frames(self, text: str, stripped: str, line_no: int) -> bool:
        cur = self.cur
        assert cur is not None
        if _CARET.match(text) or _REPEATED.match(text):
            return True
        if cur.style == "ipython" or _IPY_RULE.match(stripped):
            if _IPY_RULE.match(stripped):
                return True
            for rx in (_IPY_CELL, _IPY_FILE, _IPY_OLD):
                m = rx.match(text)
                if m:
                    cur.style = "ipython"
                    self._ipy_frame(m, rx)
                    return True
            m = _IPY_ARROW.match(stripped)
            if m:
                cur.set_line(int(m.group("line")), m.group("code"))
                return True
            if _IPY_CONTEXT.match(text) and not _EXC.match(stripped):
                return True
        if cur.style == "pytest" or (stripped.startswith(">") and cur.style == "py"):
            m = _PYTEST_CODE.match(stripped)
            if m:
                cur.style = "pytest"
                cur.set_line(0, m.group("code"))
                return True
            m = _PYTEST_FRAME.match(stripped)
            if m:
                if m.group("func"):
                    cur.add_frame(Frame(m.group("path"), int(m.group("line")), m.group("func")))
                return True
            if not _PYTEST_E.match(text) and not _EXC.match(stripped):
                return True
        if cur.awaiting_code and cur.frames and _indent(text) > cur.last_file_indent and not _EXC.match(stripped):
            cur.set_code(stripped)
            return True
        if cur.awaiting_code and cur.frames and cur.style == "py" and _indent(text) > cur.base_indent:
            # code line that happens to look like "Foo.BarError(...)" is still code
            m = _EXC.match(stripped)
            if m is None or m.group("msg") is None:
                cur.set_code(stripped)
                return True
        return False

    def _rich(self, text: str, stripped: str) -> None:
        cur = self.cur
        assert cur is not None
        if _RICH_END.match(text):
            self.state = "frames_done"
            return
        m = _RICH_FRAME.match(stripped)
        if m:
            cur.add_frame(Frame(m.group("path"), int(m.group("line")), m.group("func")))
            return
        m = _RICH_CODE.match(stripped)
        if m:
            cur.set_line(int(m.group("line")), m.group("code"))

    def _other(self, text: str, stripped: str, line_no: int) -> None:
        core = _PYTEST_E.sub("", stripped) if _PYTEST_E.match(stripped) else stripped
        core = core.strip()
        while len(core) > 1 and core[0] == core[-1] and core[0] in "`*_\"'":   # `...`, **...**, "...": a
            core = core[1:-1].strip()     # decorated paste; but KeyError: 'x' keeps its quotes
        m = _EXC.match(core)
        if m and (self.cur is not None and self.state in ("frames", "frames_done")):
            self._exception(m)
            return
        if self.state == "message" and self.cur is not None:
            if m and m.group("msg") is not None and self.cur.style == "pytest":
                return
            if _LOGLINE.match(text) or _FENCE.match(text) or (self.stamped and not self.cur.stamped):
                self._emit()          # a new log record, not more of the message
            elif (_indent(text) >= self.cur.base_indent and _WORDY.search(stripped) and "\ufffd" not in stripped
                  and _continues(self.cur, text, stripped) and self.cur.add_message(stripped)):
                return
            else:
                self._emit()
        if self.cur is not None and self.state in ("frames", "frames_done") and not self.cur.frames:
            self.cur = None
            self.state = "idle"
        if self.state in ("frames", "frames_done") and self.cur is not None:
            # a stack whose exception line is missing or unrecognisable: keep it, message unknown
            if m is None and not _LOGLINE.match(text) and self.cur.style == "py" and _indent(text) <= self.cur.base_indent:
                self._exception_untyped(core)
                return
            if m is None:
                return
        if m and m.group("msg") is not None and not m.group("type").endswith("Warning"):
            self.cur = self._start(line_no, False, _indent(core))
            self._exception(m)
            return
        if self.bare is not None and self.bare(core):
            self.cur = self._start(line_no, False, 0)
            self.cur.exc_type = None
            self.cur.stamped = self.stamped
            self.cur.add_message(core)
            self.state = "message"

    def _exception(self, m: "re.Match[str]") -> None:
        cur = self.cur
        assert cur is not None
        etype = m.group("type")
        if cur.style == "ipython" and cur.exc_type and etype.endswith(cur.exc_type):
            pass
        cur.exc_type = etype
        cur.stamped = self.stamped
        cur.message = []
        cur.message_chars = 0
        msg = m.group("msg")
        if msg:
            cur.add_message(msg.strip())
        self.state = "message"

    def _exception_untyped(self, text: str) -> None:
        cur = self.cur
        assert cur is not None
        cur.exc_type = None
        cur.add_message(text)
        self.state = "message"


# Substrings one of which any line that can open or continue a record holds (header, frames of
# every layout, exception types, chain markers).  Everything else is skipped while all parsers
# are idle: most lines of a training log are progress output.
_TRIGGERS = ("most recent call last", "File ", "Error", "xception", "Exit", "Interrupt", "Failure",
             "Warning", "StopIteration", "Cell In", "Input In", ".py", "Traceback", "ipython-input",
             "tracefix-witness")


def _maybe(raw: str) -> bool:
    for t in _TRIGGERS:
        if t in raw:
            return True
    return False


def _all_idle(parsers: Dict[Optional[int], "_RankParser"]) -> bool:
    if len(parsers) > 8:
        return False
    for p in parsers.values():
        if p.cur is not None or p.anomaly is not None or p.chain_pending:
            return False
    return True


def read_tracebacks(
    stream: BinaryIO,
    bare: Optional[Callable[[str], bool]] = None,
    chunk_size: int = CHUNK,
    seek_min: int = SEEK_MIN,
) -> Iterator[Traceback]:
    """Yield every traceback or bare error message in ``stream``, in input order per rank.

    ``bare(line)`` says whether a line outside any traceback is an error message on its own.
    A regular file of ``seek_min`` bytes or more is searched by offset instead of streamed.
    """
    parsers: Dict[Optional[int], _RankParser] = {}
    spilled: List[Traceback] = []

    def parser(rank: Optional[int]) -> _RankParser:
        p = parsers.get(rank)
        if p is None:
            if len(parsers) > 4096:   # bound: a log cannot make us keep unbounded parsers
                for q in parsers.values():
                    q.finish()
                    spilled.extend(q.out)
                parsers.clear()
            p = parsers[rank] = _RankParser(rank, bare)
        return p

    quoted: Optional[Tuple[int, bool]] = None   # the quoting of the traceback block being read
    held: List[str] = []                        # lines read but not yet fed (see _in_context)
    file_size = _regular_file(stream, seek_min)
    if file_size is None:
        windows = _windows(stream, NEEDLES, chunk_size)
    else:
        # a held line may open a traceback: read on as if it did
        windows = _file_windows(stream, chunk_size, file_size,
                                lambda: any(p.cur is not None for p in parsers.values()) or any(map(_maybe, held)))
    for first_line, lines, lo, hi in _in_context(windows, held):
        if lines is None:
            for p in parsers.values():
                p.gap()
                yield from p.out
                p.out.clear()
        else:
            idle = _all_idle(parsers)           # changes only when a line is fed
            for k in range(lo, hi):
                raw = lines[k]
                if idle and not _maybe(raw) and (bare is None or not bare(raw)):
                    continue  # fast path: an ordinary log line while no traceback is open
                cut = _numbering(lines, k)
                text, quoted = _unquote(clean_line(raw[cut:] if cut else raw), quoted)
                if _FENCE.match(text):
                    fenced = _FENCED_LINE.match(text)
                    if fenced is None:
                        continue
                    text = fenced.group("inner")
                rank, text, stamped = _split_prefix(text)
                parser(rank).feed(text, first_line + k - lo, stamped)
                idle = _all_idle(parsers)
            del lines      # (as in _in_context)
        if spilled:
            yield from spilled
            spilled.clear()
        for p in parsers.values():
            # The newest record waits for the next chunk: a "The above exception was the direct
            # cause..." line there still has to mark it (results must not depend on chunk cuts).
            if len(p.out) > 1:
                yield from p.out[:-1]
                del p.out[:-1]
    for p in parsers.values():
        p.finish()
        yield from p.out
        p.out.clear()
