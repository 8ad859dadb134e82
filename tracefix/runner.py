"""``tracefix run -- COMMAND``: run a training command, and diagnose (patch, verify) its crash.

What it does:

1. Runs COMMAND with its output reaching the terminal live and byte for byte (where our output
   is a terminal, the child writes to a pseudo-terminal on POSIX, so progress bars and colours
   behave as usual; elsewhere to pipes), while keeping the last ``TAIL_BYTES`` of each of its
   stdout and stderr for diagnosis (see Tail).  With ``--format json`` the child's output goes
   to stderr, so that stdout holds only the JSON object.
2. The child runs in its own session / process group (POSIX); SIGINT, SIGTERM, SIGHUP and
   SIGQUIT sent to tracefix are forwarded to that whole group, Ctrl-Z stops and resumes it with
   us, and tracefix waits for it: no orphan is left behind.
3. If COMMAND fails, its output tail is diagnosed and the report printed after its output.
   The witness (``tracefix/hooks/tracefix_witness.py``, ``TRACEFIX_WITNESS=1``) is armed in the
   child unless ``--no-witness``: when the command crashes it prints an evidence block after the
   traceback, which the reader attaches to the diagnosis (see docs/witness.md).
4. ``--anomaly``: an in-place error that neither a forward trace nor witness evidence explains
   is re-run once with
   ``torch.autograd`` anomaly detection switched on from outside (``tracefix/hooks`` first on
   ``PYTHONPATH``, ``TRACEFIX_ANOMALY=1``; no user file is edited), and the re-run's diagnosis,
   whose fix sites come from the forward trace, replaces the first one.
5. ``--apply`` writes the recommended patches; ``--verify`` then re-runs COMMAND with
   ``TRACEFIX_VERIFY_STEPS=N`` and ``TRACEFIX_VERIFY_TIMEOUT=S`` (``--verify-timeout``, default
   60): the hook checks that N backward passes and N optimizer steps ran and that a trainable
   parameter got a non-zero gradient and changed, then lets the command run on, and ends it S
   seconds after the steps if it has not ended.  The verdict is ``verified`` (the steps trained,
   then the command exited 0 or reached the time bound without an error; also when the command
   then fails only because the hook ended the process that trained at the time bound, e.g.
   nbconvert's "Kernel died"), ``still failing`` (the same error id again, or one of its
   sequels: ``loss.item()`` of a loss reduced for backward() only), ``new error`` (another crash,
   also after the steps, diagnosed and shown), ``not training`` (no parameter changed) or
   ``not run``.  One line says how far it went (JSON: ``verification_detail``).

Exit status:
  the child's own status (a signal N gives 128+N) when tracefix wrote nothing: the command
  succeeded, failed with no known error, or was only diagnosed (no --apply);
  0   --apply: a known error was diagnosed and patched, or its patch is already in place (and,
      with --verify, verified)
  3   --apply: the crash was not patched (no known error, or a patch could not be written), or
      --verify found the command still failing, failing with a new error or not training; then every file the
      patch wrote is restored byte for byte (cli.py's "a requested patch could not be applied")
  126 / 127  COMMAND (or a re-run) could not be executed / was not found, with --apply too
  the child's own status, with --apply too, when the run was stopped (SIGINT, SIGTERM, SIGHUP,
  SIGQUIT: 128+N; or it ended on a KeyboardInterrupt); a stopped --verify run leaves the patch
  written
After every run that did not succeed, the plain and rich output end with the summary lines, the
last one ``exit code:`` (tracefix's own status).
JSON output always carries ``exit_code`` (tracefix's own status, as above), ``command_exit_code``
(the first run's status) and ``verification``; after a failed verification ``restored`` and
``new_error`` (the patched run's diagnoses and unrecognized errors, the same error's too).
"""
from __future__ import annotations

import errno
import io
import os
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from tracefix.hooks import (ENV_ANOMALY, ENV_VERIFY_STEPS, ENV_VERIFY_TIMEOUT, ENV_WITNESS, HOOKS_DIR,
                            VERIFIED_MARKER, VERIFY_MARK)
from tracefix.record import record, replace

