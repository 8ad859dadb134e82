"""The IPython extension: ``%load_ext tracefix`` diagnoses known errors right under the cell.

After a cell raises, IPython's own traceback is shown first (unchanged); when the error is one
tracefix knows, the diagnosis follows: the explanation, the crash cell and the fix cell
(``In [7], line 3``) and the diff against the fix cell's source.  Rendered with rich in a
notebook, as plain text in a terminal IPython.  Unknown errors pass through untouched.

``%tracefix``              shows the last diagnosis again
``%tracefix fix``          puts the fixed source of the fix cell in a new cell below (never runs it)
``%tracefix anomaly on``   torch anomaly detection (slow), so that an in-place error carries the
                           forward call that made the saved tensor; ``off`` switches it off

The cells are taken from IPython's input history and read as one module (:mod:`tracefix.notebook`),
so a fix in a cell other than the crashing one is found.  The project's ``.py`` files (the current
folder) are copied, with the session's cells, into a private temporary folder that serves as
``--root``: nothing of the user's is ever written.  Imported only by ``%load_ext``.
"""
from __future__ import annotations

import importlib
import importlib.util
import io
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import List, Optional

from tracefix.record import replace

SESSION = "session.ipynb"
_ATTR = "_tracefix_extension"
MAX_COPY_FILES = 2000
MAX_COPY_BYTES = 50_000_000
MAX_VISIT_FILES = 50_000
COPY_SECONDS = 2.0


class _State:
    def __init__(self, shell) -> None:
        self.shell = shell
        self.previous_exc = (tuple(getattr(shell, "custom_exceptions", ()) or ()), None)
        self.report = None          # the last diagnosis (pipeline.Report)
        self.fixed: Optional[str] = None   # the fix cell's new source
        self.entries = None
        self.witness = None
        self.anomaly: Optional[str] = None       # the anomaly-mode warning of the running cell
        self.showwarning = None


def load(shell) -> None:
    """Install the exception handler and the %tracefix magic; a second call does nothing."""
    if getattr(shell, _ATTR, None) is not None:
        return
    state = _State(shell)
    if getattr(shell, "custom_exceptions", ()):
        # another extension's handler: keep it to put back on unload
        state.previous_exc = (shell.custom_exceptions, getattr(shell, "CustomTB", None))
    setattr(shell, _ATTR, state)
    shell.set_custom_exc((Exception,), _handler)
    shell.register_magic_function(_magic, "line", "tracefix")
    state.showwarning = warnings.showwarning
    warnings.showwarning = _recorder(state)
    shell.events.register("pre_run_cell", state_reset)
    state.witness = _witness()
    if state.witness is not None:
        try:
            state.witness.install()
        except Exception:   # the witness is optional evidence; the diagnosis works without it
            state.witness = None


def unload(shell) -> None:
    """Remove everything ``load`` installed."""
    state = getattr(shell, _ATTR, None)
    if state is None:
        return
    excs, previous = state.previous_exc
    if previous is not None and excs:
        shell.custom_exceptions, shell.CustomTB = excs, previous
    else:
        shell.set_custom_exc((), None)
    shell.magics_manager.magics["line"].pop("tracefix", None)
    if getattr(warnings.showwarning, "_tracefix", False):
        warnings.showwarning = state.showwarning
    try:
        shell.events.unregister("pre_run_cell", state_reset)
    except ValueError:
        pass
    if state.witness is not None:
        try:
            state.witness.uninstall()
        except Exception:
            pass
    delattr(shell, _ATTR)


