"""What the command line's names and options stand for, on both of its paths (tracefix.cli's own
parser and the click commands): the command names, --format, colour, --root and --knowledge."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, Optional, Sequence

from tracefix.exits import Fail, err

FORMATS = ("rich", "plain", "json", "quickfix", "github", "sarif")
COMMANDS = ("diagnose", "list", "explain", "undo", "run", "hook", "mcp")


def load_knowledge(knowledge_dirs: Sequence[str], examples: bool = False):
    """The entries, with the --knowledge folders; a broken entry is a :class:`Fail`."""
    from tracefix.knowledge import KnowledgeError, load_entries

    try:
        return load_entries([Path(k) for k in knowledge_dirs], examples=examples,
                            on_replace=lambda i, path: err(f"tracefix: {path} replaces the entry '{i}'"))
    except KnowledgeError as exc:
        raise Fail(str(exc)) from None


def pick_format(fmt: Optional[str]) -> str:
    """--format, or rich on a terminal (or FORCE_COLOR), plain otherwise."""
    if fmt:
        return fmt
    if os.environ.get("FORCE_COLOR") or sys.stdout.isatty():
        return "rich"
    return "plain"


def color() -> Optional[bool]:
    """NO_COLOR / FORCE_COLOR, or None: the terminal decides."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return None


def root_dir(root: Optional[str]) -> Path:
    """--root (default: the current directory), resolved; not a directory is a :class:`Fail`."""
    path = Path(root or ".")
    if not path.is_dir():
        raise Fail(f"--root {root}: not a directory")
    return path.resolve()


def command_hint(name: str, path: Path) -> str:
    """For a log that is not there but reads like a command (a word: no folder, no suffix): which
    one was meant.  Only on this error path, so difflib costs the normal start-up nothing."""
    if path.exists() or any(sep and sep in name for sep in ("/", os.sep, os.altsep)) or "." in name:
        return ""
    if name in COMMANDS:
        return f" (the {name} command comes first: tracefix {name} [OPTIONS] ...)"
    from difflib import get_close_matches

    close = get_close_matches(name, COMMANDS, n=1)
    guess = f"did you mean '{close[0]}'? " if close else ""
    return f" (not a file; {guess}commands are: {', '.join(COMMANDS)})"


# [tool.tracefix] in pyproject.toml: the defaults a project sets for its command lines
CONFIG_TYPES = {"root": str, "knowledge": list, "format": str, "verify-steps": int, "verify-timeout": (int, float)}


def project_config(root: Optional[str]) -> Dict[str, object]:
    """``[tool.tracefix]`` of the nearest ``pyproject.toml`` at or above ``root`` (else the current
    directory), its paths resolved against that file's folder; {} when there is none.  An unknown
    key or a value of the wrong type is a :class:`Fail` (exit 2)."""
    start = Path(root or ".").resolve()
    for folder in (start, *start.parents):
        path = folder / "pyproject.toml"
        if path.is_file():
            break
    else:
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    if "tracefix" not in text:              # most pyproject files: no TOML parse at start-up
        return {}
    from tracefix.knowledge import toml_reader

    try:
        table = toml_reader().loads(text).get("tool", {}).get("tracefix", {})
    except Exception as exc:  # tomllib.TOMLDecodeError
        raise Fail(f"{path}: not valid TOML ({exc})") from None
    if not isinstance(table, dict):
        raise Fail(f"{path}: [tool.tracefix] must be a table")
    out: Dict[str, object] = {}
    for key, value in table.items():
        want = CONFIG_TYPES.get(key)
        if want is None:
            raise Fail(f"{path}: [tool.tracefix] has no setting '{key}' (known: {', '.join(CONFIG_TYPES)})")
        if not isinstance(value, want) or isinstance(value, bool):
            raise Fail(f"{path}: [tool.tracefix] {key} = {value!r}: wrong type")
        if key == "knowledge" and not all(isinstance(k, str) for k in value):
            raise Fail(f"{path}: [tool.tracefix] knowledge must be a list of folders")
        if key == "format" and value not in FORMATS:
            raise Fail(f"{path}: [tool.tracefix] format = {value!r}: one of {', '.join(FORMATS)}")
        if key == "verify-steps" and not 1 <= value <= 1000:
            raise Fail(f"{path}: [tool.tracefix] verify-steps = {value}: from 1 to 1000")
        if key == "verify-timeout" and value < 0:
            raise Fail(f"{path}: [tool.tracefix] verify-timeout = {value}: not negative")
        if key == "root":
            value = str(folder / value)
        elif key == "knowledge":
            value = [str(folder / k) for k in value]
        out[key] = value
    return out
