"""Load and validate knowledge entries: one TOML file per known error (data only)."""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from tracefix.record import record

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "knowledge"

EXPLAIN_KEYS = ("what", "why", "fix", "fix_safety")
# The built-in entries' diagnosis part (each file's text before its first [[array]]), parsed when
# the wheel is built (setup.py): {file name: (that text, its parsed TOML, {regex: its needle})}.
# Used only while the file still holds exactly that text, so an edited entry is parsed again; a
# checkout has no cache.
HEADS_CACHE = "heads.marshal"


def toml_reader():
    """tomllib (3.11+) or tomli."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.9/3.10 only
        import tomli as tomllib
    return tomllib


def _locators() -> Tuple[str, ...]:
    """The valid ``locate`` names: those the registered families declare (their code is not loaded)."""
    from tracefix.families import locate_names

    return locate_names() + ("none",)


class Pattern:
    """One of an entry's message regexes (case-insensitive), compiled when first needed.

    ``needle`` is a lower-case ASCII run of characters that every match holds (:func:`needle`,
    worked out when the wheel is built): an ASCII text without it is no match, and most messages
    are searched without compiling most entries' regexes, which costs a diagnosis some
    milliseconds per family otherwise.  A pattern loaded without one is compiled at once (which
    also validates a user's entry as it loads)."""

    __slots__ = ("pattern", "needle", "_rx")

    def __init__(self, pattern: str, needle: str = "") -> None:
        self.pattern = pattern
        self.needle = needle
        self._rx: Optional["re.Pattern[str]"] = None if needle else re.compile(pattern, re.IGNORECASE)

    def search(self, text: str) -> Optional["re.Match[str]"]:
        if self.needle and text.isascii() and self.needle not in text.lower():
            return None
        if self._rx is None:
            self._rx = re.compile(self.pattern, re.IGNORECASE)
        return self._rx.search(text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"Pattern({self.pattern!r})"


def needle(pattern: str) -> str:
    """The longest run of ASCII characters that every case-insensitive match of ``pattern``
    holds, in lower case; "" when it has none of 3 or more.  Only the pattern's top level counts
    (a literal inside a group, a branch or a repeat may be left out of a match)."""
    try:
        if sys.version_info >= (3, 11):
            from re import _parser as sre_parse
        else:  # pragma: no cover - exercised on 3.9/3.10 only
            import sre_parse
        parsed = sre_parse.parse(pattern, re.IGNORECASE)
        literal = sre_parse.LITERAL
    except Exception:   # a private module's shape changed, or a bad regex: no needle, compile as usual
        return ""
    best = run = ""
    for op, arg in (*parsed, (None, None)):
        if op is literal and arg < 128:
            run += chr(arg)
            continue
        if len(run) > len(best):
            best = run
        run = ""
    return best.lower() if len(best) >= 3 else ""


class KnowledgeError(Exception):
    """A knowledge entry is malformed; the message names the file and the field."""


@record(frozen=True)
class Example:
    name: str
    log: str
    fields: Tuple[Tuple[str, str], ...] = ()
    before: str = ""      # fix examples only: source of train.py before the patch
    after: str = ""       # ... and after it


@record(frozen=True)
class Entry:
    id: str
    title: str
    exception_types: Tuple[str, ...]
    keywords: Tuple[str, ...]          # literal substrings: a line holding one is this error (cheap test)
    patterns: Tuple[Pattern, ...]
    aliases: Tuple[str, ...]           # fuzzy fallback
    exclude: Tuple[Pattern, ...]
    fuzzy_threshold: float
    locate: str
    fixes: Tuple[str, ...]
    references: Tuple[str, ...]
    explain: Tuple[Tuple[str, str], ...]
    examples: Tuple[Example, ...] = ()
    counterexamples: Tuple[Example, ...] = ()
    fix_examples: Tuple[Example, ...] = ()
    source: str = ""
    fix_for: Tuple[Tuple[str, str], ...] = ()   # [explain.fix_for]: how to fix, by fix-site kind

    def explanation(self, key: str) -> str:
        return dict(self.explain).get(key, "")

    def fix_advice(self, kind: str) -> str:
        """``[explain.fix_for]``'s text for a fix site of ``kind``; "" when the entry has none (the
        general ``explain.fix`` then serves)."""
        return dict(self.fix_for).get(kind, "")


def builtin_dir() -> Path:
    # In a checkout knowledge/ sits beside the package; a wheel installs it as tracefix.entries.
    if BUILTIN_DIR.is_dir() and (BUILTIN_DIR / "__init__.py").is_file():
        return BUILTIN_DIR
    try:
        import tracefix.entries as pkg  # type: ignore[import-not-found]
    except ImportError:
        return BUILTIN_DIR
    return Path(pkg.__file__).resolve().parent


def load_entries(extra_dirs: Iterable[Path] = (), examples: bool = False,
                 on_replace: Optional[Callable[[str, Path], None]] = None) -> List[Entry]:
    """Built-in entries, then user entries; a user entry with a built-in id replaces it (and
    ``on_replace(id, path)`` is told).

    Diagnosis needs no examples: without ``examples`` only the part of each file before its first
    array of tables (``[[examples]]``...) is parsed, which keeps start-up fast.
    """
    by_id: Dict[str, Entry] = {}
    builtin = builtin_dir()
    for directory in [builtin, *map(Path, extra_dirs)]:
        if not directory.is_dir():
            raise KnowledgeError(f"{directory}: not a directory")
        cache = _heads_cache(directory) if directory is builtin and not examples else {}
        for path in sorted(directory.glob("*.toml")):
            # User entries are validated whole, examples included: their mistakes are reported early.
            entry = load_entry(path, examples or directory is not builtin, cache.get(path.name))
            if entry.id in by_id and on_replace is not None:
                on_replace(entry.id, path)
            by_id[entry.id] = entry
    return list(by_id.values())


_ARRAY_TABLE = re.compile(r"^\[\[", re.MULTILINE)


def _head(text: str) -> str:
    m = _ARRAY_TABLE.search(text)
    return text[: m.start()] if m else text


def _heads_cache(directory: Path) -> Dict[str, Any]:
    try:
        import marshal

        with open(directory / HEADS_CACHE, "rb") as fh:
            data = marshal.load(fh)
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    return data if isinstance(data, dict) else {}


def write_heads_cache(directory: Path) -> Path:
    """Parse the diagnosis part of every entry in ``directory`` into ``HEADS_CACHE`` (a build step)."""
    import marshal

    tomllib = toml_reader()
    heads = {}
    for path in sorted(Path(directory).glob("*.toml")):
        head = _head(path.read_text(encoding="utf-8"))
        try:
            data = tomllib.loads(head)
        except tomllib.TOMLDecodeError:
            continue  # load_entry parses that one whole, as without a cache
        sources = [src for key in ("patterns", "exclude") if isinstance(data.get(key), list)
                   for src in data[key] if isinstance(src, str)]
        try:
            for src in sources:
                re.compile(src, re.IGNORECASE)
        except re.error:
            continue  # ... and reports the bad regex
        heads[path.name] = (head, data, {src: needle(src) for src in sources})
    target = Path(directory) / HEADS_CACHE
    target.write_bytes(marshal.dumps(heads))
    return target


def load_entry(path: Path, examples: bool = True, cached: Any = None) -> Entry:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KnowledgeError(f"{path}: cannot read: {exc}") from None
    head = text if examples else _head(text)
    if isinstance(cached, tuple) and len(cached) == 3 and cached[0] == head and isinstance(cached[1], dict) \
            and isinstance(cached[2], dict):
        return _build(path, cached[1], cached[2])
    tomllib = toml_reader()
    try:
        try:
            data = tomllib.loads(head)
        except tomllib.TOMLDecodeError:
            if head is text:
                raise
            data = tomllib.loads(text)  # the cut fell inside a string: parse it all
    except tomllib.TOMLDecodeError as exc:
        raise KnowledgeError(f"{path}: invalid TOML: {exc}") from None
    return _build(path, data)


def _field(path: Path, data: Dict[str, Any], name: str, kind: type, default: Any = None) -> Any:
    if name not in data:
        if default is None:
            raise KnowledgeError(f"{path}: missing field '{name}'")
        return default
    value = data[name]
    if not isinstance(value, kind):
        raise KnowledgeError(f"{path}: field '{name}' must be a {kind.__name__}")
    if kind is list and not all(isinstance(v, (str, dict)) for v in value):
        raise KnowledgeError(f"{path}: field '{name}' has an item of the wrong type")
    return value


def _strings(path: Path, data: Dict[str, Any], name: str, required: bool = False) -> Tuple[str, ...]:
    values = _field(path, data, name, list, None if required else [])
    if required and not values:
        raise KnowledgeError(f"{path}: field '{name}' must not be empty")
    for v in values:
        if not isinstance(v, str) or not v:
            raise KnowledgeError(f"{path}: field '{name}' must hold non-empty strings")
    return tuple(values)


def _regexes(path: Path, name: str, sources: Tuple[str, ...],
             needles: Optional[Dict[str, str]] = None) -> Tuple[Pattern, ...]:
    compiled = []
    for i, src in enumerate(sources):
        try:
            compiled.append(Pattern(src, (needles or {}).get(src, "")))
        except re.error as exc:
            raise KnowledgeError(f"{path}: field '{name}[{i}]' is not a valid regex: {exc}") from None
    return tuple(compiled)


def _examples(path: Path, data: Dict[str, Any], name: str, need_source: bool = False) -> Tuple[Example, ...]:
    out = []
    for i, item in enumerate(_field(path, data, name, list, [])):
        where = f"{name}[{i}]"
        if not isinstance(item, dict):
            raise KnowledgeError(f"{path}: field '{where}' must be a table")
        log = item.get("log")
        if not isinstance(log, str) or not log.strip():
            raise KnowledgeError(f"{path}: field '{where}.log' must be a non-empty string")
        fields = item.get("fields", {})
        if not isinstance(fields, dict):
            raise KnowledgeError(f"{path}: field '{where}.fields' must be a table")
        before, after = item.get("before", ""), item.get("after", "")
        if need_source and not (isinstance(before, str) and isinstance(after, str) and before and after):
            raise KnowledgeError(f"{path}: field '{where}' needs 'before' and 'after' source strings")
        out.append(Example(name=str(item.get("name", f"{name}-{i}")), log=log,
                           fields=tuple((str(k), str(v)) for k, v in fields.items()),
                           before=before, after=after))
    return tuple(out)


def _build(path: Path, data: Dict[str, Any], needles: Optional[Dict[str, str]] = None) -> Entry:
    entry_id = _field(path, data, "id", str)
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", entry_id):
        raise KnowledgeError(f"{path}: field 'id' must be lowercase letters, digits and dashes")
    locate = _field(path, data, "locate", str, "none")
    locators = _locators()
    if locate not in locators:
        raise KnowledgeError(f"{path}: field 'locate' must be one of {', '.join(locators)}")
    if "explain" not in data:
        raise KnowledgeError(f"{path}: missing field 'explain' (the [explain] table must come before any [[examples]])")
    explain = _field(path, data, "explain", dict)
    for key in EXPLAIN_KEYS:
        if not isinstance(explain.get(key), str) or not explain[key].strip():
            raise KnowledgeError(f"{path}: field 'explain.{key}' must be a non-empty string")
    fix_for = explain.get("fix_for", {})
    if not isinstance(fix_for, dict) or not all(isinstance(v, str) and v.strip() for v in fix_for.values()):
        raise KnowledgeError(f"{path}: field 'explain.fix_for' must be a table of non-empty strings "
                             "(fix-site kind = how to fix it)")
    threshold = data.get("fuzzy_threshold", 90)
    if not isinstance(threshold, (int, float)) or not 50 <= threshold <= 100:
        raise KnowledgeError(f"{path}: field 'fuzzy_threshold' must be a number from 50 to 100")
    patterns = _strings(path, data, "patterns", required=True)
    exclude = _strings(path, data, "exclude")
    return Entry(
        id=entry_id,
        title=_field(path, data, "title", str),
        exception_types=_strings(path, data, "exception_types", required=True),
        keywords=_strings(path, data, "keywords", required=True),
        patterns=_regexes(path, "patterns", patterns, needles),
        aliases=_strings(path, data, "aliases"),
        exclude=_regexes(path, "exclude", exclude, needles),
        fuzzy_threshold=float(threshold),
        locate=locate,
        fixes=_strings(path, data, "fixes"),
        references=_strings(path, data, "references"),
        explain=tuple((k, explain[k].strip()) for k in EXPLAIN_KEYS),
        fix_for=tuple((k, " ".join(v.split())) for k, v in fix_for.items()),
        examples=_examples(path, data, "examples"),
        counterexamples=_examples(path, data, "counterexamples"),
        fix_examples=_examples(path, data, "fix_examples", need_source=True),
        source=str(path),
    )


def find_entry(entries: Iterable[Entry], entry_id: str) -> Optional[Entry]:
    return next((e for e in entries if e.id == entry_id), None)