TAIL_BYTES = 4 << 20        # output kept for diagnosis, per channel (stdout, stderr)
READ_SIZE = 1 << 20         # one os.read
DRAIN_IDLE_S = 0.2          # after the child exits: wait this long for more output from its children
DRAIN_MAX_S = 2.0           # ... but no longer than this in all
EXIT_OK, EXIT_PATCH = 0, 3
POSIX = os.name == "posix"
FORWARDED = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, n))
INTERRUPTS = {int(s) for s in FORWARDED}
VERIFY_TIMEOUT_S = 60.0     # --verify: how long the patched command may run on after the steps
# --- the environment that switches the hooks on ------------------------------------------------
def hook_env(anomaly: bool = False, verify_steps: Optional[int] = None,
             base: Optional[Mapping[str, str]] = None, witness: bool = False,
             verify_timeout: Optional[float] = None) -> Dict[str, str]:
    """The variables that enable tracefix's hooks in any Python started with them (see tracefix.hooks).

    ``PYTHONPATH`` gets the hooks folder first, the existing value (from ``base``, default the
    current environment) kept after it.
    """
    base = os.environ if base is None else base
    hooks = str(HOOKS_DIR)
    existing = base.get("PYTHONPATH", "")
    parts = existing.split(os.pathsep) if existing else []
    if parts and parts[0] == hooks:
        parts = parts[1:]
    env = {"PYTHONPATH": os.pathsep.join([hooks, *parts])}
    if anomaly:
        env[ENV_ANOMALY] = "1"
    if verify_steps:
        env[ENV_VERIFY_STEPS] = str(int(verify_steps))
        if verify_timeout is not None:        # unset: the hook's default (60 s)
            env[ENV_VERIFY_TIMEOUT] = f"{float(verify_timeout):g}"
    if witness:
        env[ENV_WITNESS] = "1"
    return env


def format_env(env: Mapping[str, str], shell: str = "sh") -> str:
    """``export K=V`` (sh), ``$env:K = "V"`` (powershell) or ``set K=V`` (cmd), one per line."""
    lines = []
    for key, value in env.items():
        if shell == "sh":
            lines.append(f"export {key}={shlex.quote(value)}")
        elif shell == "powershell":
            escaped = value.replace("`", "``").replace('"', '`"').replace("$", "`$")
            lines.append(f'$env:{key} = "{escaped}"')
        elif shell == "cmd":
            special = any(c in value for c in ' &|<>^()"')
            lines.append(f'set "{key}={value}"' if special else f"set {key}={value}")
        else:
            raise ValueError(f"unknown shell {shell!r} (sh, powershell, cmd)")
    return "\n".join(lines)


# --- running the child ----------------------------------------------------------------------
class Tail:
    """The last ``limit`` bytes each output channel wrote, kept cheaply (amortised: one trim per
    ``limit`` bytes).

    Each channel (the child's stdout, its stderr) is kept apart and handed on whole, stdout's
    first: the order in which two pipes are read is not the order in which they were written, so
    a merged tail could cut a traceback with a line printed before it (a ``print`` just before
    the crash, read after the traceback's first lines).  A traceback is one stream's, and so is
    the evidence printed after it: neither is split.
    """

    def __init__(self, limit: int = TAIL_BYTES):
        self.limit = limit
        self._bufs: Dict[int, bytearray] = {}
        self._lock = threading.Lock()

    def feed(self, data: bytes, channel: int) -> None:
        with self._lock:
            buf = self._bufs.get(channel)
            if buf is None:
                buf = self._bufs[channel] = bytearray()
            buf += data
            if len(buf) > 2 * self.limit:
                del buf[:-self.limit]

    def getvalue(self) -> bytes:
        with self._lock:
            parts = [bytes(self._bufs[c][-self.limit:]) for c in sorted(self._bufs)]
        return b"".join(p if p.endswith((b"\n", b"\r")) or k == len(parts) - 1 else p + b"\n"
                        for k, p in enumerate(parts))


@record
class Outcome:
    returncode: Optional[int]       # as subprocess reports it (negative: killed by that signal)
    tail: bytes = b""
    forwarded: Optional[int] = None  # a signal that we forwarded to the child (the user interrupted)
    error: str = ""                 # could not start it
    error_code: int = 0

    @property
    def exit_code(self) -> int:
        if self.error:
            return self.error_code
        rc = self.returncode or 0
        return 128 - rc if rc < 0 else rc

    @property
    def interrupted(self) -> bool:
        return self.forwarded is not None or (self.returncode is not None and -self.returncode in INTERRUPTS)


# our output fds whose last forwarded byte left a line open (the command printed no newline last)
_OPEN_LINE: Dict[int, bool] = {}


