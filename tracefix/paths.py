"""What a path printed in a log, or a project file's name, is: a library's, a notebook cell's
(code with no file of its own), a notebook file; and a logged path's components.

Standard library only (``re``).
"""
from __future__ import annotations

import re
from typing import Tuple

# Paths that belong to a library, the interpreter or a debugger, never to the user's project.
_LIBRARY_RX = re.compile(
    r"""
      [\\/](?:site|dist)-packages[\\/]
    | (?:^|[\\/])lib(?:64)?[\\/](?:python|pypy)\d+(?:\.\d+)?t?[\\/]   # POSIX/conda/venv stdlib + packages
    | (?:^|[\\/])usr[\\/]lib[\\/]python\d
    | ^<frozen\b | ^<string>$ | ^<__array_function__ | ^<decorator-gen | ^<makefun-gen
    | [\\/]tracefix[\\/]hooks[\\/]\w+\.py$      # our own hooks (tracefix run), from a checkout too
    | [\\/]tracefix[\\/]families[\\/]\w+[\\/]witness\.py$     # ... and the families' recorders
    | [\\/]AppData[\\/](?:.*[\\/])?Python[\\/]
    | \\(?:Python\d*|anaconda\d*|miniconda\d*|[^\\/]*env[^\\/]*)\\(?-i:Lib)\\   # Windows stdlib
    | [\\/]Python\.framework[\\/]
    | pydevd | [\\/]_pydev | [\\/]pycharm[^\\/]*[\\/]helpers[\\/] | [\\/]helpers[\\/]pydev[\\/]
    | [\\/]debugpy[\\/]
    """,
    re.VERBOSE | re.IGNORECASE,
)
# torch's own tree, wherever it lives (a source build, a vendored copy): torch/<one of its members>.
_TORCH_RX = re.compile(
    r"(?:^|[\\/])(?:torch|functorch|torchvision|torchaudio|torchtext)[\\/]"
    r"(?:_[A-Za-z0-9_]+(?:\.py)?|autograd|nn|amp|cuda|optim|utils|distributed|fx|jit|backends|"
    r"multiprocessing|onnx|testing|export|compiler|overrides\.py|functional\.py|__init__\.py|"
    r"serialization\.py|storage\.py|hub\.py|library\.py|random\.py|return_types\.py|"
    r"models|transforms|datasets|io|ops)(?:[\\/]|$)"
)
# Code the user typed into a notebook or an interpreter: no file of its own; a notebook cell is
# mapped to the .ipynb under the root whose cell reads the logged code (tracefix.cellframes).
_NOTEBOOK_RX = re.compile(
    r"^<ipython-input-|^Cell In\s*\[|^<stdin>$|^<console>|^<cell line|[\\/]ipykernel_\d+[\\/]|"
    r"^<input>$|^<module>$",
    re.IGNORECASE,
)


def is_library_path(path: str) -> bool:
    """True for frames of installed packages, the standard library, torch's own files and debuggers."""
    if not path:
        return False
    p = path.strip()
    return bool(_LIBRARY_RX.search(p) or _TORCH_RX.search(p))


def is_notebook_path(path: str) -> bool:
    """True for user code that has no file on disk (notebook cells, ipykernel temp files, stdin)."""
    return bool(_NOTEBOOK_RX.search(path.strip())) if path else False


def split_log_path(path: str) -> Tuple[str, ...]:
    """Split a POSIX or Windows path into components, dropping drives, '.', '..' and empties."""
    p = path.strip().strip('"').strip("'")
    p = re.sub(r"^[A-Za-z]:", "", p)            # drive letter
    p = re.sub(r"^\\\\\?\\", "", p)              # \\?\ prefix
    parts = [c for c in re.split(r"[\\/]+", p) if c and c not in (".", "..")]
    return tuple(parts)


def is_notebook(path) -> bool:
    """A Jupyter notebook file (``.ipynb``, any case)."""
    return str(path).lower().endswith(".ipynb")
