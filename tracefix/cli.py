"""Command line: ``tracefix [LOG ...]`` diagnoses; ``list``, ``explain``, ``undo``, ``run``, ``hook``.

Exit codes:
  0  a known error was diagnosed (and, with --apply, its patch written or already in place)
  1  no known error in the input (or the input is empty)
  2  usage or input error (unreadable log, broken knowledge entry)
  3  a requested patch could not be applied
  130 interrupted
``tracefix run`` exits with the command's own status (128+N for signal N; 126/127 when it cannot
be started) unless --apply was given: then 0 patched (and verified), 3 not patched or not verified.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import BinaryIO, Dict, List, Optional, Sequence, Tuple

import click

from tracefix import __version__

EXIT_OK, EXIT_NOTHING, EXIT_USAGE, EXIT_PATCH = 0, 1, 2, 3
FORMATS = ("rich", "plain", "json", "quickfix")

EPILOG = """\b
Exit codes: 0 a known error was diagnosed; 1 no known error in the input;
2 usage or input error; 3 a requested patch could not be applied.
`tracefix run` exits with the command's status, or with --apply: 0 patched
(and verified), 3 not patched or verification failed.
\b
Examples:
  python train.py 2>&1 | tracefix
  tracefix crash.log --apply
  tracefix run --apply --verify -- python train.py
"""


class Fail(click.ClickException):
    """A one-line error with our exit code (never a traceback of our own)."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.exit_code = code

    def show(self, file=None) -> None:
        click.echo(f"tracefix: error: {self.format_message()}", err=True)


class DefaultGroup(click.Group):
    """``tracefix LOG`` means ``tracefix diagnose LOG``: the subcommand is optional, and ``--help``
    shows the default command's options too."""

    DEFAULT = "diagnose"

    def parse_args(self, ctx, args):
        if not args or args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = [self.DEFAULT, *args]
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx):
        return ["[OPTIONS] [LOGS]...", "|", "COMMAND [ARGS]..."]

    def format_options(self, ctx, formatter) -> None:
        default = self.commands[self.DEFAULT]
        sub = click.Context(default, info_name=self.DEFAULT, parent=ctx)
        rows = [r for r in (p.get_help_record(sub) for p in default.get_params(sub)) if r]
        rows = [r for r in rows if not r[0].startswith("-h")]
        with formatter.section(f"Options (of the default command, {self.DEFAULT})"):
            formatter.write_dl(rows)
        super().format_options(ctx, formatter)


def _usage_line(exc: "click.UsageError") -> str:
    """Click's usage error as one line (its usual block is three): what is wrong, and where help is."""
    ctx = exc.ctx
    where = ctx.command_path if ctx is not None else "tracefix"
    if ctx is not None and ctx.command is not None and ctx.command.name == DefaultGroup.DEFAULT \
            and ctx.parent is not None:
        where = ctx.parent.command_path        # the implicit default command: "tracefix --help"
    message = " ".join(exc.format_message().split()).rstrip(".")
    return f"tracefix: error: {message}; see `{where} --help`"


def _load(knowledge_dirs: Sequence[str], examples: bool = False):
    from tracefix.knowledge import KnowledgeError, load_entries

    try:
        return load_entries([Path(k) for k in knowledge_dirs], examples=examples)
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
            click.echo("tracefix: reading a log from standard input (end with Ctrl-D; see --help)", err=True)
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
            out.append((name, open(path, "rb")))
        except OSError as exc:
            raise Fail(f"{name}: cannot read: {exc.strerror or exc}") from None
    return out


def _root(root: Optional[str]) -> Path:
    path = Path(root or ".")
    if not path.is_dir():
        raise Fail(f"--root {root}: not a directory")
    return path.resolve()


def diagnose_streams(sources, entries, root: Path, patches: bool, search: Optional[bool] = None):
    from tracefix.pipeline import collect, merge

    reports = []
    for _name, stream in sources:
        try:
            reports.append(collect(stream, entries))
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
    return merge(reports, entries, root, patches, search)


def emit(report, fmt: str, entries, extra: Optional[Dict] = None) -> None:
    from tracefix.render import emit as render_emit

    render_emit(sys.stdout, report, fmt, entries, extra, color=_color())