class _Sink:
    """One of our output fds; stops writing (but the child keeps being drained) once it is gone."""

    def __init__(self, fd: int):
        self.fd = fd
        self.alive = True

    def write(self, data: bytes) -> None:
        if not self.alive:
            return
        if data:
            _OPEN_LINE[self.fd] = not data.endswith((b"\n", b"\r"))
        view = memoryview(data)
        try:
            while view:
                try:
                    n = os.write(self.fd, view)
                except BlockingIOError:   # someone made our stdout non-blocking
                    import select

                    select.select([], [self.fd], [], 1.0)
                    continue
                view = view[n:]
        except OSError:                  # EPIPE (reader went away), EBADF (closed): drop output
            self.alive = False


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _copy_winsize(src: int, dst: int) -> None:
    try:
        import fcntl
        import termios

        size = fcntl.ioctl(src, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(dst, termios.TIOCSWINSZ, size)
    except (ImportError, OSError, AttributeError):
        pass


def _open_pty(dest: int) -> Tuple[int, int]:
    """A pseudo-terminal (master, slave) that passes the child's bytes unchanged, sized like ``dest``."""
    import termios

    master, slave = os.openpty()
    try:
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.OPOST       # no "\n" -> "\r\n": our terminal does its own output processing
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
    except termios.error:
        pass
    _copy_winsize(dest, slave)
    return master, slave


def _open_pipe() -> Tuple[int, int]:
    r, w = os.pipe()
    try:  # Linux: larger pipe, fewer wake-ups and reads
        import fcntl

        fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), READ_SIZE)
    except (ImportError, OSError, ValueError):
        pass
    return r, w


def run_child(cmd: Sequence[str], env: Optional[Mapping[str, str]] = None, to_stderr: bool = False,
              tail_bytes: int = TAIL_BYTES, cleanup: bool = False) -> Outcome:
    """Run ``cmd``; its stdout goes to our fd 1 (fd 2 when ``to_stderr``) and its stderr to fd 2.

    ``cleanup``: once it ended, kill whatever is left of its process group (our own re-runs,
    which the verify hook cuts short).  That is also done whenever we forwarded a signal.
    """
    dests = (2 if to_stderr else 1, 2)
    try:
        if POSIX:
            return _run_posix(list(cmd), env, dests, Tail(tail_bytes), cleanup)
        return _run_threads(list(cmd), env, dests, Tail(tail_bytes), cleanup)
    except FileNotFoundError:
        return Outcome(None, error=f"{cmd[0]}: command not found", error_code=127)
    except PermissionError as exc:
        return Outcome(None, error=f"{cmd[0]}: cannot execute: {exc.strerror or exc}", error_code=126)
    except OSError as exc:
        return Outcome(None, error=f"{cmd[0]}: cannot execute: {exc.strerror or exc}", error_code=126)


def _kill_group(proc, signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)
    except OSError:
        pass


def _open_channels(dests: Tuple[int, int]) -> Tuple[Dict[int, Tuple[int, int]], List[Tuple[int, int]]]:
    """One channel per distinct destination, a pty where it is a terminal, else a pipe:
    (dest fd -> (our read end, child's write end), the (dest, master) of the ptys)."""
    channels: Dict[int, Tuple[int, int]] = {}
    for dest in dict.fromkeys(dests):
        channels[dest] = _open_pty(dest) if _isatty(dest) else _open_pipe()
    ptys = [(dest, r) for dest, (r, _w) in channels.items() if _isatty(dest)]
    return channels, ptys


class _ChildSignals:
    """Our signal handlers while the child runs: interrupts go to its process group (``forwarded``
    keeps the last), Ctrl-Z stops it with us, a resized terminal resizes its ptys."""

    def __init__(self, ptys: List[Tuple[int, int]]):
        self.ptys = ptys
        self.proc = None                # set once it started: a signal before that is forwarded then
        self.forwarded: Optional[int] = None
        self._previous: Dict[int, object] = {}

    def install(self) -> None:
        """Only the main thread may set handlers (a re-run from another thread goes without)."""
        handlers = {s: self.forward for s in FORWARDED}
        handlers[signal.SIGTSTP] = self.suspend
        if self.ptys:
            handlers[signal.SIGWINCH] = self.resized
        if threading.current_thread() is threading.main_thread():
            for s, h in handlers.items():
                self._previous[s] = signal.signal(s, h)

    def restore(self) -> None:
        for s, h in self._previous.items():
            signal.signal(s, h)

    def forward(self, signum, _frame) -> None:
        self.forwarded = signum
        if self.proc is not None:
            _kill_group(self.proc, signum)

    def suspend(self, _signum, _frame) -> None:     # Ctrl-Z: stop the child's group, then ourselves
        if self.proc is not None:
            _kill_group(self.proc, signal.SIGSTOP)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)
        # ... resumed (fg / bg)
        signal.signal(signal.SIGTSTP, self.suspend)
        if self.proc is not None:
            _kill_group(self.proc, signal.SIGCONT)

    def resized(self, _signum, _frame) -> None:
        for dest, master in self.ptys:
            _copy_winsize(dest, master)
        if self.proc is not None:
            _kill_group(self.proc, signal.SIGWINCH)


