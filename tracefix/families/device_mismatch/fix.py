"""device-mismatch patches: move what stayed behind with the program's own device expression
(``FixSite.write``): the batch at every call of the model that passes it unmoved, the model where
it is built, a tensor made in ``forward`` (``device=x.device``)."""
from __future__ import annotations

from typing import List

import libcst as cst

from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.cstedit import add_arg, expr, kwarg
from tracefix.patcher.recast import edit, places
from tracefix.records import FixSite


@fixer("to-device-input")
def to_device_input(ctx: Context, site: FixSite) -> List[Option]:
    if not site.write:
        return []
    spots = places(site) if site.spans else _first_arg_on_line(ctx, site)
    if not spots:
        return []
    done = edit(ctx, spots, cst.Name, lambda src, node: None if f".to({site.write})" in src.code(src.parent(node))
                else f"{node.value}.to({site.write})")
    if done is None:
        return []
    texts, changes = done
    return [Option(f"Move the batch to `{site.write}` where it enters the model: " + "; ".join(changes), "safe", "",
                   texts)]


@fixer("model-to-device")
def model_to_device(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    call = src.find(site.line, site.col, cst.Call) if src is not None and site.write else None
    if call is None or f".to({site.write})" in (ctx.text(site.path) or "").split("\n")[site.line - 1]:
        return []
    new = f"{src.code(call)}.to({site.write})"
    text = src.replace(call, lambda n: expr(new))
    return [Option(f"Build the model on `{site.write}`: `{src.code(call)}` -> `{new}`", "safe", "", {site.path: text})]


@fixer("factory-device")
def factory_device(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    call = src.find(site.line, site.col, cst.Call) if src is not None and site.write else None
    if call is None or any(a.keyword is not None and a.keyword.value == "device" for a in call.args):
        return []
    text = src.replace(call, lambda n: add_arg(n, kwarg("device", expr(site.write))))
    return [Option(f"Make the tensor where the input is: add device={site.write} to `{src.code(call.func)}(...)` "
                   f"({site.path}:{site.line})", "safe", "", {site.path: text})]


def _first_arg_on_line(ctx: Context, site: FixSite) -> list:
    """The first argument of the call on the site's line, when it is a name (a site without spans)."""
    src = ctx.source(site.path)
    calls = src.all_on_line(site.line, cst.Call, lambda n: bool(n.args) and isinstance(n.args[0].value, cst.Name)
                            and not (isinstance(n.func, cst.Attribute) and n.func.attr.value == "to")) \
        if src is not None else []
    if not calls:
        return []
    r = src.positions[calls[0].args[0].value]
    return [(site.path, r.start.line, r.start.column, r.end.line, r.end.column)]
