"""``tracefix mcp``: tracefix as an MCP server over stdio, for coding agents (``pip install tracefix[mcp]``).

Each tool runs the tracefix command line in a process of its own (``--format json``) and answers
with what it printed: the answers are the json format's, and ``apply`` is ``--apply`` itself, so
every one of its safety rules holds (nothing outside the root, no site-packages, a file that no
longer matches the log refused, atomic writes, ``undo``).  stdout is the protocol's: nothing else
is written to it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, List, Optional

TIMEOUT_S = 600          # one tool call; run_verify's command has its own --verify-timeout


def _tracefix(args: List[str], stdin: Optional[bytes] = None, cwd: Optional[str] = None,
              timeout: float = TIMEOUT_S) -> Dict:
    proc = subprocess.run([sys.executable, "-m", "tracefix", *args], input=stdin, cwd=cwd, capture_output=True,
                          timeout=timeout, env={**os.environ, "NO_COLOR": "1"})
    out: Dict = {"exit_code": proc.returncode}
    try:
        out.update(json.loads(proc.stdout.decode("utf-8", "replace")))
    except ValueError:
        out["output"] = proc.stdout.decode("utf-8", "replace")[-4000:]
    err = proc.stderr.decode("utf-8", "replace").strip()
    if err:
        out["stderr"] = err[-4000:]
    return out


def _log_bytes(log: str) -> bytes:
    """``log`` is the log's text, or the path of a file holding it."""
    if "\n" not in log and len(log) < 4096 and os.path.isfile(log):
        with open(log, "rb") as f:
            return f.read()
    return log.encode("utf-8")


def diagnose(log: str, root: str = ".") -> Dict:
    """Diagnose a PyTorch training crash: the error, its crash site, the ranked fix sites with
    reasons and the proposed patches (json format).  ``log``: the log's text or a file's path;
    ``root``: the project whose files the log's frames are mapped to."""
    return _tracefix(["--format", "json", "--root", root, "-"], stdin=_log_bytes(log))


def explain(entry_id: str) -> Dict:
    """What an error is, why it happens, how to fix it, and how safe the fixes are."""
    res = _tracefix(["explain", entry_id])
    if "output" in res:
        res["text"] = res.pop("output")
    return res


def apply(log: str, root: str = ".", patch: int = 1) -> Dict:
    """Write patch number ``patch`` (1: the recommended one) of the log's diagnosis into ``root``,
    with every rule of ``tracefix --apply`` (undo it with the ``undo`` tool)."""
    args = ["--format", "json", "--root", root, "--apply"] + (["--pick", str(patch)] if patch != 1 else []) + ["-"]
    return _tracefix(args, stdin=_log_bytes(log))


def undo(root: str = ".") -> Dict:
    """Restore, byte for byte, the files the last apply changed in ``root``."""
    res = _tracefix(["undo", "--root", root])
    if "output" in res:
        res["text"] = res.pop("output").strip()
    return res


def run_verify(command: List[str], root: str = ".", steps: int = 2, timeout: float = 60) -> Dict:
    """Run ``command`` (argv, e.g. ["python", "train.py"]) in ``root``; if it crashes with a known
    error, apply the recommended patch and re-run it until ``steps`` optimizer steps train
    (``tracefix run --apply --verify``); a failed verification restores every file."""
    return _tracefix(["run", "--apply", "--verify", "--steps", str(steps), "--verify-timeout", str(timeout),
                      "--format", "json", "--root", root, "--", *command], cwd=root, timeout=TIMEOUT_S + timeout)


TOOLS = (diagnose, explain, apply, undo, run_verify)


def serve() -> None:
    """Serve the tools over stdio until the client goes away."""
    from tracefix.version import __version__

    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        from tracefix.exits import Fail

        raise Fail("tracefix mcp needs the MCP SDK: pip install 'tracefix[mcp]'") from None
    server = MCPServer("tracefix", version=__version__,
                       instructions="Diagnose PyTorch training crashes from their logs, propose and apply "
                                    "minimal patches, and verify them by re-running.")
    for tool in TOOLS:
        server.tool()(tool)
    server.run("stdio")