@click.group(cls=DefaultGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracefix")
def main_group() -> None:
    """Diagnose and fix PyTorch autograd/AMP crashes from their logs.

    Reads a training log (files, or standard input), recognises the known errors, names the
    crash site and the fix site in your project, and proposes a patch.
    """


@main_group.command("diagnose", epilog=EPILOG)
@click.argument("logs", nargs=-1, type=click.Path(dir_okay=True, allow_dash=True))
@click.option("--root", type=click.Path(file_okay=False), default=None,
              help="Project whose files are searched and patched (default: current directory).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Output format (default: rich on a terminal, plain otherwise).")
@click.option("--knowledge", "knowledge_dirs", multiple=True, type=click.Path(),
              help="Extra folder of knowledge entries (*.toml); repeatable.")
@click.option("--apply", "do_apply", is_flag=True, help="Write the recommended patch of each diagnosis.")
@click.option("--pick", type=click.IntRange(min=1), default=None, metavar="N",
              help="With --apply: write patch N instead of the first.")
@click.option("--no-patch", is_flag=True, help="Diagnose only: do not compute patches (fastest).")
def diagnose_cmd(logs, root, fmt, knowledge_dirs, do_apply, pick, no_patch) -> None:
    """Diagnose the logs (default command)."""
    if pick is not None and not do_apply:
        raise click.UsageError("--pick N chooses the patch that --apply writes; add --apply")
    fmt = _pick_format(fmt)
    entries = _load(knowledge_dirs)
    root_path = _root(root)
    sources = _open_logs(logs)
    empty = all(_is_empty(stream) for _name, stream in sources)
    want_patches = (do_apply or not no_patch) and fmt != "quickfix"
    # A folder the user named may be searched; the current directory only when it is a project.
    report = diagnose_streams(sources, entries, root_path, patches=want_patches,
                              search=True if root is not None else None)
    code = EXIT_OK if report.diagnoses else EXIT_NOTHING
    extra = None
    problems: List[str] = []
    already: List[str] = []
    if do_apply and report.diagnoses:
        from tracefix.pipeline import apply_recommended

        done = apply_recommended(report, root_path, pick)
        problems, already = done.problems, done.already
        extra = {"applied": ", ".join(done.written) or ("nothing (already applied)" if already else "nothing")}
        if problems:
            code = EXIT_PATCH
    if empty and not report.diagnoses:
        click.echo("tracefix: the input is empty (nothing to diagnose)", err=True)
        if fmt in ("json", "quickfix"):
            emit(report, fmt, entries, extra)
        sys.exit(EXIT_NOTHING)
    emit(report, fmt, entries, extra)
    for p in already + problems:
        click.echo(f"tracefix: {p}", err=True)
    sys.exit(code)


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


@main_group.command("list")
@click.option("--knowledge", "knowledge_dirs", multiple=True, type=click.Path())
def list_cmd(knowledge_dirs) -> None:
    """List the known errors."""
    from tracefix.render import safe

    for e in _load(knowledge_dirs, examples=True):
        click.echo(safe(f"{e.id:24} {e.title}"))


@main_group.command("explain")
@click.argument("entry_id")
@click.option("--knowledge", "knowledge_dirs", multiple=True, type=click.Path())
def explain_cmd(entry_id, knowledge_dirs) -> None:
    """Explain one known error: what happens, why, how to fix, fix safety."""
    from tracefix.knowledge import find_entry
    from tracefix.render import safe

    entries = _load(knowledge_dirs, examples=True)
    e = find_entry(entries, entry_id)
    if e is None:
        raise Fail(f"unknown id {entry_id!r}; known: {', '.join(x.id for x in entries)}")
    click.echo(safe(f"{e.id}: {e.title}\n"))
    for key, title in (("what", "What happens"), ("why", "Why"), ("fix", "How to fix"), ("fix_safety", "Fix safety")):
        click.echo(f"## {title}\n{safe(e.explanation(key))}\n")
    click.echo("Exception types: " + ", ".join(e.exception_types))
    if e.references:
        click.echo("References:\n" + "\n".join(f"  {safe(r)}" for r in e.references))


@main_group.command("undo")
@click.option("--root", type=click.Path(file_okay=False), default=None,
              help="The project given to --apply (default: the nearest folder holding .tracefix/, "
                   "from the current directory up).")
def undo_cmd(root) -> None:
    """Restore the files changed by the last --apply (backups in ROOT/.tracefix/)."""
    from tracefix.patcher import PatchError, undo
    from tracefix.patcher.writing import MANIFEST, STATE_DIR

    if root is not None:
        project = _root(root)
        where = f"no {project / STATE_DIR / MANIFEST}"
    else:
        start = Path.cwd()
        project = next((d for d in (start, *start.parents) if (d / STATE_DIR / MANIFEST).is_file()), start)
        where = f"no {STATE_DIR}/{MANIFEST} in {start} or any folder above it"
    try:
        restored = undo(project)
    except PatchError as exc:
        raise Fail(str(exc), EXIT_PATCH) from None
    if not restored:
        click.echo(f"tracefix: nothing to undo ({where})")
        sys.exit(EXIT_NOTHING)
    click.echo(f"restored (byte for byte) in {project}: " + ", ".join(restored))


@main_group.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
                    epilog=EPILOG)
