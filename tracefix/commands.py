"""The click commands behind tracefix.cli: subcommands, help, and every usage error (one line)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

import click

from tracefix.diagnose import run_diagnose
from tracefix.exits import EXIT_NOTHING, EXIT_OK, EXIT_PATCH, EXIT_USAGE, Fail
from tracefix.options import (COMMANDS, FORMATS, color, command_hint, load_knowledge, pick_format, project_config,
                              root_dir)
from tracefix.version import __version__

EPILOG = """\b
Exit codes: 0 a known error was diagnosed; 1 no known error in the input;
2 usage or input error; 3 a requested patch could not be applied.
`tracefix run` exits with the command's status, or with --apply: 0 patched
(and verified), 3 not patched or verification failed (a command that cannot
start keeps 126/127, a stopped one its own status, e.g. 130).
\b
Examples:
  python train.py 2>&1 | tracefix
  tracefix crash.log --apply
  tracefix run --apply --verify -- python train.py
"""


class _PatchNumber(click.ParamType):
    name = "N"

    def convert(self, value, param, ctx):
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = 0
        if number < 1:
            self.fail(f"a patch number (1, 2, ...) is expected, not {value!r}", param, ctx)
        return number


PATCH_NUMBER = _PatchNumber()
DEFAULT_STEPS = 2          # optimizer steps `run --verify` waits for


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


@click.group(cls=DefaultGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracefix")
def main_group() -> None:
    """Diagnose and fix PyTorch autograd/AMP crashes from their logs.

    Reads a training log (files, or standard input), recognises the known errors, names the
    crash site and the fix site in your project, and proposes a patch.
    """


@main_group.command("diagnose", epilog=EPILOG)
@click.argument("logs", nargs=-1, type=click.Path(dir_okay=True, allow_dash=True))
@click.option("--root", type=click.Path(), default=None,
              help="Project whose files are searched and patched (default: the current directory, or the "
                   "project above it that the log's frames are in: the nearest folder with .git, "
                   "pyproject.toml, setup.py or setup.cfg).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Output format (default: rich on a terminal, plain otherwise).")
@click.option("--knowledge", "knowledge_dirs", multiple=True, type=click.Path(),
              help="Extra folder of knowledge entries (*.toml); repeatable.")
@click.option("--apply", "do_apply", is_flag=True, help="Write the recommended patch of each diagnosis.")
@click.option("--pick", type=PATCH_NUMBER, default=None, metavar="N",
              help="With --apply: write patch N instead of the first.")
@click.option("--no-patch", is_flag=True, help="Diagnose only: do not compute patches (fastest).")
@click.option("--all", "show_all", is_flag=True,
              help="Show every fix site's reason and every patch's diff (default: the recommended patch, "
                   "the others one line each; json always has everything).")
def diagnose_cmd(logs, root, fmt, knowledge_dirs, do_apply, pick, no_patch, show_all) -> None:
    """Diagnose the logs (default command)."""
    if pick is not None and not do_apply:
        raise click.UsageError("--pick N chooses the patch that --apply writes; add --apply")
    if do_apply and no_patch:
        raise click.UsageError("--apply writes a patch, --no-patch computes none: use one of them")
    run_diagnose(logs, root, fmt, knowledge_dirs, do_apply, pick, no_patch, show_all)


@main_group.command("list")
@click.option("--knowledge", "knowledge_dirs", multiple=True, type=click.Path())
def list_cmd(knowledge_dirs) -> None:
    """List the known errors."""
    from tracefix.render import safe

    for e in load_knowledge(knowledge_dirs, examples=True):
        click.echo(safe(f"{e.id:24} {e.title}"))


@main_group.command("explain")
@click.argument("entry_id")
@click.option("--knowledge", "knowledge_dirs", multiple=True, type=click.Path())
def explain_cmd(entry_id, knowledge_dirs) -> None:
    """Explain one known error: what happens, why, how to fix, fix safety."""
    from tracefix.knowledge import find_entry
    from tracefix.render import safe

    entries = load_knowledge(knowledge_dirs, examples=True)
    e = find_entry(entries, entry_id)
    if e is None:
        from difflib import get_close_matches

        ids = [x.id for x in entries]
        near = [i for i in ids if entry_id.lower() in i] or get_close_matches(entry_id, ids, n=1, cutoff=0.5)
        guess = f"did you mean {' or '.join(repr(i) for i in near)}? " if near else ""
        raise Fail(f"unknown id {entry_id!r}; {guess}known: {', '.join(ids)}")
    click.echo(safe(f"{e.id}: {e.title}\n"))
    for key, title in (("what", "What happens"), ("why", "Why"), ("fix", "How to fix"), ("fix_safety", "Fix safety")):
        click.echo(f"## {title}\n{safe(e.explanation(key))}\n")
        if key == "fix":
            for kind, text in e.fix_for:
                click.echo(f"For a fix site of kind {kind}: {safe(text)}\n")
    click.echo("Exception types: " + ", ".join(e.exception_types))
    if e.references:
        click.echo("References:\n" + "\n".join(f"  {safe(r)}" for r in e.references))


@main_group.command("undo")
@click.option("--root", type=click.Path(), default=None,
              help="The project given to --apply (default: the nearest folder holding .tracefix/, "
                   "from the current directory up).")
@click.option("--force", is_flag=True,
              help="Restore the backups even over files changed since tracefix patched them.")
def undo_cmd(root, force) -> None:
    """Restore the files changed by the last --apply (backups in ROOT/.tracefix/)."""
    from tracefix.patcher import PatchError, undo
    from tracefix.patcher.writing import MANIFEST, STATE_DIR

    if root is not None:
        project = root_dir(root)
        where = f"no {project / STATE_DIR / MANIFEST}"
    else:
        start = Path.cwd()
        project = next((d for d in (start, *start.parents) if (d / STATE_DIR / MANIFEST).is_file()), start)
        where = f"no {STATE_DIR}/{MANIFEST} in {start} or any folder above it"
    try:
        restored = undo(project, force=force)
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
@click.option("--steps", type=click.IntRange(1, 1000), default=None,
              help="Successful backward passes + optimizer steps that --verify waits for (default 2).")
@click.option("--verify-timeout", "verify_timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="With --verify: after the steps, let the command run on for at most SECONDS (default 60; "
                   "0 stops right after the steps).")
@click.option("--anomaly", is_flag=True,
              help="For an in-place error the witness could not explain, re-run once under anomaly mode (slow) to pinpoint it.")
@click.option("--no-witness", "no_witness", is_flag=True,
              help="Do not arm the witness (the hook that records in-place writes, non-scalar losses and half casts).")
@click.option("--root", type=click.Path(), default=None,
              help="The project whose files are diagnosed and patched (default: the current directory, or "
                   "the project above it that the crash is in: the nearest folder with .git, "
                   "pyproject.toml, setup.py or setup.cfg).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Output format (default: rich on a terminal, plain otherwise).")
@click.option("--knowledge", "knowledge_dirs", multiple=True, type=click.Path(),
              help="Add your own knowledge entries from DIR (repeatable).")
@click.option("--pick", type=PATCH_NUMBER, default=None, metavar="N",
              help="With --apply: write patch N instead of the first.")
@click.option("--all", "show_all", is_flag=True,
              help="Show every fix site's reason and every patch's diff (default: the recommended patch, "
                   "the others one line each).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run_cmd(do_apply, verify, steps, verify_timeout, anomaly, no_witness, root, fmt, knowledge_dirs, pick,
            show_all, command) -> None:
    """Run COMMAND (after --); if it crashes, diagnose it (and patch, verify)."""
    from tracefix.runner import run_main

    if pick is not None and not do_apply:
        raise click.UsageError("--pick N chooses the patch that --apply writes; add --apply")
    if verify and not do_apply:
        raise click.UsageError("--verify re-runs the command after --apply wrote a patch; add --apply")
    if verify_timeout is not None and not verify:
        raise click.UsageError("--verify-timeout bounds the --verify re-run; add --verify")
    if command and command[0].startswith("-") and command[0] != "--":
        # options go before `--`; a command never starts with "-"
        raise click.NoSuchOption(command[0])

    cfg = project_config(root)          # [tool.tracefix]: what the command line leaves unsaid
    find_root = root is None and "root" not in cfg
    root = root if root is not None else cfg.get("root")
    steps = steps if steps is not None else cfg.get("verify-steps", DEFAULT_STEPS)
    if verify_timeout is None:
        verify_timeout = cfg.get("verify-timeout")
    entries = load_knowledge(list(knowledge_dirs) or cfg.get("knowledge", []))
    sys.exit(run_main(list(command), root=root_dir(root), entries=entries, fmt=pick_format(fmt or cfg.get("format")),
                      apply=do_apply, verify=verify, anomaly=anomaly, steps=steps, pick=pick, color=color(),
                      witness=not no_witness, find_root=find_root, full=show_all,
                      **({} if verify_timeout is None else {"verify_timeout": verify_timeout})))


@main_group.command("hook")
@click.option("--print-env", is_flag=True, required=True, help="Print the environment that enables the hooks.")
@click.option("--anomaly", is_flag=True, help="Switch on torch.autograd anomaly detection.")
@click.option("--verify-steps", type=click.IntRange(1, 1000), default=None,
              help="Check N optimizer steps (they must change a parameter), then let the process run on.")
@click.option("--verify-timeout", "verify_timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="With --verify-steps: end the process SECONDS after the steps (default 60; 0: at once).")
@click.option("--no-witness", "no_witness", is_flag=True, help="Leave the witness out (it is on by default).")
@click.option("--shell", type=click.Choice(["sh", "powershell", "cmd"]), default="sh", show_default=True)
def hook_cmd(print_env, anomaly, verify_steps, verify_timeout, no_witness, shell) -> None:
    """Print the environment to use tracefix's hooks (witness; anomaly, verify) in your own launcher."""
    from tracefix.runner import format_env, hook_env

    if verify_timeout is not None and verify_steps is None:
        raise click.UsageError("--verify-timeout bounds the run after --verify-steps; add --verify-steps N")
    click.echo(format_env(hook_env(anomaly=anomaly, verify_steps=verify_steps, witness=not no_witness,
                                   verify_timeout=verify_timeout), shell))



@main_group.command("mcp")
def mcp_cmd() -> None:
    """Serve tracefix to coding agents: an MCP server over stdio (pip install 'tracefix[mcp]')."""
    from tracefix.mcp_server import serve

    serve()


def click_main(args: Sequence[str]) -> int:
    """Run the click commands; click's usage errors become one line on stderr (exit 2)."""
    try:
        # standalone_mode=False: we print click's errors ourselves, each as one line
        code = main_group.main(args=list(args), prog_name="tracefix", standalone_mode=False)
        return code if isinstance(code, int) else EXIT_OK
    except click.UsageError as exc:
        word = next((a for a in args if not a.startswith("-")), "")
        hint = command_hint(word, Path(word)) if args and args[0] == word and word not in COMMANDS else ""
        # `tracefix udno --force`: the mistyped command matters more than the option click names
        click.echo(f"tracefix: error: {word}: {hint.strip()[1:-1]}" if hint else _usage_line(exc), err=True)
        return EXIT_USAGE
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        raise KeyboardInterrupt from None
