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
which also print every usage error, so messages and help stay the same on both paths.  Both run
the default command of tracefix.diagnose and share tracefix.exits and tracefix.options; only
``python -m tracefix`` and the console script import this module.
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from tracefix.diagnose import run_diagnose
from tracefix.exits import EXIT_OK, EXIT_USAGE, Fail, err
from tracefix.options import COMMANDS, FORMATS


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
        err("tracefix: interrupted")
        sys.exit(130)
    except MemoryError:
        err("tracefix: error: out of memory")
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # a bug of ours: one line, not a traceback (TRACEFIX_DEBUG=1 shows it)
        if os.environ.get("TRACEFIX_DEBUG"):
            raise
        err(f"tracefix: internal error: {type(exc).__name__}: {exc} (set TRACEFIX_DEBUG=1 for details)")
        sys.exit(EXIT_USAGE)