@click.option("--apply", "do_apply", is_flag=True, help="Write the recommended patch when the command crashes.")
@click.option("--verify", is_flag=True, help="After --apply, re-run until a few optimizer steps succeed.")
@click.option("--steps", type=click.IntRange(1, 1000), default=2, show_default=True,
              help="Successful backward passes + optimizer steps that --verify waits for.")
@click.option("--anomaly", is_flag=True,
              help="For an in-place error the witness could not explain, re-run once under anomaly mode (slow) to pinpoint it.")
@click.option("--no-witness", "no_witness", is_flag=True,
              help="Do not arm the witness (the hook that records in-place writes, non-scalar losses and half casts).")
@click.option("--root", type=click.Path(file_okay=False), default=None)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None)
@click.option("--knowledge", "knowledge_dirs", multiple=True, type=click.Path())
@click.option("--pick", type=click.IntRange(min=1), default=None, metavar="N",
              help="With --apply: write patch N instead of the first.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run_cmd(do_apply, verify, steps, anomaly, no_witness, root, fmt, knowledge_dirs, pick, command) -> None:
    """Run COMMAND (after --); if it crashes, diagnose it (and patch, verify)."""
    from tracefix.runner import run_main

    if pick is not None and not do_apply:
        raise click.UsageError("--pick N chooses the patch that --apply writes; add --apply")

    entries = _load(knowledge_dirs)
    sys.exit(run_main(list(command), root=_root(root), entries=entries, fmt=_pick_format(fmt),
                      apply=do_apply, verify=verify, anomaly=anomaly, steps=steps, pick=pick, color=_color(),
                      witness=not no_witness))


@main_group.command("hook")
@click.option("--print-env", is_flag=True, required=True, help="Print the environment that enables the hooks.")
@click.option("--anomaly", is_flag=True, help="Switch on torch.autograd anomaly detection.")
@click.option("--verify-steps", type=click.IntRange(1, 1000), default=None,
              help="End the process cleanly after N successful optimizer steps.")
@click.option("--no-witness", "no_witness", is_flag=True, help="Leave the witness out (it is on by default).")
@click.option("--shell", type=click.Choice(["sh", "powershell", "cmd"]), default="sh", show_default=True)
def hook_cmd(print_env, anomaly, verify_steps, no_witness, shell) -> None:
    """Print the environment to use tracefix's hooks (witness; anomaly, verify) in your own launcher."""
    from tracefix.runner import format_env, hook_env

    click.echo(format_env(hook_env(anomaly=anomaly, verify_steps=verify_steps, witness=not no_witness), shell))


def main(argv: Optional[Sequence[str]] = None) -> None:
    try:
        # standalone_mode=False: we print click's errors ourselves, each as one line
        code = main_group.main(args=list(argv) if argv is not None else None, prog_name="tracefix",
                               standalone_mode=False)
        sys.exit(code if isinstance(code, int) else EXIT_OK)
    except click.UsageError as exc:
        click.echo(_usage_line(exc), err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, click.Abort):
        click.echo("tracefix: interrupted", err=True)
        sys.exit(130)
    except MemoryError:
        click.echo("tracefix: error: out of memory", err=True)
        sys.exit(EXIT_USAGE)
    except BrokenPipeError:
        # The reader of our output went away (`tracefix ... | head`): not an error of ours.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        sys.exit(EXIT_OK)
    except Exception as exc:  # a bug of ours: one line, not a traceback (TRACEFIX_DEBUG=1 shows it)
        if os.environ.get("TRACEFIX_DEBUG"):
            raise
        click.echo(f"tracefix: internal error: {type(exc).__name__}: {exc} (set TRACEFIX_DEBUG=1 for details)", err=True)
        sys.exit(EXIT_USAGE)
