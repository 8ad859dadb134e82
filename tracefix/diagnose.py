"""The default command, ``tracefix [LOG ...]``: open the logs (standard input, files, saved
notebooks), diagnose them, print the report, and with --apply write the patches."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import BinaryIO, Dict, List, Optional, Sequence, Tuple

from tracefix.exits import EXIT_NOTHING, EXIT_OK, EXIT_PATCH, Fail, err
from tracefix.options import color, command_hint, load_knowledge, pick_format, project_config, root_dir
from tracefix.render import MACHINE_FORMATS


def _enlarge_pipe(fd: int) -> None:
    """Fewer, larger reads from a pipe (Linux): `python train.py 2>&1 | tracefix` is the common case."""
    try:
        import fcntl
        import stat

        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError, ValueError):
        pass


def _open_logs(logs: Sequence[str]) -> List[Tuple[str, BinaryIO]]:
    if not logs or list(logs) == ["-"]:
        stdin = sys.stdin
        if stdin is None:
            raise Fail("no log given and standard input is closed")
        if stdin.isatty():
            err("tracefix: reading a log from standard input (end with Ctrl-D; see --help)")
        _enlarge_pipe(stdin.fileno())
        return [("<stdin>", stdin.buffer)]
    out = []
    for name in logs:
        if name == "-":
            out.append(("<stdin>", sys.stdin.buffer))
            continue
        path = Path(name)
        if path.is_dir():
            raise Fail(f"{name}: is a directory, not a log file")
        try:
            out.append((name, _notebook_log(name, path) if name.lower().endswith(".ipynb") else open(path, "rb")))
        except OSError as exc:
            raise Fail(f"{name}: cannot read: {exc.strerror or exc}{command_hint(name, path)}") from None
    return out


def _notebook_log(name: str, path: Path) -> BinaryIO:
    """A saved notebook given as a log is read as the tracebacks of its error outputs, so that its
    frames map to cells as a copied traceback's do (its raw JSON would show each error twice,
    with escapes and no frames); a file that is not a notebook is read as it is."""
    import io

    from tracefix.notebook import error_log

    data = path.read_bytes()
    text = error_log(data)
    if text is None:
        return io.BytesIO(data)
    if not text:
        err(f"tracefix: {name}: the notebook holds no error output")
    return io.BytesIO(text)


def _is_empty(stream) -> bool:
    """Does this input hold no byte at all?  (peeks: nothing is consumed)"""
    try:
        import stat

        st = os.fstat(stream.fileno())
        if stat.S_ISREG(st.st_mode):
            return st.st_size == 0 and stream.tell() == 0
    except (AttributeError, OSError, ValueError):
        pass
    peek = getattr(stream, "peek", None)
    if peek is None:
        return False
    try:
        return peek(1) == b""
    except (OSError, ValueError):
        return False


def diagnose_streams(sources, entries, root: Path, patches: bool, search: Optional[bool] = None,
                     find_root: bool = False):
    """(report, the root it was located under).  ``find_root`` (no --root given): the project
    the frames are in when the current directory is a folder inside it (pipeline.project_root)."""
    from tracefix.pipeline import collect, merge, project_root

    reports = []
    for _name, stream in sources:
        try:
            reports.append(collect(stream, entries))
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
    if find_root:
        root, marker = project_root(reports, root)
        if marker is not None:
            err(f"tracefix: project root: {root} (found {marker})")
    return merge(reports, entries, root, patches, search), root


def emit(report, fmt: str, entries, extra: Optional[Dict] = None, root: Optional[Path] = None,
         full: bool = False) -> None:
    from tracefix.render import emit as render_emit

    render_emit(sys.stdout, report, fmt, entries, extra, color=color(), root=str(root) if root else None,
                full=full)


def run_diagnose(logs, root, fmt, knowledge_dirs, do_apply, pick, no_patch, show_all: bool = False) -> None:
    """The default command: diagnose the logs (and apply); exits with its status."""
    cfg = project_config(root)          # [tool.tracefix]: what the command line leaves unsaid
    root = root if root is not None else cfg.get("root")
    fmt = pick_format(fmt or cfg.get("format"))
    entries = load_knowledge(list(knowledge_dirs) or cfg.get("knowledge", []))
    root_path = root_dir(root)
    sources = _open_logs(logs)
    empty = all(_is_empty(stream) for _name, stream in sources)
    want_patches = do_apply or (not no_patch and fmt != "quickfix")  # quickfix shows no patch
    # A folder the user named may be searched; the current directory only when it is a project.
    report, root_path = diagnose_streams(sources, entries, root_path, patches=want_patches,
                                         search=True if root is not None else None, find_root=root is None)
    code = EXIT_OK if report.diagnoses else EXIT_NOTHING
    extra = None
    problems: List[str] = []
    said: List[str] = []        # already applied, and cautions about what was written
    if do_apply and report.diagnoses:
        from tracefix.pipeline import apply_recommended

        done = apply_recommended(report, root_path, pick)
        problems, said = done.problems, done.already + done.cautions
        extra = {"applied": ", ".join(done.written) or ("nothing (already applied)" if done.already else "nothing")}
        if done.unsafe:
            extra["unsafe"] = "; ".join(done.unsafe)
        if problems:
            code = EXIT_PATCH
    if empty and not report.diagnoses:
        err("tracefix: the input is empty (nothing to diagnose)")
        if fmt in MACHINE_FORMATS:
            emit(report, fmt, entries, extra, root_path)
        sys.exit(EXIT_NOTHING)
    emit(report, fmt, entries, extra, root_path, full=show_all)
    if fmt in ("quickfix", "github") and extra and extra["applied"] != "nothing":
        err(f"tracefix: applied: {extra['applied']}")  # stdout holds only the editor's (or the CI's) lines
    for p in said + problems:
        err(f"tracefix: {p}")
    sys.exit(code)
