"""Command line: ``tracefix [LOG ...]`` diagnoses; ``list``, ``explain``, ``undo``, ``run``, ``hook``.

Exit codes:
  0  a known error was diagnosed (and, with --apply, its patch written or already in place)
  1  no known error in the input (or the input is empty)
  2  usage or input error (unreadable log, broken knowledge entry) -- one line on stderr
  3  a requested patch could not be applied
  130 interrupted
``tracefix run`` exits with the command's own status (128+N for signal N; 126/127 when it cannot
be started) unless --apply was given: then 0 patched (and verified), 3 not patched or not verified;
126/127 and a stopped run's status stay, --apply or not (see tracefix.runner).

Start-up matters (`python train.py 2>&1 | tracefix` is run after every crash): the plain diagnose
command line is parsed here without importing click; anything else (a subcommand, --help, an
option or value this parser does not know) goes to the click commands in tracefix.commands,
which also print every usage error, so messages and help stay the same on both paths.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import BinaryIO, Dict, List, Optional, Sequence, Tuple

EXIT_OK, EXIT_NOTHING, EXIT_USAGE, EXIT_PATCH = 0, 1, 2, 3
FORMATS = ("rich", "plain", "json", "quickfix")
COMMANDS = ("diagnose", "list", "explain", "undo", "run", "hook")


class Fail(Exception):
    """A one-line error with our exit code (never a traceback of our own)."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.message = message
        self.exit_code = code

    def show(self) -> None:
        _err(f"tracefix: error: {self.message}")


def _err(text: str) -> None:
    sys.stdout.flush()
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _load(knowledge_dirs: Sequence[str], examples: bool = False):
    from tracefix.knowledge import KnowledgeError, load_entries

    try:
        return load_entries([Path(k) for k in knowledge_dirs], examples=examples,
                            on_replace=lambda i, path: _err(f"tracefix: {path} replaces the entry '{i}'"))
    except KnowledgeError as exc:
        raise Fail(str(exc)) from None


def _pick_format(fmt: Optional[str]) -> str:
    if fmt:
        return fmt
    if os.environ.get("FORCE_COLOR") or sys.stdout.isatty():
        return "rich"
    return "plain"


def _color() -> Optional[bool]:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return None


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
            _err("tracefix: reading a log from standard input (end with Ctrl-D; see --help)")
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
            raise Fail(f"{name}: cannot read: {exc.strerror or exc}{_command_hint(name, path)}") from None
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
        _err(f"tracefix: {name}: the notebook holds no error output")
    return io.BytesIO(text)


def _command_hint(name: str, path: Path) -> str:
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


def _root(root: Optional[str]) -> Path:
    path = Path(root or ".")
    if not path.is_dir():
        raise Fail(f"--root {root}: not a directory")
    return path.resolve()


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
            _err(f"tracefix: project root: {root} (found {marker})")
    return merge(reports, entries, root, patches, search), root


def emit(report, fmt: str, entries, extra: Optional[Dict] = None, root: Optional[Path] = None,
         full: bool = False) -> None:
    from tracefix.render import emit as render_emit

    render_emit(sys.stdout, report, fmt, entries, extra, color=_color(), root=str(root) if root else None,
                full=full)


def run_diagnose(logs, root, fmt, knowledge_dirs, do_apply, pick, no_patch, show_all: bool = False) -> None:
    """The default command: diagnose the logs (and apply); exits with its status."""
    fmt = _pick_format(fmt)
    entries = _load(knowledge_dirs)
    root_path = _root(root)
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
        _err("tracefix: the input is empty (nothing to diagnose)")
        if fmt in ("json", "quickfix"):
            emit(report, fmt, entries, extra, root_path)
        sys.exit(EXIT_NOTHING)
    emit(report, fmt, entries, extra, root_path, full=show_all)
    if fmt == "quickfix" and extra and extra["applied"] != "nothing":
        _err(f"tracefix: applied: {extra['applied']}")  # stdout holds only the editor's lines
    for p in said + problems:
        _err(f"tracefix: {p}")
    sys.exit(code)



def _leave(code) -> None:
    """End the process now, with this exit status, once our output is flushed.  The interpreter's
    teardown frees every module, class and object one by one: after a patch was computed (libcst's
    ~200 node classes and the parsed sources) that is about a tenth of the whole run.  Nothing of
    ours needs it: files are written and closed before this point, and no thread or atexit
    handler is left.  Falls back to a normal exit whenever that is not plainly so."""
    if code is None:
        code = EXIT_OK
    threads = sys.modules.get("threading")
    if not isinstance(code, int) or (threads is not None and threads.active_count() > 1):
        return
    try:
        sys.stdout.flush()      # (a reader that went away is no error: see _Outlet)
        sys.stderr.flush()
    except (OSError, ValueError):
        return                  # let the normal exit report it
    os._exit(code)


