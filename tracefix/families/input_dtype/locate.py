"""input-dtype: where the data that reached a layer in the wrong dtype enters torch.

The layer calls on the crash line (often inside the model's ``forward``) name their input; it is
followed out of ``forward`` to the call of the model on the traceback, and on through the data
pipeline (:mod:`tracefix.locator.batches`) to the expressions that build it: ``torch.from_numpy``,
``torch.tensor`` of a float64 array, a ``.double()``.  The model's other calls (an evaluation pass)
are followed too, so that one patch covers every path into the model (:attr:`FixSite.spans`).
A cast at every call of the model is the fallback; ``model.double()`` is never offered.
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from tracefix.locator.batches import BatchTracer, Built, makes, span, unique
from tracefix.paths import is_library_path
from tracefix.pysource import SourceFile, dotted, last_name
from tracefix.record import replace

SOURCE = 0.9
SOURCE_UNSURE = 0.8
CAST = 0.6
CAST_ONLY = 0.75
MAX_CALLS = 12
NAMES = {"double": "Double", "float64": "Double", "float": "Float", "float32": "Float", "half": "Half",
         "float16": "Half", "bfloat16": "BFloat16", "long": "Long", "int64": "Long", "int": "Int", "int32": "Int"}


def dtypes(fields: Dict[str, str]) -> Tuple[str, str]:
    """(the data's dtype, the weights' dtype) as messages name them ("Double", "Float"); "" unknown.

    ``expected m1 and m2 ...`` names the operands in call order, which may put the weight first: a
    float64 / float32 pair is read as float64 data, the common case."""
    got, want = (NAMES.get(fields.get(k, "").lower().replace("torch.", "").replace("tensor", ""), "")
                 for k in ("got", "want"))
    if {got, want} == {"Double", "Float"}:
        return "Double", "Float"
    if not got and not want:            # mixed dtype (CPU): float64 data is by far the usual cause
        return "", "Float"
    return got, want


def run(ctx) -> None:
    got, want = dtypes(dict(ctx.diag.fields))
    found = ctx.statement() if want == "Float" else None     # a half/bf16 model: the precision families' story
    if found is None:
        return
    crash, sf, stmt = found
    tracer = BatchTracer(ctx)
    scope = sf.scope_of(stmt)
    built: List[Built] = []
    entry: Optional[Tuple[SourceFile, ast.Call]] = None
    for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call) and n.args):
        found = tracer.built(sf, scope, call.args[0], crash.line, frame=0)
        if found:
            built += found
            entry = entry or (tracer.entries[-1] if tracer.entries else (sf, call))
            break
    mine = unique([b for b in built if not makes(b.node, want)])
    if built and not mine:
        return          # built as float32 already: the code no longer matches the log
    if entry is None:
        # not traced to its builder because a framework's loop hands the batch in: cast at the layer call
        layer = _layer_call(stmt) if _called_by_library(ctx, crash) else None
        if layer is None:
            return
        entry = (sf, layer)
    esf, ecall = entry
    others, untraced = [], []
    calls = _other_calls(ctx, esf, ecall)
    for osf, ocall in calls:
        found = tracer.built(osf, osf.scope_of(ocall), ocall.args[0], ocall.lineno, frame=None)
        if found:
            others += [b for b in found if not makes(b.node, want)]
        else:
            untraced.append(f"{osf.rel}:{ocall.lineno}")
    model = esf.segment(ecall.func) or "the model"
    data = {"Double": "float64", "Long": "int64", "Int": "int32"}.get(got, "another dtype")
    if mine:
        # one site for every builder: they are one fix (a site each would be rivals that tie)
        b, *rest = unique(mine + others)
        note = f"; the same fix changes {', '.join(o.where for o in rest)}" if rest else ""
        kind, score = "input-source", SOURCE
        if untraced:
            kind, score = "input-source-unsure", SOURCE_UNSURE
            note += f"; the input of `{model}` at {', '.join(untraced)} was not traced to where it is built"
        ctx.add(b.sf, b.node.lineno, b.node.col_offset, kind,
                f"`{b.sf.brief(b.node, 70)}` makes the {data} data that reaches `{model}` "
                f"({esf.rel}:{ecall.lineno}), whose weights are float32{note}.", score)
        ctx.sites[-1] = replace(ctx.sites[-1], spans=tuple(span(p.sf, p.node) for p in [b] + rest))
    calls = [(esf, ecall)] + calls
    arg = ecall.args[0]
    ctx.add(esf, arg.lineno, arg.col_offset, "input-cast",
            f"cast the input `{esf.segment(arg)}` of `{model}` to float32 at the call"
            + (f" (and at its {len(calls) - 1} other call(s))" if len(calls) > 1 else ""),
            CAST if mine else CAST_ONLY)
    ctx.sites[-1] = replace(ctx.sites[-1], spans=tuple(span(s, c.args[0]) for s, c in calls))


def _called_by_library(ctx, crash) -> bool:
    """The crash site's function was called by a library's frame (Lightning's loop calling training_step)."""
    frames = list(ctx.diag.traceback.frames)
    i = next((k for k, f in enumerate(frames) if f is crash.frame), 0)
    return i > 0 and is_library_path(frames[i - 1].path)


def _layer_call(stmt: ast.AST) -> Optional[ast.Call]:
    """The call of a module (``self.net(x)``, ``model(x)``) on the crash statement that runs first,
    when there is one: not a function of a package (``F.mse_loss``), not a tensor's method."""
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and n.args
             and not isinstance(n.args[0], (ast.Starred, ast.Constant))
             and (isinstance(n.func, ast.Name) or (isinstance(n.func, ast.Attribute)
                                                   and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"))]
    inner = [c for c in calls if not any(o is not c and o in calls for o in ast.walk(c.args[0]))]
    return inner[0] if len(inner) == 1 else None


def _other_calls(ctx, sf: SourceFile, call: ast.Call) -> List[Tuple[SourceFile, ast.Call]]:
    """Every other call of the same model (same callee text) in the project's files."""
    callee = dotted(call.func) or last_name(call.func)
    out = []
    for _rel, osf in ctx.sources(ctx.search_files((last_name(call.func),))):
        if osf.tree is None:
            continue
        for node in ast.walk(osf.tree):
            if isinstance(node, ast.Call) and node is not call and node.args \
                    and not isinstance(node.args[0], ast.Starred) and (dotted(node.func) or last_name(node.func)) == callee:
                out.append((osf, node))
        if len(out) >= MAX_CALLS:
            break
    return out[:MAX_CALLS]
