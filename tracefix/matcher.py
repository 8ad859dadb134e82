"""Recognise a ``Traceback`` as a knowledge entry: exact patterns first, fuzzy aliases second.

Pure and cheap: no file access.  rapidfuzz is imported only when no pattern matched.
"""
from __future__ import annotations

import re
from typing import Iterable, List, Optional, Sequence, Tuple

from tracefix.families import gate_words
from tracefix.knowledge import Entry
from tracefix.record import replace
from tracefix.records import Diagnosis, Traceback

FUZZY_WEIGHT = 0.9          # a fuzzy hit is never as sure as a pattern hit
TYPE_MISMATCH = 0.8         # right words, wrong exception type (retyped paste)
UNTYPED = 0.95              # message without its exception type
_SPACE = re.compile(r"\s+")
_DECOR = re.compile(r"[`*]+")
# Words a paraphrased message keeps (each family declares its own); a line without any is not worth
# a fuzzy comparison.  Lower case: `word in line.lower()` is ~20x faster than a re.I search, and
# BareMessage runs on every line of the parsed part of a log.
_GATE_WORDS = gate_words()


def _gated(lowered: str) -> bool:
    for w in _GATE_WORDS:
        if w in lowered:
            return True
    return False


MAX_FUZZY_CHARS = 600


def normalize(message: str) -> str:
    """One line, single spaces, markdown emphasis removed: what patterns are searched in."""
    return _SPACE.sub(" ", _DECOR.sub("", message)).strip()


def _type_ok(entry: Entry, exc_type: Optional[str]) -> Optional[bool]:
    if exc_type is None:
        return None
    base = exc_type.split(".")[-1]
    return exc_type in entry.exception_types or base in entry.exception_types


def _text_of(tb: Traceback) -> str:
    text = normalize(tb.message)
    if not text and tb.frames and tb.frames[-1].code:
        # Old torch echoed the message on the raising source line: raise RuntimeError("grad can ...")
        text = normalize(tb.frames[-1].code)
    return text


def _excluded(entry: Entry, text: str) -> bool:
    return any(rx.search(text) for rx in entry.exclude)


def _confidence(entry: Entry, tb: Traceback) -> float:
    ok = _type_ok(entry, tb.exc_type)
    return 1.0 if ok else (UNTYPED if ok is None else TYPE_MISMATCH)


def match(tb: Traceback, entries: Sequence[Entry]) -> Optional[Diagnosis]:
    """The best entry for ``tb`` or None.  Ties go to the entry listed first.

    A message's first line that a pattern recognises with everything the whole message gives
    (the same entry, the same fields) is the error: the lines after it, whatever they are (the
    program's next output), are not part of the diagnosis's message."""
    best = _best(tb, _text_of(tb), entries)
    if best is None:
        return None
    head = tb.message.split("\n", 1)[0].strip() if "\n" in tb.message else ""
    if head:
        first = _best(tb, normalize(head), entries, fuzzy=False)
        if first is not None and first[1] is best[1] and first[2] == best[2]:
            best, tb = first, replace(tb, message=head)
    conf, entry, fields = best
    ranks = (tb.rank,) if tb.rank is not None else ()
    return Diagnosis(entry_id=entry.id, title=entry.title, confidence=round(conf, 3),
                     traceback=tb, fields=fields, ranks=ranks)


def _best(tb: Traceback, text: str, entries: Sequence[Entry], fuzzy: bool = True):
    """(confidence, entry, fields) of the best entry for ``text``, or None."""
    if not text:
        return None
    best: Optional[Tuple[float, Entry, Tuple[Tuple[str, str], ...]]] = None
    for entry in entries:
        if _excluded(entry, text):
            continue
        for rx in entry.patterns:
            m = rx.search(text)
            if m:
                conf = _confidence(entry, tb)
                fields = tuple((k, v) for k, v in m.groupdict().items() if v is not None)
                if best is None or conf > best[0]:
                    best = (conf, entry, fields)
                break
    if best is None and fuzzy:
        best = _fuzzy(tb, text, entries)
    return best


def _fuzzy(tb: Traceback, text: str, entries: Sequence[Entry]):
    if len(text) > MAX_FUZZY_CHARS:
        text = text[:MAX_FUZZY_CHARS]
    lowered = text.lower()
    if not _gated(lowered):
        return None
    from rapidfuzz import fuzz

    best = None
    for entry in entries:
        if not entry.aliases or _excluded(entry, text):
            continue
        for alias in entry.aliases:
            score = fuzz.partial_ratio(alias.lower(), lowered, score_cutoff=entry.fuzzy_threshold)
            if score:
                conf = FUZZY_WEIGHT * score / 100 * _confidence(entry, tb)
                if best is None or conf > best[0]:
                    best = (conf, entry, ())
    return best


def keywords(entries: Iterable[Entry]) -> List[str]:
    """Literal needles that make a chunk of a big log worth parsing."""
    out: List[str] = []
    for e in entries:
        out.extend(k for k in e.keywords if k not in out)
    return out


class BareMessage:
    """Predicate for the reader: is this line (outside any traceback) one of our errors?"""

    def __init__(self, entries: Sequence[Entry]):
        self.entries = list(entries)
        lowered = [k.lower() for k in keywords(entries)]
        # This runs on every line of the parsed part of a log, and most lines hold no gate word:
        # a keyword that holds one is only worth testing on a line that holds it too.
        self.by_gate = [(w, [k for k in lowered if w in k]) for w in _GATE_WORDS]
        self.gateless = [k for k in lowered if not _gated(k)]

    def __call__(self, line: str) -> bool:
        low = line.lower()
        hits = 0
        for w, keys in self.by_gate:
            if w in low:
                hits += 1
                for k in keys:
                    if k in low:
                        return True
        for k in self.gateless:
            if k in low:
                return True
        # Paraphrases keep two of the gate words ("grad" + "scalar", "unscale" + "fp16"...); one alone
        # is every "grad_norm" line of a training log, too many for a fuzzy comparison each.
        if hits < 2 or len(line) > MAX_FUZZY_CHARS:
            return False
        text = normalize(line)
        if any(rx.search(text) for e in self.entries for rx in e.patterns):
            return True
        return _fuzzy(Traceback(exc_type=None, message=text), text, self.entries) is not None
