"""no-grad-fn patches: take the loss's computation out of the no_grad scope (the block, or the
decorator), drop the ``.detach()``/``.data`` on its path, or checkpoint with
``use_reentrant=False``.  Never ``loss.requires_grad_()``: it runs and trains nothing."""
from __future__ import annotations

from typing import List

import libcst as cst

from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.cstedit import expr
from tracefix.records import FixSite

DISABLING = ("no_grad", "inference_mode", "set_grad_enabled")


def _disabling(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.Call):
        node = node.func
    name = node.attr.value if isinstance(node, cst.Attribute) else node.value if isinstance(node, cst.Name) else ""
    return name in DISABLING


@fixer("nograd-block", "nograd-block-mixed")
def nograd_block(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    w = src.find(site.line, site.col, cst.With) if src is not None else None
    if w is None or len(w.items) != 1 or not _disabling(w.items[0].item) or not isinstance(w.body, cst.IndentedBlock):
        return []
    inner = list(w.body.body)
    if not inner:
        return []
    # the block's own comments go with its first statement: the lines above it, and the one after
    # the colon (on the statement's line when it has none of its own, else above it)
    first = inner[0].with_changes(leading_lines=[*w.leading_lines, *inner[0].leading_lines])
    said = w.body.header.comment
    if said is not None:
        own = getattr(first, "trailing_whitespace", None)
        if own is not None and own.comment is None:
            first = first.with_changes(trailing_whitespace=own.with_changes(
                whitespace=w.body.header.whitespace, comment=said))
        else:
            first = first.with_changes(leading_lines=[*first.leading_lines, cst.EmptyLine(comment=said)])
    inner[0] = first
    text = src.edit_body(w, lambda body, i: body[:i] + inner + body[i + 1:])
    if text is None:
        return []
    summary = (f"Compute the loss with gradients on: remove `with {src.code(w.items[0].item)}:` at "
               f"{site.path}:{site.line} and dedent its {len(inner)} statement(s)")
    if site.kind == "nograd-block-mixed":
        return [Option(summary, "unsafe", "the block also holds statements that are not on the loss's path; they "
                       "would then run with gradients on (move only the forward and the loss out instead)", {site.path: text})]
    return [Option(summary, "safe", "", {site.path: text})]


@fixer("nograd-decorator", "nograd-decorator-shared")
def nograd_decorator(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    deco = src.find(site.line, site.col, cst.Decorator, lambda d: _disabling(d.decorator))
    fn = src.parent(deco) if deco is not None else None
    if not isinstance(fn, cst.FunctionDef):
        return []
    kept = [d for d in fn.decorators if d is not deco]
    lines = [*fn.leading_lines, *deco.leading_lines] if fn.decorators[0] is deco else list(fn.leading_lines)
    text = src.replace(fn, lambda n: n.with_changes(decorators=kept, leading_lines=lines))
    summary = f"Record the loss for backward(): remove `@{src.code(deco.decorator)}` from `{fn.name.value}`"
    if site.kind == "nograd-decorator-shared":
        return [Option(summary, "unsafe", "the function is also called outside no_grad (an evaluation pass?): those "
                       "calls would now record a graph too; wrap them in `with torch.no_grad():`", {site.path: text})]
    return [Option(summary, "safe", "", {site.path: text})]


@fixer("detach-in-loss")
def detach_in_loss(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    call = src.find(site.line, site.col, cst.Call, lambda n: isinstance(n.func, cst.Attribute)
                    and n.func.attr.value in ("detach", "detach_") and not n.args)
    if call is not None:
        node, receiver = call, call.func.value
    else:
        node = src.find(site.line, site.col, cst.Attribute, lambda n: n.attr.value == "data")
        if node is None:
            return []
        receiver = node.value
    old, new = src.code(node), src.code(receiver)
    text = src.replace(node, lambda n: expr(new))
    return [Option(f"Keep the loss's history: `{old}` -> `{new}`", "safe", "", {site.path: text})]


@fixer("reentrant-checkpoint")
def reentrant_checkpoint(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    flag = src.find(site.line, site.col, cst.Name, lambda n: n.value == "True")
    arg = src.parent(flag) if flag is not None else None
    if not (isinstance(arg, cst.Arg) and arg.keyword is not None and arg.keyword.value == "use_reentrant"):
        return []
    text = src.replace(flag, lambda n: cst.Name("False"))
    return [Option("Checkpoint without reentrant autograd: use_reentrant=True -> use_reentrant=False (it records "
                   "through the parameters even when no input requires grad)", "safe", "", {site.path: text})]
