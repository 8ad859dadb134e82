"""linear-shape: the ``nn.Linear`` whose ``in_features`` is not the size of what it gets.

The message names both sizes: ``(rows x got and expected x out)`` is an input of ``got`` features
meeting a layer built as ``Linear(expected, out)``.  The culprit is that constructor (often in
``__init__``, far from the forward line that crashed): a ``Linear`` whose arguments evaluate to
``expected`` and ``out`` (literals, module constants, parameter defaults), first the one bound to the
name the crash line calls (``self.fc1(x)``, ``self.head(x)`` of an ``nn.Sequential``).  When one row
carries a whole number of layer inputs, the batch dimension was flattened in: the flatten is the
fix, and the layer is right.
"""
from __future__ import annotations

import ast
from typing import List, Set, Tuple

from tracefix.families.linear_shape.shapes import (Shapes, evaluate, from_caller, linear_args, linear_calls,
                                                   replacement, scope_names, shapes_of)
from tracefix.pysource import SourceFile, own_nodes

BOTH = 0.9          # in_features and out_features both read as the message says
ONE = 0.8           # one of them does, the other is not a constant expression
BOUND = 0.05        # ...and it is the layer the crash line calls by name
NAMED_ONLY = 0.6    # the called layer, with nothing to compare (names from a config)
FLATTEN_HERE = 0.96   # a flatten that folds the batch, in the crashing function
FLATTEN_CALLER = 0.9  # ...in a function further up the traceback


def run(ctx) -> None:
    if not ctx.mapped:
        return
    shapes = shapes_of(ctx.diag.fields)
    crash = ctx.mapped[0]
    csf = ctx.project.source(crash.rel_path)
    if csf is None or csf.tree is None:
        return
    if shapes.folded:
        if not _flatten_sites(ctx, shapes):
            ctx.notes.append(
                f"The layer got one row of {shapes.got} = {shapes.got // shapes.expected} x {shapes.expected} "
                "features: the batch dimension was flattened into the features. Flatten from dimension 1 "
                "(torch.flatten(x, 1), x.view(x.size(0), -1)); the layer's in_features is right.")
        return
    bound = _bound(csf, crash.line)
    for rel in ctx.search_files(("Linear",)):
        sf = ctx.project.source(rel)
        if sf is None or sf.tree is None:
            continue
        for call in linear_calls(sf.tree):
            mine = (sf.rel, call.lineno, call.col_offset) in bound
            judged = judge(sf, call, shapes, mine)
            if judged is not None:
                ctx.add(sf, call.lineno, call.col_offset, "linear-in-features", judged[1], judged[0])


def judge(sf: SourceFile, call: ast.Call, shapes: Shapes, mine: bool):
    """(score, reason) of one ``Linear(...)`` as the layer the message describes; None if it is not."""
    first, second = linear_args(call)
    names = scope_names(sf, call)
    in_v, out_v = evaluate(first, names), evaluate(second, names)
    if shapes.expected is None:      # a wording without the sizes: only the layer the crash calls
        return (NAMED_ONLY + BOUND, "The crash line calls this layer; its in_features does not match its "
                "input's last dimension.") if mine else None
    if (in_v is not None and in_v != shapes.expected) or (out_v is not None and shapes.out is not None
                                                          and out_v != shapes.out):
        return None
    built = f"Linear({sf.segment(first) if first is not None else '?'}, {sf.segment(second) if second is not None else '?'})"
    if in_v is None and out_v is None:
        if not mine:
            return None
        score = NAMED_ONLY
    else:
        score = (BOTH if in_v is not None and out_v is not None else ONE) + (BOUND if mine else 0.0)
    caller = from_caller(sf, call)
    fix = (f"its callers choose in_features (parameter `{caller}`): build this layer with {shapes.got}"
           if caller else f"in_features -> {replacement(sf, call, shapes.got)}")
    return score, (f"{built} takes {shapes.expected} input features, but its input has {shapes.got} "
                   f"(mat1 {shapes.rows}x{shapes.got}): {fix}.")


def _bound(sf: SourceFile, line: int) -> Set[Tuple[str, int, int]]:
    """The ``Linear(...)`` calls assigned to a name that the crash line calls (``self.fc1``,
    ``self.head`` built as an ``nn.Sequential``)."""
    stmt = sf.stmt_at(line)
    if stmt is None:
        return set()
    called = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                called.add(("self", f.attr))
            elif isinstance(f, ast.Name):
                called.add(("", f.id))
    cls = sf.class_of(stmt)
    out = set()
    for scope in ([cls] if cls is not None else []) + [sf.scope_of(stmt)]:
        for node in ast.walk(scope):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                key = (("self", t.attr) if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                       and t.value.id == "self" else ("", t.id) if isinstance(t, ast.Name) else None)
                if key in called:
                    out.update((sf.rel, c.lineno, c.col_offset) for c in linear_calls(node.value))
    return out


def flatten_call(node: ast.AST) -> bool:
    """``torch.flatten(x)``, ``x.flatten()``, ``x.view(-1)``, ``x.reshape(-1)``: all dimensions into one."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    name, kw = node.func.attr, {k.arg for k in node.keywords}
    if name == "flatten":
        torch_fn = isinstance(node.func.value, ast.Name) and node.func.value.id in ("torch", "th")
        return len(node.args) == (1 if torch_fn else 0) and "start_dim" not in kw
    if name in ("view", "reshape") and len(node.args) == 1 and not kw:
        arg = node.args[0]
        return evaluate(arg, {}) == -1 or (isinstance(arg, ast.Tuple) and len(arg.elts) == 1
                                           and evaluate(arg.elts[0], {}) == -1)
    return False


def _flatten_sites(ctx, shapes: Shapes) -> List[int]:
    found = []
    for depth, m in enumerate(ctx.mapped[:3]):
        sf = ctx.project.source(m.rel_path)
        stmt = sf.stmt_at(m.line) if sf is not None and sf.tree is not None else None
        if stmt is None:
            continue
        scope = sf.scope_of(stmt)
        for node in own_nodes(scope):
            if flatten_call(node) and node.lineno <= m.line:
                batch = shapes.got // shapes.expected
                ctx.add(sf, node.lineno, node.col_offset, "flatten-batch",
                        f"This flattens every dimension, the batch too: the layer got one row of {shapes.got} "
                        f"= {batch} x {shapes.expected} features. Keep the batch dimension (flatten from dim 1).",
                        FLATTEN_HERE if depth == 0 else FLATTEN_CALLER)
                found.append(node.lineno)
    return found