class _Outlet:
    """sys.stdout or sys.stderr, for a reader that may go away (`tracefix LOG | head -1`): what
    it no longer reads is dropped quietly, and the exit status stays the one we would have had
    with the reader there.  The first broken pipe points the fd at os.devnull, so that the
    interpreter's own final flush cannot fail either; everything else is the stream's own."""

    def __init__(self, stream):
        self._stream = stream
        self._gone = False

    def write(self, text):
        if self._gone and isinstance(text, str):
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._drop()
            return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._gone:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop()

    def _drop(self) -> None:
        self._gone = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._stream.fileno())
            finally:
                os.close(null)
            self._stream.flush()     # what the broken write left buffered goes to devnull
        except (OSError, ValueError, AttributeError):
            pass                     # no fd of its own (a caller's StringIO): writes are dropped anyway

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _outlets() -> Tuple:
    """Wrap sys.stdout and sys.stderr (see _Outlet); returns what to put back."""
    saved = (sys.stdout, sys.stderr)
    if sys.stdout is not None and not isinstance(sys.stdout, _Outlet):
        sys.stdout = _Outlet(sys.stdout)
    if sys.stderr is not None and not isinstance(sys.stderr, _Outlet):
        sys.stderr = _Outlet(sys.stderr)
    return saved


def _restore_streams(saved: Tuple) -> None:
    """Flush (through the outlets: a gone reader is no error) and put the caller's streams back."""
    for outlet in (sys.stdout, sys.stderr):
        if isinstance(outlet, _Outlet):
            try:
                outlet.flush()
            except (OSError, ValueError):
                pass
    sys.stdout, sys.stderr = saved


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



def _fast_args(args: Sequence[str]) -> Optional[Dict]:
    """The plain diagnose command line parsed as click would, or None: let click do it (help,
    subcommands, anything unusual, and every usage error, so that its messages stay the same)."""
    args = list(args)
    if args and args[0] == "diagnose":
        args = args[1:]
    elif args and args[0] in COMMANDS:
        return None
    out: Dict = {"logs": [], "root": None, "fmt": None, "knowledge_dirs": [], "do_apply": False,
                 "pick": None, "no_patch": False, "show_all": False}
    takes = {"--root": "root", "--format": "fmt", "--knowledge": "knowledge_dirs", "--pick": "pick"}
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            out["logs"] += args[i:]
            break
        if a == "--apply":
            out["do_apply"] = True
        elif a == "--no-patch":
            out["no_patch"] = True
        elif a == "--all":
            out["show_all"] = True
        elif a.split("=", 1)[0] in takes:
            name, eq, value = a.partition("=")
            if not eq:
                if i >= len(args):
                    return None
                value = args[i]
                i += 1
            key = takes[name]
            if key == "knowledge_dirs":
                out[key].append(value)
            else:
                out[key] = value
        elif a.startswith("-") and a != "-":
            return None
        else:
            out["logs"].append(a)
    if out["fmt"] is not None and out["fmt"] not in FORMATS or out["do_apply"] and out["no_patch"]:
        return None
    if out["pick"] is not None:
        try:
            out["pick"] = int(out["pick"])
        except ValueError:
            return None
        if out["pick"] < 1 or not out["do_apply"]:
            return None
    if out["root"] is not None and (out["root"] == "" or os.path.exists(out["root"]) and not os.path.isdir(out["root"])):
        return None
    return out


def entry() -> None:
    """The console script and ``python -m tracefix``: main() in a process of its own."""
    main(quick_exit=True)


def main(argv: Optional[Sequence[str]] = None, quick_exit: bool = False) -> None:
    """quick_exit: after a diagnosis, end the process without the interpreter's teardown (only
    for a process that runs nothing else after us: entry())."""
    args = list(sys.argv[1:] if argv is None else argv)
    saved = _outlets()
    try:
        _main(args, quick_exit)
    finally:
        _restore_streams(saved)


def _main(args: List[str], quick_exit: bool) -> None:
    try:
        fast = _fast_args(args)
        if fast is not None:
            try:
                run_diagnose(**fast)
            except SystemExit as done:
                if quick_exit:
                    _leave(done.code)
                raise
        from tracefix.commands import click_main

        sys.exit(click_main(args))
    except Fail as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _err("tracefix: interrupted")
        sys.exit(130)
    except MemoryError:
        _err("tracefix: error: out of memory")
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # a bug of ours: one line, not a traceback (TRACEFIX_DEBUG=1 shows it)
        if os.environ.get("TRACEFIX_DEBUG"):
            raise
        _err(f"tracefix: internal error: {type(exc).__name__}: {exc} (set TRACEFIX_DEBUG=1 for details)")
        sys.exit(EXIT_USAGE)