def _recorder(state: _State):
    """warnings.showwarning that also keeps torch's anomaly-mode warning (the forward trace)."""
    def showwarning(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if "Traceback of forward call" in text:
            state.anomaly = warnings.formatwarning(message, category, filename, lineno, line)
        return state.showwarning(message, category, filename, lineno, file, line)
    showwarning._tracefix = True  # type: ignore[attr-defined]
    return showwarning


def state_reset(*_args) -> None:
    """Before each cell: forget the previous cell's anomaly warning."""
    from IPython import get_ipython
    state = getattr(get_ipython(), _ATTR, None)
    if state is not None:
        state.anomaly = None


def _witness():
    """tracefix.hooks.tracefix_witness when this installation has it, else None."""
    name = "tracefix.hooks.tracefix_witness"
    try:
        if importlib.util.find_spec(name) is None:
            return None
        return importlib.import_module(name)
    except Exception:
        return None


# --- the exception handler -------------------------------------------------------------------------
def _handler(shell, etype, value, tb, tb_offset=None):
    if issubclass(etype, SyntaxError):       # what IPython does for these without a handler
        shell.showsyntaxerror()
        return None
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
    state = getattr(shell, _ATTR, None)
    if state is None:
        return None
    try:
        if _diagnose(state, etype, value, tb):
            _show(state)
    except Exception as exc:   # never let tracefix hide or replace the user's error
        print(f"tracefix: could not diagnose this error ({type(exc).__name__}: {exc})", file=sys.stderr)
    return None


def traceback_text(shell, etype, value, tb) -> str:
    """The traceback as Python prints it, cells named ``<ipython-input-N-…>`` (N = In [N])."""
    te = traceback.TracebackException(etype, value, tb)
    own = str(Path(__file__).resolve().parent) + os.sep
    seen, todo = set(), [te]
    while todo:     # tracefix's own frames (the witness's torch-function mode) are not the user's
        cur = todo.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        cur.stack = traceback.StackSummary.from_list(
            [f for f in cur.stack if not os.path.abspath(f.filename).startswith(own)])
        todo += [cur.__cause__, cur.__context__]
    return cell_names(shell, "".join(te.format()))


def cell_names(shell, text: str) -> str:
    """Cell file names (``/tmp/ipykernel_1/2.py``) in text -> ``<ipython-input-N-tracefix>``."""
    names = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    for filename, number in names.items():
        text = text.replace(f'File "{filename}"', f'File "<ipython-input-{number}-tracefix>"')
    return text


def witness_names(shell, block: str) -> str:
    """The witness's block with cell files named as in the traceback (``<ipython-input-N-tracefix>``),
    so that its sites map to the session's cells by their execution count too."""
    import json
    names = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    for filename, number in names.items():
        name = f"<ipython-input-{number}-tracefix>"
        block = block.replace(json.dumps(filename)[1:-1], name)           # the data line's paths
        base = re.escape(re.split(r"[\\/]", filename)[-1])
        block = re.sub(r"(?<![\w.-])" + base + r":(?=\d)", name + ":", block)   # the summary's name:line
    return block


def _sources(shell) -> List[str]:
    hist = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    if hist is None:
        hist = shell.user_ns.get("In", [])
    return [h if isinstance(h, str) else "" for h in hist]


def _copy_project(src: Path, dst: Path) -> None:
    """The current folder's .py files (bounded), so frames and imports into them are followed."""
    from tracefix.frames import SKIP_DIRS
    count = size = seen = 0
    deadline = time.monotonic() + COPY_SECONDS
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        seen += len(filenames)
        if seen > MAX_VISIT_FILES or time.monotonic() > deadline:
            return      # a kernel started in a home folder: the cells themselves still get analysed
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            path = Path(dirpath) / name
            try:
                if path.is_symlink() or not path.is_file():
                    continue
                size += path.stat().st_size
                count += 1
                if count > MAX_COPY_FILES or size > MAX_COPY_BYTES:
                    return
                target = dst / path.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
            except OSError:
                continue


def _diagnose(state: _State, etype, value, tb) -> bool:
    from tracefix.knowledge import load_entries
    from tracefix.notebook import from_sources
    from tracefix.pipeline import collect, merge

    shell = state.shell
    text = traceback_text(shell, etype, value, tb)
    if state.anomaly:       # printed before the error, as in a log of a run under anomaly mode
        text = cell_names(shell, state.anomaly).rstrip("\n") + "\n" + text
    if state.witness is not None:
        try:
            block = state.witness.evidence_block(value)
            if block:
                text = text.rstrip("\n") + "\n" + witness_names(shell, block).rstrip("\n") + "\n"
        except Exception:
            pass
    if state.entries is None:
        state.entries = load_entries()
    report = collect(io.BytesIO(text.encode("utf-8", "replace")), state.entries)
    if not report.diagnoses:
        return False     # an error tracefix does not know: IPython's traceback is all there is
    import json
    sources = _sources(shell)
    nb = from_sources([(i, src) for i, src in enumerate(sources) if i > 0])
    with tempfile.TemporaryDirectory(prefix="tracefix-kernel-") as tmp:
        root = Path(tmp)
        _copy_project(Path.cwd(), root)
        data = json.dumps(nb, indent=1).encode("utf-8")
        (root / SESSION).write_bytes(data)
        report = merge([report], state.entries, root, patches=True)
        state.fixed = _fixed_cells(report, data)
        state.report = _for_display(report, hint=not state.anomaly and _anomaly_would_help(report))
    return True


def _anomaly_would_help(report) -> bool:
    from tracefix.families import anomaly_helps
    from tracefix.patcher import settled
    return any(anomaly_helps(d.entry_id) and not d.traceback.anomaly_frames
               and (not d.fix_sites or not settled(d)) for d in report.diagnoses)


def _fixed_cells(report, data: bytes) -> Optional[str]:
    from tracefix.notebook import cell_sources
    for d in report.diagnoses:
        for p in d.patches[:1]:
            for rel, old, new in p.files:
                if rel == SESSION:
                    cells = cell_sources(old, new, data)
                    if cells:
                        return "\n\n".join(src for _, _, src in cells)
    return None


_SESSION_DIFF = re.compile(re.escape(SESSION) + r" \(cell \d+ In \[(\d+)\]\)")


def _for_display(report, hint: bool = False):
    """Session sites read ``In [7], line 3``; diff headers name the cell, not the temporary file."""
    from tracefix.families import anomaly_helps

    def words(text: str) -> str:     # a session cell's position is its execution count
        text = re.sub(re.escape(SESSION) + r"(?::|, )(?:cell (\d+), )?line (\d+)",
                      lambda m: f"In [{m.group(1)}], line {m.group(2)}" if m.group(1) else f"line {m.group(2)}", text)
        return re.sub(r"\bcell (\d+), line (\d+)", r"In [\1], line \2", text)

    def site(s):
        if s is None:
            return None
        if s.path == SESSION:
            extra = {"reason": words(s.reason)} if hasattr(s, "reason") else {}
            return replace(s, path="", local_path="", **extra)
        return s
    out = []
    for d in report.diagnoses:
        patches = tuple(replace(p, diff=_SESSION_DIFF.sub(r"In [\1]", p.diff)) for p in d.patches)
        notes = tuple(words(n) for n in d.notes)
        tb = d.traceback
        if tb.evidence is not None:     # the witness's summary names In [N] as the sites do
            tb = replace(tb, evidence=replace(tb.evidence, summary=words(tb.evidence.summary)))
        if hint and anomaly_helps(d.entry_id):
            notes += ("Run `%tracefix anomaly on` and re-run the failing cells: torch then records the forward "
                      "call behind the modified tensor, and the fix site can be named.",)
        out.append(replace(d, crash_site=site(d.crash_site), fix_sites=tuple(site(s) for s in d.fix_sites),
                           patches=patches, notes=notes, traceback=tb))
    return replace(report, diagnoses=tuple(out))


def _in_notebook(shell) -> bool:
    return type(shell).__name__ == "ZMQInteractiveShell"


def _show(state: _State) -> None:
    from tracefix.render import render_plain, render_rich
    report = state.report
    if report is None:
        print("tracefix: no diagnosis yet in this session")
        return
    if _in_notebook(state.shell):
        with _plain_text_without_escapes():
            render_rich(sys.stdout, report.diagnoses, (), state.entries or ())
    else:
        render_plain(sys.stdout, report.diagnoses, (), state.entries or ())
    sys.stdout.flush()


class _plain_text_without_escapes:
    """In a notebook, rich hands the frontend text/html and text/plain; its text/plain carries the
    terminal's colour escapes, which a frontend or a saved notebook shows as raw ``\x1b[31m``
    noise.  While this is active, the text/plain rich displays is the same text without them."""

    def __enter__(self):
        import rich.jupyter

        self.module, self.display = rich.jupyter, rich.jupyter.display

        def display(segments, text):
            segments = list(segments)
            plain = "".join(s.text for s in segments if not s.control)
            return self.display(segments, plain)
        rich.jupyter.display = display
        return self

    def __exit__(self, *exc):
        self.module.display = self.display
        return False


# --- %tracefix --------------------------------------------------------------------------------------
def _magic(line: str = "") -> None:
    """%tracefix: show the last diagnosis again; %tracefix fix: the fixed fix cell, as a new cell below."""
    from IPython import get_ipython
    shell = get_ipython()
    state = getattr(shell, _ATTR, None)
    if state is None:
        print("tracefix: the extension is not loaded (%load_ext tracefix)")
        return
    arg = line.strip()
    if arg in ("", "show"):
        _show(state)
    elif arg == "fix":
        if state.fixed is None:
            if state.report is None:
                print("tracefix: no diagnosis yet in this session")
            else:
                print("tracefix: no automatic fix for a cell of this notebook (see the diagnosis: %tracefix)")
            return
        shell.set_next_input(state.fixed, replace=False)
        print("tracefix: the fixed cell is in a new cell below; run it, then re-run the cell that failed")
    elif arg.split()[:1] == ["anomaly"]:
        _anomaly(arg.split()[1:2] != ["off"])
    else:
        print("usage: %tracefix [fix | anomaly on | anomaly off]")


def _anomaly(on: bool) -> None:
    torch = sys.modules.get("torch")      # the user's torch; tracefix never imports it
    if torch is None:
        print("tracefix: import torch first")
        return
    torch.autograd.set_detect_anomaly(on, check_nan=False)
    if on:   # the same failing cell re-run must show (and hand us) its forward trace again
        warnings.filterwarnings("always", message="Error detected in", category=UserWarning)
    print(f"tracefix: torch anomaly detection {'on (slow; %tracefix anomaly off when done)' if on else 'off'}")
