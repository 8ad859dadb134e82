"""device-mismatch: which tensor stayed on the other device.

The traceback is walked out of the model's ``forward`` frames to the call of the model (or of the
loss) in the training code.  There an argument that was never moved (no ``.to(...)`` or
``.cuda()`` on its way, not a module's output) is moved with the program's own device
expression (the one its other ``.to(...)`` calls use), at every call of the model that passes
an unmoved argument.  A model never moved while its inputs are is moved where it is built.  A
tensor made in ``forward`` without ``device=`` gets its input's device.
"""
from __future__ import annotations

import ast
from collections import Counter
from typing import List, Optional, Tuple

from tracefix.locator.batches import span
from tracefix.locator.tracing import ValueTracer
from tracefix.pysource import SourceFile, dotted, keyword, last_name
from tracefix.record import replace
from tracefix.vocab import TENSOR_FACTORIES

INPUT = 0.85
MODEL = 0.85
FACTORY = 0.8
MOVES = ("to", "cuda", "cpu")


def run(ctx) -> None:
    tracer = ValueTracer(ctx)
    device = None
    for i in range(len(ctx.mapped)):
        found = ctx.statement(i)
        if found is None:
            return
        m, sf, stmt = found
        scope = sf.scope_of(stmt)
        if getattr(scope, "name", "") in ("forward", "__call__") and i + 1 < len(ctx.mapped):
            _factories(ctx, sf, scope, stmt)
            _plain_attributes(ctx, tracer, sf, scope, stmt)
            continue
        device = device or _device_expr(sf, scope)
        if device is not None:
            _calls(ctx, tracer, sf, scope, stmt, m.line, device)
        return


def _factories(ctx, sf: SourceFile, fn: ast.AST, stmt: ast.AST) -> None:
    """Tensors made in ``forward`` with no device, read on the crash line."""
    read = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    params = [a.arg for a in fn.args.args if a.arg != "self"]
    ref = params[0] if params else None
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        call = node.value
        if node.targets[0].id in read and isinstance(call, ast.Call) and _is_factory(call) and ref is not None \
                and keyword(call, "device") is None and node.lineno < stmt.lineno:
            ctx.add(sf, call.lineno, call.col_offset, "factory-device",
                    f"`{sf.brief(call)}` makes `{node.targets[0].id}` on the CPU (no device=) inside forward, "
                    f"where `{ref}` may be on a GPU.", FACTORY)
            ctx.sites[-1] = replace(ctx.sites[-1], write=f"{ref}.device")


def _plain_attributes(ctx, tracer, sf: SourceFile, fn: ast.AST, stmt: ast.AST) -> None:
    """``self.mask`` read on the crash line, a plain tensor made in ``__init__``: ``model.to()``
    moves parameters and buffers only, so it stays on the CPU; a buffer moves with the model."""
    for node in ast.walk(stmt):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"):
            continue
        found = tracer.ctor_value(sf, fn, node, stmt.lineno)
        if found is None or not (isinstance(found[1], ast.Call) and _is_factory(found[1])):
            continue
        csf, value = found
        assign = csf.parent(value)
        if isinstance(assign, ast.Assign) and getattr(csf.scope_of(assign), "name", "") == "__init__":
            ctx.add(csf, assign.lineno, assign.col_offset, "buffer-attribute",
                    f"`{csf.brief(assign)}` keeps a plain tensor on the module: model.to(device) moves parameters "
                    f"and buffers only, so `self.{node.attr}` stays on the CPU.", FACTORY)


def _criterion_weight(ctx, tracer, sf: SourceFile, scope: ast.AST, call: ast.Call, line: int, device: str) -> bool:
    """``weight is on cpu`` at a loss: the class weights the criterion was built with."""
    if "weight is on" not in ctx.diag.traceback.message:
        return False
    ctor = tracer.ctor_value(sf, scope, call.func, line) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
    kw = keyword(ctor[1], "weight") if ctor is not None and isinstance(ctor[1], ast.Call) else None
    if kw is None:
        return False
    csf = ctor[0]
    ctx.add(csf, kw.value.lineno, kw.value.col_offset, "to-device-input",
            f"`{csf.brief(kw.value)}`, the class weights of `{sf.brief(call.func)}`, stay on the CPU: a criterion's "
            f"weight is a plain tensor argument, not moved with the model.", INPUT)
    ctx.sites[-1] = replace(ctx.sites[-1], write=device, spans=(span(csf, kw.value),))
    return True


