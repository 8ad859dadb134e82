"""leaf-inplace patches: run the in-place write under ``torch.no_grad()`` (decorate the update
helper, or wrap the loop or statement).  Never the out-of-place ``w = w - lr * w.grad``: it makes
a new tensor and the parameter never changes."""
from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.cstedit import expr
from tracefix.patcher.imports import imported_as, with_import
from tracefix.records import FixSite


def _torch(ctx: Context, path: str) -> Tuple[str, bool]:
    """The name this file imports torch as, and whether the patch must add ``import torch``."""
    name = imported_as(ctx.text(path) or "", "torch")
    return (name, False) if name is not None else ("torch", True)


def _imported(text: Optional[str], add: bool) -> Optional[str]:
    return with_import(text, "torch") if text is not None and add else text


@fixer("leaf-nograd-def")
def leaf_nograd_def(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    torch, add = _torch(ctx, site.path)
    fn = src.find(site.line, site.col, cst.FunctionDef) if src is not None else None
    if fn is None:
        return []
    if any("no_grad" in src.code(d.decorator) for d in fn.decorators):
        return []
    deco = cst.Decorator(decorator=expr(f"{torch}.no_grad()"))
    text = _imported(src.replace(fn, lambda n: n.with_changes(decorators=[*n.decorators, deco])), add)
    if text is None:
        return []
    return [Option(f"Run `{fn.name.value}` without recording gradients: add `@{torch}.no_grad()` (its in-place "
                   "writes to parameters are updates, not part of the graph)", "safe", "", {site.path: text})]


@fixer("leaf-nograd-block")
def leaf_nograd_block(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    torch, add = _torch(ctx, site.path)
    if src is None:
        return []
    stmt = src.find(site.line, site.col, (cst.For, cst.SimpleStatementLine),
                    lambda n: src.positions[n].start.line == site.line)
    if stmt is None or any(isinstance(a, cst.With) and "no_grad" in src.code(a.items[0].item)
                           for a in src.ancestors(stmt)):
        return []
    wrapped = cst.With(items=[cst.WithItem(item=expr(f"{torch}.no_grad()"))],
                       body=cst.IndentedBlock(body=[stmt.with_changes(leading_lines=[])]),
                       leading_lines=stmt.leading_lines)
    text = _imported(src.edit_body(stmt, lambda body, i: body[:i] + [wrapped] + body[i + 1:]), add)
    if text is None:
        return []
    return [Option(f"Run the in-place write under `with {torch}.no_grad():` ({site.path}:{site.line})", "safe", "",
                   {site.path: text})]
