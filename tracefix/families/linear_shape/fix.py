"""linear-shape patches: ``in_features`` set to what the layer gets; a flatten that keeps the batch."""
from __future__ import annotations

import ast
from typing import List

import libcst as cst

from tracefix.families.linear_shape.locate import flatten_call
from tracefix.families.linear_shape.shapes import shapes_of
from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.cstedit import dotted, expr, keyword, positional
from tracefix.pysource import SourceFile
from tracefix.records import FixSite

# a checkpoint written by the old layer has a weight of the old width: it no longer loads
_LOADS = ("load_state_dict(", "torch.load(", "from_pretrained(", "load_checkpoint(")


@fixer("linear-in-features")
def in_features(ctx: Context, site: FixSite) -> List[Option]:
    shapes = shapes_of(ctx.diag.fields)
    if not site.write or shapes.got is None or shapes.folded:
        return []       # the locator found nothing sound to write (a factory's parameter, no sizes)
    src = ctx.source(site.path)
    if src is None:
        return []
    call = src.find(site.line, site.col, cst.Call, lambda n: dotted(n.func).split(".")[-1] == "Linear")
    if call is None:
        return []
    arg = (positional(call) or [None])[0] or keyword(call, "in_features")
    if arg is None:
        return []
    old = src.code(arg.value)
    if old.strip() == site.write:
        return []
    text = src.replace(arg.value, lambda n: expr(site.write))
    summary = (f"Build the layer for the {shapes.got} features it gets: `{old}` -> `{site.write}` as in_features "
               f"(the input is {shapes.rows}x{shapes.got}; the layer was built for {shapes.expected})")
    loads = sorted(rel for rel in {site.path, *ctx.frame_files()} if any(w in (ctx.text(rel) or "") for w in _LOADS))
    if loads:
        return [Option(summary, "unsafe", f"{', '.join(loads)} loads saved weights: a checkpoint written "
                       f"with in_features={shapes.expected} no longer loads into this layer", {site.path: text})]
    return [Option(summary, "safe", "", {site.path: text})]


@fixer("factory-in-features")
def factory_argument(ctx: Context, site: FixSite) -> List[Option]:
    shapes = shapes_of(ctx.diag.fields)
    src = ctx.source(site.path)
    if not site.write or src is None:
        return []
    arg = src.find(site.line, site.col, cst.Arg)
    if arg is None or src.code(arg.value).strip() == site.write:
        return []
    old = src.code(arg.value)
    text = src.replace(arg.value, lambda n: expr(site.write))
    return [Option(f"Pass the {shapes.got} features the layer gets: `{old}` -> `{site.write}` at this call of the "
                   f"layer factory (its other calls build other layers)", "safe", "", {site.path: text})]


@fixer("flatten-batch")
def flatten_batch(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    sf = SourceFile(site.path, ctx.root / site.path)
    if sf.tree is None or not any(flatten_call(n) and n.lineno == site.line for n in ast.walk(sf.tree)):
        return []

    def is_flatten(n: cst.CSTNode) -> bool:
        return isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in (
            "flatten", "view", "reshape")

    call = src.find(site.line, site.col, cst.Call, is_flatten)
    if call is None:
        return []
    name = call.func.attr.value
    if name == "flatten":
        torch_fn = dotted(call.func.value) in ("torch", "th")
        new = (call.with_changes(args=[*call.args[:1], cst.Arg(expr("1"))]) if torch_fn and call.args
               else call.with_changes(args=[cst.Arg(expr("1"))]))
    else:
        receiver = src.code(call.func.value)
        if not isinstance(call.func.value, (cst.Name, cst.Attribute)):
            return []       # a receiver with calls in it would run twice
        new = call.with_changes(args=[cst.Arg(expr(f"{receiver}.size(0)"), comma=cst.Comma(
            whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(expr("-1"))])
    old = src.code(call)
    text = src.replace(call, lambda n: new)
    shown = cst.Module(body=[]).code_for_node(new)
    return [Option(f"Keep the batch dimension: `{old}` -> `{shown}` (the layer then gets one row per sample)",
                   "safe", "", {site.path: text})]