def _calls(ctx, tracer, sf: SourceFile, scope: ast.AST, stmt: ast.AST, line: int, device: str) -> None:
    for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
        if _criterion_weight(ctx, tracer, sf, scope, call, line, device):
            return
        module = _is_module(tracer, sf, scope, call.func, line)
        lossy = "loss" in last_name(call.func).lower() or "criterion" in last_name(call.func).lower()
        if not module and not lossy:
            continue
        unmoved = [a for a in call.args if isinstance(a, ast.Name) and not _moved(tracer, sf, scope, a.id, line)]
        if module and not unmoved and not _model_moved(tracer, sf, scope, call.func, line):
            ctor = tracer.ctor_value(sf, scope, call.func, line)
            if ctor is not None:
                csf, value = ctor
                ctx.add(csf, value.lineno, value.col_offset, "model-to-device",
                        f"`{csf.brief(value)}` builds the model on the CPU, while its inputs at {sf.rel}:{line} "
                        f"are moved to `{device}`.", MODEL)
                if _bound_before(tracer, csf, csf.scope_of(value), device, value.lineno):
                    ctx.sites[-1] = replace(ctx.sites[-1], write=device)
            continue
        if not unmoved:
            continue
        arg = unmoved[0]
        others = _other_unmoved(ctx, tracer, sf, call)
        ctx.add(sf, arg.lineno, arg.col_offset, "to-device-input",
                f"`{arg.id}` reaches `{sf.brief(call.func)}` without being moved to `{device}`, where the model "
                "is" + (f"; the same fix moves the arguments at {', '.join(f'{o[0].rel}:{o[1].lineno}' for o in others)}"
                        if others else "") + ".", INPUT)
        spans = [span(sf, arg)] + [span(o[0], o[1]) for o in others]
        ctx.sites[-1] = replace(ctx.sites[-1], write=device, spans=tuple(spans))
        return


def _is_module(tracer, sf: SourceFile, scope: ast.AST, func: ast.AST, line: int) -> bool:
    """Does ``func`` hold a module: a project class's instance or an ``nn.*`` layer/container?"""
    if not isinstance(func, (ast.Name, ast.Attribute)):
        return False
    if tracer.module_call(sf, scope, func, line):
        return True
    ctor = tracer.ctor_value(sf, scope, func, line)
    value = ctor[1] if ctor is not None else None
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MOVES:
        value = value.func.value           # Net().to(device)
    return isinstance(value, ast.Call) and dotted(value.func).split(".")[0] in ("nn", "torch")


def _moved(tracer, sf: SourceFile, scope: ast.AST, name: str, line: int) -> bool:
    """Was ``name`` moved on its way here (``.to``/``.cuda``, ``device=``), or made by a module?"""
    for a in tracer.assignments(sf, scope, name):
        if a.lineno >= line or getattr(a, "value", None) is None:
            continue
        value = a.value
        if any(isinstance(n, ast.Call) and (last_name(n.func) in MOVES or keyword(n, "device") is not None)
               for n in ast.walk(value)):
            return True
        if isinstance(value, ast.Call) and tracer.module_call(sf, scope, value.func, a.lineno):
            return True
        if isinstance(value, ast.Call) and not _is_factory(value):
            return True         # a function's result: its device is not in sight
    return not tracer.assignments(sf, scope, name) and not _is_loop_var(sf, scope, name, line)


def _is_loop_var(sf: SourceFile, scope: ast.AST, name: str, line: int) -> bool:
    for node in sf.own(scope):
        if isinstance(node, (ast.For, ast.comprehension)) and name in {n.id for n in ast.walk(node.target)
                                                                       if isinstance(n, ast.Name)}:
            return True
    return False


def _model_moved(tracer, sf: SourceFile, scope: ast.AST, func: ast.AST, line: int) -> bool:
    ctor = tracer.ctor_value(sf, scope, func, line)
    if ctor is not None and any(isinstance(n, ast.Call) and last_name(n.func) in MOVES for n in ast.walk(ctor[1])):
        return True
    text = dotted(func)
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MOVES
               and dotted(n.func.value) == text for n in ast.walk(sf.tree))


def _bound_before(tracer, sf: SourceFile, scope: ast.AST, device: str, line: int) -> bool:
    """Is the device expression's name bound before ``line`` (a patch there must not read it early)?"""
    root = device.split(".")[0]
    return (tracer.last_assign(sf, scope, root, line) is not None or root in sf.imports()
            or root in [a.arg for a in getattr(getattr(scope, "args", None), "args", [])])


def _other_unmoved(ctx, tracer, sf: SourceFile, call: ast.Call) -> List[Tuple[SourceFile, ast.Name]]:
    """The unmoved first arguments of the other calls of the same callee in this file."""
    callee = dotted(call.func)
    out = []
    for node in ast.walk(sf.tree):
        if isinstance(node, ast.Call) and node is not call and dotted(node.func) == callee and node.args \
                and isinstance(node.args[0], ast.Name):
            scope = sf.scope_of(node)
            if not _moved(tracer, sf, scope, node.args[0].id, node.lineno):
                out.append((sf, node.args[0]))
    return out[:8]


def _device_expr(sf: SourceFile, scope: ast.AST) -> Optional[str]:
    """The device expression the program moves things with (``device``, ``args.device``), most used."""
    seen: Counter = Counter()
    for node in ast.walk(sf.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to" and node.args:
            a = node.args[0]
            if isinstance(a, (ast.Name, ast.Attribute)) and "dtype" not in dotted(a) and not dotted(a).startswith("torch."):
                seen[dotted(a)] += 1
        kw = keyword(node, "device") if isinstance(node, ast.Call) else None
        if kw is not None and isinstance(kw.value, (ast.Name, ast.Attribute)):
            seen[dotted(kw.value)] += 1
    return seen.most_common(1)[0][0] if seen else None


def _is_factory(call: ast.Call) -> bool:
    d = dotted(call.func)
    head, _, tail = d.rpartition(".")
    return head == "torch" and tail in TENSOR_FACTORIES and not tail.endswith("_like") and tail != "from_numpy"