def _drain(channels: Dict[int, Tuple[int, int]], wake_r: int, tail: Tail) -> None:
    """Copy the child's output to our fds and ``tail`` until every channel is closed, or, once
    ``wake_r`` says the child exited, until its output goes quiet (children of its own may hold it)."""
    import selectors
    import time

    readers = {r: _Sink(dest) for dest, (r, _w) in channels.items()}
    sel = selectors.DefaultSelector()
    for r in readers:
        sel.register(r, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    deadline = None
    while readers:
        timeout = None
        if deadline is not None:
            timeout = min(DRAIN_IDLE_S, deadline - time.monotonic())
            if timeout <= 0:
                break
        events = sel.select(timeout)
        if not events and deadline is not None:
            break          # the child is gone; whoever still holds its output is not talking
        for key, _mask in events:
            fd = key.fd
            if fd == wake_r:
                sel.unregister(wake_r)
                deadline = time.monotonic() + DRAIN_MAX_S
                continue
            try:
                data = os.read(fd, READ_SIZE)
            except OSError as exc:
                if exc.errno not in (errno.EIO, errno.EBADF):   # EIO: pty closed on its slave side
                    raise
                data = b""
            if not data:
                sel.unregister(fd)
                os.close(fd)
                del readers[fd]
                continue
            readers[fd].write(data)
            tail.feed(data, readers[fd].fd)
    sel.close()
    for fd in readers:
        os.close(fd)


def _run_posix(cmd: List[str], env, dests: Tuple[int, int], tail: Tail, cleanup: bool) -> Outcome:
    import subprocess

    channels, ptys = _open_channels(dests)
    signals = _ChildSignals(ptys)
    signals.install()
    wake_r, wake_w = os.pipe()
    waiting: Optional[threading.Thread] = None
    try:
        try:
            proc = signals.proc = subprocess.Popen(cmd, env=None if env is None else dict(env),
                                                   stdout=channels[dests[0]][1], stderr=channels[dests[1]][1],
                                                   start_new_session=True, close_fds=True)
        finally:
            for _r, w in channels.values():
                os.close(w)
        if signals.forwarded is not None:     # a signal arrived while it was starting
            signals.forward(signals.forwarded, None)

        def waiter():
            proc.wait()
            os.write(wake_w, b"x")

        waiting = threading.Thread(target=waiter, name="tracefix-wait", daemon=True)
        waiting.start()
        _drain(channels, wake_r, tail)
        while waiting.is_alive():    # (join with a timeout: signals keep being handled meanwhile)
            waiting.join(0.5)
        waiting = None
        if signals.forwarded is not None or cleanup:
            # The user asked it to stop: whatever of its group survived goes too.
            _kill_group(proc, signal.SIGKILL)
        return Outcome(proc.returncode, tail.getvalue(), signals.forwarded)
    except BaseException:
        if signals.proc is not None and signals.proc.returncode is None:
            _kill_group(signals.proc, signal.SIGKILL)
            signals.proc.wait()
        raise
    finally:
        if waiting is not None and signals.proc is not None and signals.proc.returncode is not None:
            waiting.join(1.0)
        os.close(wake_r)
        os.close(wake_w)
        signals.restore()


def _run_threads(cmd: List[str], env, dests: Tuple[int, int], tail: Tail, cleanup: bool) -> Outcome:
    """Windows (no pty, no process groups): pipes drained by threads; Ctrl-C reaches the child
    through the console by itself, we only keep waiting for it."""
    import subprocess

    merged = dests[0] == dests[1]
    proc = subprocess.Popen(cmd, env=None if env is None else dict(env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if merged else subprocess.PIPE)
    streams = [(proc.stdout, _Sink(dests[0]))]
    if not merged:
        streams.append((proc.stderr, _Sink(dests[1])))

    def pump(stream, sink):
        fd = stream.fileno()
        while True:
            try:
                data = os.read(fd, READ_SIZE)
            except OSError:
                break
            if not data:
                break
            sink.write(data)
            tail.feed(data, sink.fd)

    threads = [threading.Thread(target=pump, args=s, daemon=True) for s in streams]
    for t in threads:
        t.start()
    forwarded = None
    while True:
        try:
            proc.wait()
            break
        except KeyboardInterrupt:
            forwarded = signal.SIGINT
    for t in threads:
        t.join(DRAIN_MAX_S)
    return Outcome(proc.returncode, tail.getvalue(), forwarded)


# --- diagnosis ------------------------------------------------------------------------------
def _end_lines() -> None:
    """Before tracefix writes: end the command's last line on each stream where it left one open
    (a command that succeeds keeps its output byte for byte: then tracefix writes nothing)."""
    for fd, open_line in list(_OPEN_LINE.items()):
        if open_line:
            sys.stdout.flush()
            sys.stderr.flush()
            try:
                os.write(fd, b"\n")
            except OSError:
                pass
        _OPEN_LINE[fd] = False


def _note(text: str) -> None:
    _end_lines()
    sys.stderr.write(f"tracefix: {text}\n")
    sys.stderr.flush()


def _diagnose(tail: bytes, entries, root: Path):
    from tracefix.pipeline import collect, merge

    report = collect(io.BytesIO(tail), entries)
    if not report.diagnoses:
        return report
    return merge([report], entries, root, True)


def _project_root(tail: bytes, entries, start: Path) -> Path:
    """For a run without --root: the project the crash's frames are in (pipeline.project_root)."""
    from tracefix.pipeline import collect, project_root

    root, marker = project_root([collect(io.BytesIO(tail), entries)], start)
    if marker is not None:
        _note(f"project root: {root} (found {marker})")
    return root


def _needs_anomaly(report) -> bool:
    """An error anomaly mode helps locate (in place) that neither a forward trace nor the witness's
    evidence explains."""
    from tracefix.families import anomaly_helps

    return any(anomaly_helps(d.entry_id) and not d.traceback.anomaly_frames and d.traceback.evidence is None
               for d in report.diagnoses)


def _child_env(no_witness: bool = False, **hooks) -> Dict[str, str]:
    env = dict(os.environ)
    if no_witness:
        if env.get(ENV_WITNESS):     # exported by `eval "$(tracefix hook --print-env)"`: --no-witness wins
            env[ENV_WITNESS] = "0"
        return env
    env.update(hook_env(**hooks))
    return env


def _only_interrupt(report) -> bool:
    return not report.diagnoses and bool(report.unrecognized) and all(
        t == "KeyboardInterrupt" for t, _m in report.unrecognized)


def _emit(report, fmt: str, entries, extra: Optional[Dict], color: Optional[bool], root: Path,
          full: bool = False) -> None:
    from tracefix.render import emit

    _end_lines()
    sys.stdout.flush()
    emit(sys.stdout, report, fmt, entries, extra, color=color, source="the command's output", root=str(root),
         full=full)


def _summary(extra: Dict, fmt: str, color: Optional[bool]) -> None:
    """The summary lines alone, as the report would end (nothing was diagnosed: the command could
    not start, or was stopped).  quickfix shows none: its stdout holds only the editor's lines."""
    from tracefix.render import safe

    lines = [safe(f"{k.replace('_', ' ')}: {v}") for k, v in extra.items()]
    _end_lines()
    if fmt == "rich":
        from rich.console import Console
        from rich.text import Text

        console = Console(file=sys.stdout, force_terminal=color, no_color=(color is False), highlight=False,
                          emoji=False, markup=False)
        for line in lines:
            console.print(Text(line, style="bold"))
    elif fmt == "plain":
        sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()


def _finish(report, extra: Dict, code: int, command_code: int, fmt: str, entries, color: Optional[bool],
            root: Path, after=None, why: str = "", full: bool = False) -> int:
    """Print the report (None: nothing was diagnosed) and the summary, whose last line is
    ``exit code:``, tracefix's own status (JSON: ``exit_code``); returns that status.  ``after``:
    the patched run's new error, shown before that last line."""
    extra["command_exit_code"] = command_code         # the crashed run's; JSON always has it
    if fmt != "json" and command_code == code:
        del extra["command_exit_code"]
    extra["exit_code"] = code
    if report is None and fmt != "json":
        _summary(extra, fmt, color)
    elif report is None:
        from tracefix.pipeline import Report

        _emit(Report((), ()), fmt, entries, extra, color, root)
    elif after is not None and fmt != "json":
        _emit(report, fmt, entries, {k: v for k, v in extra.items() if k != "exit_code"}, color, root, full)
        print(f"\ntracefix: after the patch, the command fails with a different error: {why}", flush=True)
        if after.diagnoses:
            _emit(replace(after, unrecognized=()), fmt, entries, None, color, root, full)
        print(f"exit code: {code}", flush=True)
    else:
        _emit(report, fmt, entries, extra, color, root, full)
    return code


@record
class _RunOptions:
    """One ``tracefix run``'s options; ``root`` may move to the crash's project (find_root)."""
    cmd: List[str]
    root: Path
    entries: object
    fmt: str
    apply: bool
    verify: bool
    anomaly: bool
    steps: int
    pick: Optional[int]
    color: Optional[bool]
    witness: bool
    verify_timeout: float
    find_root: bool
    full: bool
    to_stderr: bool     # json and quickfix: their stdout is for a program, the command's output goes aside

    def finish(self, report, extra: Dict, code: int, command_code: int, after=None, why: str = "") -> int:
        return _finish(report, extra, code, command_code, self.fmt, self.entries, self.color, self.root,
                       after=after, why=why, full=self.full)


def run_main(cmd: List[str], *, root: Path, entries, fmt: str, apply: bool, verify: bool, anomaly: bool,
             steps: int, pick: Optional[int], color: Optional[bool], witness: bool = True,
             verify_timeout: float = VERIFY_TIMEOUT_S, find_root: bool = False, full: bool = False) -> int:
    """``tracefix run``: see the module docstring; returns the exit status.  ``find_root`` (no
    --root given): root is the current directory, or the project above it that the crash is in."""
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        _note("error: no command given (tracefix run [OPTIONS] -- COMMAND ...)")
        return 2
    from tracefix.render import MACHINE_FORMATS

    opts = _RunOptions(cmd=cmd, root=root, entries=entries, fmt=fmt, apply=apply, verify=verify, anomaly=anomaly,
                       steps=steps, pick=pick, color=color, witness=witness, verify_timeout=verify_timeout,
                       find_root=find_root, full=full, to_stderr=fmt in MACHINE_FORMATS)
    extra: Dict[str, object] = {"applied": "nothing"} if apply else {}
    if verify or fmt == "json":
        extra["verification"] = "not run"

    first = run_child(cmd, _child_env(witness=True) if witness else _child_env(no_witness=True), opts.to_stderr)
    command_code = first.exit_code
    code = _nothing_to_diagnose(opts, first, extra)
    if code is not None:
        return code
    try:
        if find_root:
            opts.root = _project_root(first.tail, entries, opts.root)
        report = _diagnose(first.tail, entries, opts.root)
    except Exception as exc:  # our failure must not hide the child's
        if os.environ.get("TRACEFIX_DEBUG"):
            raise
        _note(f"internal error while diagnosing: {type(exc).__name__}: {exc} (set TRACEFIX_DEBUG=1 for details)")
        return opts.finish(None, extra, EXIT_PATCH if apply else command_code, command_code)
    if _only_interrupt(report):     # it ended on a KeyboardInterrupt: the user stopped it
        return opts.finish(None, extra, command_code, command_code)
    if witness and report.diagnoses and all(d.traceback.evidence is None for d in report.diagnoses):
        _note("the witness recorded no evidence for this error; the diagnosis rests on the log and the source")
    if anomaly:
        report, stopped = _anomaly_rerun(opts, report, extra)
        if stopped is not None:
            return opts.finish(report, extra, stopped, command_code)

    code, problems, after, verdict, why = _apply_and_verify(opts, report, extra, command_code)
    if after is not None and fmt == "json":
        from tracefix.render import as_dict

        details = as_dict(after.diagnoses, after.unrecognized)
        extra["new_error"] = {"diagnoses": details["diagnoses"], "unrecognized": details["unrecognized"]}
    opts.finish(report, extra, code, command_code, after=after if verdict == "new error" else None, why=why)
    for p in problems:
        _note(p)
    return code


def _nothing_to_diagnose(opts: _RunOptions, first: Outcome, extra: Dict) -> Optional[int]:
    """The exit status when the first run leaves nothing to diagnose, else None."""
    command_code = first.exit_code
    if first.returncode == 0 and not first.error:
        # it succeeded: nothing to patch, and its output stays byte for byte (JSON: the same keys)
        return opts.finish(None, extra, EXIT_OK, EXIT_OK) if opts.fmt == "json" else EXIT_OK
    if not (first.error or first.interrupted):
        return None
    # nothing to diagnose: it could not start (126/127), or was stopped (its status, 128+N)
    if first.error:
        _note(f"error: {first.error}")
        if opts.fmt == "json":
            extra["error"] = first.error
    elif first.forwarded is None and first.returncode is not None and first.returncode < 0:
        _note(f"the command was stopped by {_signal_name(-first.returncode)} (exit code {command_code})")
    return opts.finish(None, extra, command_code, command_code)


def _anomaly_rerun(opts: _RunOptions, report, extra: Dict):
    """--anomaly: (the report to go on with, the exit status when the re-run was stopped or could
    not start, else None)."""
    if not _needs_anomaly(report):
        if report.diagnoses:
            _note("--anomaly: not needed (no in-place error that a forward trace or the witness did not explain)")
        return report, None
    _note("re-running the command once with torch anomaly detection on, to find the forward "
          "operation behind the in-place error (anomaly mode is slow; it is used only for this "
          "re-run, your files are not changed)")
    again = run_child(opts.cmd, _child_env(anomaly=True, witness=opts.witness), opts.to_stderr, cleanup=True)
    if again.interrupted or again.error:
        if again.error:
            _note(f"error: {again.error}")
            if opts.fmt == "json":
                extra["error"] = again.error
        return report, again.exit_code
    rerun = _diagnose(again.tail, opts.entries, opts.root)
    from tracefix.families import anomaly_helps

    if any(anomaly_helps(d.entry_id) and d.traceback.anomaly_frames for d in rerun.diagnoses):
        _note("anomaly re-run: the forward trace located the in-place operation")
        return rerun, None
    _note("anomaly re-run: the error did not come back with a forward trace; keeping the first diagnosis")
    return report, None


def _apply_and_verify(opts: _RunOptions, report, extra: Dict, command_code: int):
    """--apply, and --verify: (exit status, problems to note after the report, the report of the
    patched run's failure or None, the verdict, one line on it)."""
    if not opts.apply:
        return command_code, [], None, "not run", ""
    if not report.diagnoses:
        # --apply promises a patch: a crash we cannot diagnose is "not patched" (exit 3)
        return EXIT_PATCH, ["not patched: no known PyTorch error in the command's output"], None, "not run", ""
    from tracefix.pipeline import apply_recommended

    done = apply_recommended(report, opts.root, opts.pick)
    written, problems = done.written, done.already + done.problems
    extra["applied"] = ", ".join(written) or ("nothing (already applied)" if done.already else "nothing")
    verdict, after, why = "not run", None, ""
    stopped = None              # the verification run's own status, when it did not really run
    if written and opts.verify:
        verdict, after, why, stopped = _verify_written(opts, report, written, extra)
    if "restored" not in extra:
        problems += done.cautions
        if done.unsafe:
            extra["unsafe"] = "; ".join(done.unsafe)   # the summary on stdout, not only stderr
    ok = (bool(written) or bool(done.already)) and not done.problems \
        and verdict in ("verified", "not run")
    code = stopped if stopped is not None else (EXIT_OK if ok else EXIT_PATCH)
    return code, problems, after, verdict, why


def _verify_written(opts: _RunOptions, report, written: List[str], extra: Dict):
    """--verify the patch just written, taking it back when it failed: (verdict, the report of the
    patched run's failure or None, one line on it, the run's own status when it did not really run)."""
    _note(f"patched {', '.join(written)}; re-running (--verify): {opts.steps} optimizer steps must train, "
          f"then the command must run on without an error, to its end or for {opts.verify_timeout:g} s")
    verdict, after, outcome, why = _verify(opts.cmd, report, opts.entries, opts.root, opts.steps, opts.to_stderr,
                                           opts.witness, opts.verify_timeout)
    extra["verification"] = verdict
    if why and opts.fmt == "json":
        extra["verification_detail"] = why
    if verdict == "verified":
        _note(why)
    stopped = None
    if outcome.interrupted or outcome.error:
        stopped = outcome.exit_code
        if outcome.error and opts.fmt == "json":
            extra["error"] = outcome.error
        _note("the patch stays written, unverified (tracefix undo takes it back)")
    elif verdict in ("still failing", "new error", "not training"):
        extra["restored"] = _restore(opts.root, written, why)
        if extra["restored"] != "no":
            extra["applied"] += " (taken back: the verification failed)"
    return verdict, after, why, stopped


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _restore(root: Path, written: List[str], why: str) -> str:
    """Put back the files a failed verification leaves patched (byte for byte); say so, and why."""
    from tracefix.patcher import PatchError, undo

    try:
        restored = undo(root)
    except PatchError as exc:
        _note(f"verification failed ({why}); could not restore {', '.join(written)}: {exc}")
        return "no"
    _note(f"verification failed, so the patch was taken back: {', '.join(restored)} restored byte for byte. "
          f"Not verified: {why}")
    return ", ".join(restored)


def _one_line(report, outcome: Outcome) -> str:
    """The patched run's error, in one line (the verify hook's own lines are not its output)."""
    for d in report.diagnoses:
        exc = d.traceback
        return f"{exc.exc_type + ': ' if exc.exc_type else ''}{exc.message.splitlines()[0] if exc.message else d.entry_id}"[:300]
    for t, m in report.unrecognized:
        return f"{t}: {m.splitlines()[0] if m else ''}"[:300]
    last = [ln for ln in outcome.tail.decode("utf-8", "replace").splitlines()
            if ln.strip() and not ln.startswith(VERIFY_MARK)]
    tail = f" (last output: {last[-1].strip()[:200]})" if last else ""
    return f"exit status {outcome.exit_code}{tail}"


def _hook_said(tail: bytes) -> Dict[str, str]:
    """The verify hook's lines (``tracefix: verify: KIND: text``), the last of each kind."""
    import re

    mark = re.escape(VERIFY_MARK.encode())
    return {m.group(1).decode(): m.group(2).decode("utf-8", "replace").strip()
            for m in re.finditer(rb"^" + mark + rb"([a-z ]+): ([^\r\n]*)", tail, re.M)}


def _sequel(after, before) -> bool:
    """The patched run died of an error that follows from one of ``before``'s families."""
    import re

    from tracefix.families import sequels

    patterns = [p for entry_id in before for p in sequels(entry_id)]
    return any(re.search(p, m or "") for p in patterns for _t, m in after.unrecognized)


def _verify(cmd, report, entries, root: Path, steps: int, to_stderr: bool, witness: bool = True,
            timeout: float = VERIFY_TIMEOUT_S):
    """Re-run with the verify hook: (verdict, the report of the patched run's failure or None,
    the run's Outcome, one line: how far it went when verified, else why not).

    ``verified``: the steps ran, a parameter got a non-zero gradient and changed (the hook's
    ``steps ok``), and then the command ran to its end (exit 0) or on until the hook stopped it
    ``timeout`` seconds later, without an error.  ``still failing``: the same family's error or
    one of its family's sequels; ``new error``: any other failure; ``not training``: nothing changed."""
    import time

    started = time.monotonic()
    outcome = run_child(cmd, _child_env(verify_steps=steps, witness=witness, verify_timeout=timeout), to_stderr,
                        cleanup=True)
    took = time.monotonic() - started
    if outcome.error:
        _note(f"error: {outcome.error}")
        return "not run", None, outcome, ""
    if outcome.interrupted:
        return "not run", None, outcome, ""
    said = _hook_said(outcome.tail)
    if "not training" in said:
        return "not training", None, outcome, said["not training"]
    trained = said.get("steps ok", "")
    parts = trained.split("; ")
    done = parts[0].split(" (")[0] if trained else f"{steps} optimizer steps"
    checks = parts[1] if len(parts) > 1 else "gradients non-zero, parameters changed"
    how = f"{done}, {checks.replace(', parameters', ' and parameters')}"
    bound = f"stopped at the time bound, {timeout:g} s after the steps ({took:.1f} s in all)"
    if outcome.returncode == 0:
        if trained and "time bound" in said:
            return "verified", None, outcome, f"verified: {how}, then no error until {bound}"
        if trained:
            return "verified", None, outcome, f"verified: {how}, ran to the end (exit 0) in {took:.1f} s"
        if "ended early" in said:
            return "verified", None, outcome, (
                f"verified: {said['ended early']}; it ran to its end (exit 0) in {took:.1f} s before {steps} "
                "optimizer steps: it trained without the error, over fewer steps than --verify asks for")
        return "not training", None, outcome, (
            "the patched command ran to its end (exit 0), but the verify hook saw no optimizer step train "
            "(did a Python process that tracefix's hooks reach run the training?)")
    after = _diagnose(outcome.tail, entries, root)
    before = {d.entry_id for d in report.diagnoses}
    same = any(d.entry_id in before for d in after.diagnoses) or _sequel(after, before)
    if trained and "time bound" in said and not after.diagnoses and not same:
        # The hook ended the process that trained, at the time bound; what failed after is the
        # command noticing that end (nbconvert's "Kernel died"), not the patched training.
        return "verified", None, outcome, (
            f"verified: {how}, then no error until {bound}; the command then exited with status "
            f"{outcome.exit_code} because --verify ended the process that trained (a Jupyter kernel, or a "
            "child process the command waited for)")
    line = _one_line(after, outcome) + (f", after {done} had trained" if trained else "")
    return ("still failing" if same else "new error"), after, outcome, line


__all__ = ["run_main", "hook_env", "format_env", "run_child", "Outcome", "Tail", "VERIFIED_MARKER"]
