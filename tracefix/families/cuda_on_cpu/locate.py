"""cuda-on-cpu: where the program chose CUDA.

The device the crash line asks for (``.to(device)``, ``device=...``, ``torch.device(...)``) is
traced (:class:`ValueTracer`) to where it is written: an argparse default, a config constant, a
literal.  There ``"cuda"`` becomes ``"cuda" if torch.cuda.is_available() else "cpu"``.  A
``torch.load`` of a checkpoint saved on a GPU gets ``map_location``.  A bare ``.cuda()`` is named
(the program should hold a device, chosen once).  On a machine with an NVIDIA GPU and a CPU-only
torch build, the advice is to install a CUDA build, and nothing is proposed.
"""
from __future__ import annotations

import ast
import os
import shutil

from tracefix.locator.tracing import ValueTracer
from tracefix.pysource import SourceFile, keyword, last_name

CHOICE = 0.9
LOAD = 0.9
CUDA_CALL = 0.6


def has_nvidia_gpu() -> bool:
    """Does this machine have an NVIDIA GPU and driver (``nvidia-smi``, the driver's /proc entry)?"""
    return shutil.which("nvidia-smi") is not None or os.path.exists("/proc/driver/nvidia/version")


def run(ctx) -> None:
    message = ctx.diag.traceback.message
    if "not compiled with CUDA" in message and has_nvidia_gpu():
        ctx.notes.append("This machine has an NVIDIA GPU (nvidia-smi is installed), but the torch in use is a "
                         "CPU-only build: install a CUDA build of torch (pick one at pytorch.org/get-started) rather "
                         "than changing the code; nothing is proposed.")
        return
    found = ctx.statement()
    if found is None:
        return
    crash, sf, stmt = found
    scope = sf.scope_of(stmt)
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)]
    if "deserialize" in message:
        for call in calls:
            if last_name(call.func) == "load" and keyword(call, "map_location") is None:
                ctx.add(sf, call.lineno, call.col_offset, "load-map-location",
                        f"`{sf.brief(call)}` loads tensors saved on a GPU; map them to the device this machine has.",
                        LOAD)
        return
    tracer = ValueTracer(ctx)
    seen = set()
    for call in calls:
        for dev in _device_args(call):
            for o, lit in _cuda_literals(tracer, tracer.origins(sf, scope, dev, crash.line)):
                if (o.sf.rel, lit.lineno, lit.col_offset) not in seen:
                    seen.add((o.sf.rel, lit.lineno, lit.col_offset))
                    where = f" ({o.source} value)" if o.source else ""
                    ctx.add(o.sf, lit.lineno, lit.col_offset, "device-choice",
                            f"`{o.sf.brief(lit)}`{where} chooses CUDA for `{sf.brief(dev)}` at "
                            f"{sf.rel}:{crash.line}; choose it by availability.", CHOICE)
        if isinstance(call.func, ast.Attribute) and call.func.attr == "cuda" and not seen:
            ctx.add(sf, call.func.lineno, call.func.col_offset, "cuda-call",
                    f"`{sf.brief(call)}` moves to CUDA unconditionally.", CUDA_CALL)


def _device_args(call: ast.Call):
    """The device expressions a call passes: ``.to(dev)``, ``device=dev``, ``torch.device(dev)``."""
    kw = keyword(call, "device")
    if kw is not None:
        yield kw.value
    name = last_name(call.func)
    if name == "to" and call.args and not isinstance(call.args[0], ast.Starred):
        yield call.args[0]
    if name in ("device", "set_device") and call.args:
        yield call.args[0]


def _cuda_literals(tracer, origins, depth: int = 0):
    """(origin, the ``"cuda"`` string constant) for each origin that is one, or a ``torch.device(...)``
    whose argument's origins are (``torch.device("cuda" if args.cuda else "cpu")``)."""
    for o in origins:
        node = o.node
        if isinstance(node, ast.Call) and last_name(node.func) == "device" and node.args and depth < 3:
            scope = o.sf.scope_of(node)
            yield from _cuda_literals(tracer, tracer.origins(o.sf, scope, node.args[0], node.lineno), depth + 1)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda") \
                and not _guarded(o.sf, node):
            yield o, node


def _guarded(sf: SourceFile, lit: ast.AST) -> bool:
    """``"cuda" if torch.cuda.is_available() else ...``: chosen by availability already."""
    up = sf.parent(lit)
    return isinstance(up, ast.IfExp) and up.body is lit and "is_available" in (sf.segment(up.test) or "")
