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
    def moved(src, node):
        code = src.code(node)
        if f".to({site.write})" in src.code(src.parent(node)) or code.endswith(f".to({site.write})"):
            return None
        simple = isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))
        return f"{code}.to({site.write})" if simple else f"({code}).to({site.write})"

    done = edit(ctx, spots, cst.BaseExpression, moved)
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


@fixer("buffer-attribute")
def buffer_attribute(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    line = src.find(site.line, site.col, cst.SimpleStatementLine) if src is not None else None
    assign = line.body[0] if line is not None and len(line.body) == 1 else None
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1):
        return []
    target = assign.targets[0].target
    if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"):
        return []
    new = f'self.register_buffer("{target.attr.value}", {src.code(assign.value)}, persistent=False)'
    text = src.replace(assign, lambda n: cst.Expr(value=expr(new)))
    return [Option(f"Make `self.{target.attr.value}` a buffer, moved with the model: `{new}` "
                   f"({site.path}:{site.line}); not persistent, so state_dicts stay as they were", "safe", "",
                   {site.path: text})]
