"""Add a module import to a patched file's text when the patch uses a name the file lacks."""
from __future__ import annotations

import ast
import sys
from typing import Optional


def imported_as(text: str, module: str) -> Optional[str]:
    """The name ``text`` binds ``module`` to at module level (``import torch as th`` -> "th")."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == module:
                    return alias.asname or module
    return None


def with_import(text: str, module: str) -> Optional[str]:
    """``text`` with ``import <module>`` among its module-level imports (in name order), or after
    its docstring and ``__future__`` imports when it has none; None if it does not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    lines = text.split("\n")
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
               and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    if imports:
        # among the third-party imports, by name; after the standard library's, a blank line between
        third = [n for n in imports if not _stdlib(_name(n))]
        after = [n for n in third if _name(n) > module]
        if after:
            at = after[0].lineno - 1
            return "\n".join(lines[:at] + [f"import {module}"] + lines[at:])
        at = (third or imports)[-1].end_lineno
        gap = [""] if not third else []
        return "\n".join(lines[:at] + gap + [f"import {module}"] + lines[at:])
    head = 0
    for n in tree.body:
        doc = isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
        if (doc and n is tree.body[0]) or (isinstance(n, ast.ImportFrom) and n.module == "__future__"):
            head = n.end_lineno
        else:
            break
    rest = lines[head:]
    blank = next((i for i, ln in enumerate(rest) if ln.strip()), len(rest))
    follows_def = blank < len(rest) and rest[blank].startswith(("def ", "class ", "@", "async def "))
    below = max(0, (2 if follows_def else 1) - blank)          # blank lines to add under the import
    new = ([""] if head else []) + [f"import {module}"] + [""] * below
    return "\n".join(lines[:head] + new + rest)


def _stdlib(name: str) -> bool:
    top = name.split(".")[0]
    names = getattr(sys, "stdlib_module_names", None)      # 3.10+
    if names is None:  # pragma: no cover - 3.9
        return top in ("os", "sys", "re", "json", "math", "random", "time", "argparse", "typing", "pathlib",
                       "collections", "functools", "itertools", "dataclasses", "logging", "copy", "shutil")
    return top in names


def _name(node: ast.AST) -> str:
    return node.names[0].name if isinstance(node, ast.Import) else (node.module or "")
