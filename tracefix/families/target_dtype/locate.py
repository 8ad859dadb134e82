"""target-dtype: where the labels a loss got are built.

The loss call on the crash line (or, for a crash in ``backward()``, the call that made the loss)
names its target.  The target is followed back through the data pipeline
(:mod:`tracefix.locator.batches`) to the expressions that build it: a tensor factory, a cast,
``torch.from_numpy``.  Every other call of the same loss in the project is followed too, so that
one fix covers the validation pass as well: those builders travel with the site
(:attr:`FixSite.also`).  A cast of the target at the loss calls is the fallback, ranked after.
"""
from __future__ import annotations

import ast
from tracefix.record import replace
from typing import Dict, List, Optional, Tuple

from tracefix.locator.batches import BatchTracer, Built, makes, span, unique
from tracefix.pysource import SourceFile, dotted, keyword, last_name

SOURCE = 0.9          # the expression that builds the labels, covering every call of the loss
SOURCE_UNSURE = 0.8   # ... while some call of the loss reads labels not traced to a builder
CAST = 0.6            # a cast of the target at the loss calls (all of them)
CAST_ONLY = 0.8       # ... when no builder was found
MAX_CALLS = 12

# loss functions and modules that take (input, target)
LOSS_FUNCS = frozenset({
    "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "mse_loss",
    "l1_loss", "smooth_l1_loss", "huber_loss", "multi_margin_loss", "multilabel_margin_loss",
    "multilabel_soft_margin_loss", "soft_margin_loss", "kl_div", "poisson_nll_loss", "gaussian_nll_loss",
    "hinge_embedding_loss"})
NAMED_LIKE_LOSS = ("criterion", "loss_fn", "loss_func", "lossfn", "loss_function", "crit")
DTYPES = {"long": "Long", "float": "Float", "double": "Double", "half": "Half", "bfloat16": "BFloat16"}


def wanted(fields: Dict[str, str]) -> str:
    """The dtype the loss wants for its target: "Long" unless the message names another."""
    want = fields.get("want", "")
    return want if want in DTYPES.values() else "Long"


def run(ctx) -> None:
    found = ctx.statement()
    if found is None:
        return
    crash, sf, stmt = found
    scope = sf.scope_of(stmt)
    tracer = BatchTracer(ctx)
    calls = loss_calls(tracer, sf, scope, stmt)
    if not calls:
        calls = _from_backward(tracer, sf, scope, stmt, crash.line)
    want = wanted(dict(ctx.diag.fields))
    for call, target in calls[:1]:
        _locate(ctx, tracer, sf, scope, call, target, crash.line, want)


def loss_calls(tracer: BatchTracer, sf: SourceFile, scope: ast.AST, stmt: ast.AST) -> List[Tuple[ast.Call, ast.AST]]:
    """(call, its target argument) of each loss call in ``stmt``."""
    out = []
    for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
        target = target_arg(call)
        if target is not None and _is_loss(tracer, sf, scope, call):
            out.append((call, target))
    return out


def target_arg(call: ast.Call) -> Optional[ast.AST]:
    kw = keyword(call, "target")
    if kw is not None:
        return kw.value
    return call.args[1] if len(call.args) >= 2 and not isinstance(call.args[1], ast.Starred) else None


def _is_loss(tracer: BatchTracer, sf: SourceFile, scope: ast.AST, call: ast.Call) -> bool:
    name = last_name(call.func)
    if name in LOSS_FUNCS:
        return True
    low = name.lower()
    if any(word in low for word in NAMED_LIKE_LOSS):
        return True
    ctor = tracer.ctor_value(sf, scope, call.func, call.lineno) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
    return ctor is not None and isinstance(ctor[1], ast.Call) and last_name(ctor[1].func).endswith("Loss")


def _from_backward(tracer, sf, scope, stmt, line) -> List[Tuple[ast.Call, ast.AST]]:
    """``loss.backward()`` on the crash line (torch 1.x raised the MSE dtype error there): the loss
    call that made ``loss``."""
    for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "backward" and isinstance(f.value, ast.Name):
            a = tracer.last_assign(sf, scope, f.value.id, line)
            if isinstance(a, ast.Assign):
                return loss_calls(tracer, sf, scope, a)
    return []


def _locate(ctx, tracer: BatchTracer, sf: SourceFile, scope: ast.AST, call: ast.Call, target: ast.AST,
            line: int, want: str) -> None:
    built = tracer.built(sf, scope, target, line, frame=0)
    mine = [b for b in built if not makes(b.node, want)]
    if built and not mine:
        return          # the labels are built right already: the code no longer matches the log
    others, untraced = [], []
    calls = _other_calls(ctx, tracer, sf, call)
    for osf, ocall, otarget in calls:
        found = tracer.built(osf, osf.scope_of(ocall), otarget, ocall.lineno, frame=None)
        if found:
            others.extend(b for b in found if not makes(b.node, want))
        else:
            untraced.append(f"{osf.rel}:{ocall.lineno}")
    loss = sf.segment(call.func) or "the loss"
    if mine:
        # one site for every builder: they are one fix (a site each would be rivals that tie)
        b, *rest = unique(mine + others)
        covered = f"; the same fix changes {', '.join(o.where for o in rest)}" if rest else ""
        if untraced:
            kind, score = "target-source-unsure", SOURCE_UNSURE
            covered += (f"; the labels the loss reads at {', '.join(untraced)} were not traced to where they are "
                        "built")
        else:
            kind, score = "target-source", SOURCE
        ctx.add(b.sf, b.node.lineno, b.node.col_offset, kind,
                f"`{b.sf.brief(b.node, 70)}` builds the labels that `{loss}` at {sf.rel}:{line} reads"
                f"{_via(b)}; the loss wants {want}{covered}.", score)
        _spans(ctx, [b] + rest)
    casts = [(sf, call, target)] + calls
    ctx.add(sf, target.lineno, target.col_offset, "target-cast",
            f"cast the target `{sf.segment(target)}` of `{loss}` to {want} at the loss call"
            + (f" (and at its {len(casts) - 1} other call(s))" if len(casts) > 1 else ""),
            CAST if mine else CAST_ONLY)
    _spans(ctx, [Built(o, t, ()) for o, _c, t in casts])


def _spans(ctx, places: List[Built]) -> None:
    """The last site rewrites ``places`` (its own expression first) in one patch."""
    site = ctx.sites[-1]
    ctx.sites[-1] = replace(site, spans=tuple(span(p.sf, p.node) for p in places))


def _other_calls(ctx, tracer, sf: SourceFile, call: ast.Call) -> List[Tuple[SourceFile, ast.Call, ast.AST]]:
    """Every other call of the same loss (same callee text) in the crash file's import closure."""
    callee = dotted(call.func) or last_name(call.func)
    out = []
    for rel, osf in ctx.sources(ctx.search_files((last_name(call.func),))):
        if osf.tree is None:
            continue
        for node in ast.walk(osf.tree):
            if isinstance(node, ast.Call) and node is not call and (dotted(node.func) or last_name(node.func)) == callee:
                t = target_arg(node)
                if t is not None:
                    out.append((osf, node, t))
        if len(out) >= MAX_CALLS:
            break
    return out[:MAX_CALLS]


def _via(b: Built) -> str:
    hops = [h for h in dict.fromkeys(b.trail[1:]) if h != b.where]
    return f" (through {', '.join(hops[:4])})" if hops else ""
