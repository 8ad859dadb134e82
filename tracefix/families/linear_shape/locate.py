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
from typing import Dict, List, Optional, Set, Tuple

from tracefix.families.linear_shape.shapes import (Shapes, evaluate, from_caller, linear_args, linear_calls,
                                                   replacement, scope_names, shapes_of)
from tracefix.pysource import SourceFile, last_name, own_nodes, param_names
from tracefix.record import replace

BOTH = 0.9          # in_features and out_features both read as the message says
ONE = 0.8           # one of them does, the other is not a constant expression
BOUND = 0.05        # ...and it is the layer the crash line calls by name
NAMED_ONLY = 0.6    # the called layer, with nothing to compare (names from a config)
FLATTEN_HERE = 0.96   # a flatten that folds the batch, in the crashing function
FLATTEN_CALLER = 0.9  # ...in a function further up the traceback
FACTORY = 0.9       # a factory call that passes the message's in_features for the called layer
MAX_CALLERS = 20    # calls read for what a parameter is given


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
    bound, values = _bound(csf, crash.line)
    factory_sites(ctx, csf, values, shapes)
    for rel in ctx.search_files(("Linear",)):
        sf = ctx.project.source(rel)
        if sf is None or sf.tree is None:
            continue
        for call in linear_calls(sf.tree):
            add_site(ctx, sf, call, shapes, (sf.rel, call.lineno, call.col_offset) in bound)


def add_site(ctx, sf: SourceFile, call: ast.Call, shapes: Shapes, mine: bool, score=None, prefix: str = "") -> bool:
    """Add ``call`` as a fix site if it is the layer the message describes; ``score`` overrides its own."""
    names = {**scope_names(sf, call), **passed_in(ctx, sf, call)}
    judged = judge(sf, call, shapes, mine, names)
    if judged is None and score is None:
        return False
    own, why, write = judged if judged is not None else (0.0, "", "")
    ctx.add(sf, call.lineno, call.col_offset, "linear-in-features", prefix + why, own if score is None else score)
    if write:
        ctx.sites[-1] = replace(ctx.sites[-1], write=write)
    return True


def describes(ctx, sf: SourceFile, call: ast.Call, shapes: Shapes) -> bool:
    """Is ``call`` a layer the message's sizes describe?"""
    return judge(sf, call, shapes, True, {**scope_names(sf, call), **passed_in(ctx, sf, call)}) is not None


def judge(sf: SourceFile, call: ast.Call, shapes: Shapes, mine: bool, names):
    """(score, reason, expression to write) of one ``Linear(...)`` as the layer the message describes;
    None if it is not that layer."""
    first, second = linear_args(call)
    in_v, out_v = evaluate(first, names), evaluate(second, names)
    if shapes.expected is None or shapes.got is None:   # a wording without the sizes
        return (NAMED_ONLY + BOUND, "The crash line calls this layer; its in_features does not match its "
                "input's last dimension.", "") if mine else None
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
    write = replacement(sf, call, shapes.expected, shapes.got, names)
    caller = from_caller(sf, call)
    if caller and (caller not in names or write.isdigit()):
        # a factory's parameter: other calls build other layers with it
        fix, write = f"its callers choose in_features (parameter `{caller}`): build this layer with {shapes.got}", ""
    else:
        fix = f"in_features -> {write}"
    return score, (f"{built} takes {shapes.expected} input features, but its input has {shapes.got} "
                   f"(mat1 {shapes.rows}x{shapes.got}): {fix}."), write


def passed_in(ctx, sf: SourceFile, call: ast.Call) -> Dict[str, int]:
    """The ints every caller passes for the parameters of the function (or class, for ``__init__``)
    that builds ``call``: ``ViT(dim=64, mlp_dim=128)`` gives dim and mlp_dim."""
    fn = sf.scope_of(call)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    cls = sf.class_of(fn)
    name = cls.name if fn.name == "__init__" and cls is not None else fn.name
    names = param_names(fn)[1:] if fn.name == "__init__" or (names_self(fn)) else param_names(fn)
    seen: Dict[str, Set[Optional[int]]] = {}
    calls = 0
    for rel in ctx.search_files((name,)):
        other = ctx.project.source(rel)
        if other is None or other.tree is None or name not in other.text:
            continue
        for node in ast.walk(other.tree):
            if not isinstance(node, ast.Call) or last_name(node.func) != name or calls >= MAX_CALLERS:
                continue
            calls += 1
            env = scope_names(other, node)
            given = dict(zip(names, node.args))
            given.update({k.arg: k.value for k in node.keywords if k.arg})
            for param in names:
                if param in given:
                    seen.setdefault(param, set()).add(evaluate(given[param], env))
                else:
                    seen.setdefault(param, set()).add(None)
    return {p: next(iter(v)) for p, v in seen.items() if len(v) == 1 and None not in v}


def names_self(fn: ast.AST) -> bool:
    ps = param_names(fn)
    return bool(ps) and ps[0] in ("self", "cls")


def _bound(sf: SourceFile, line: int) -> Tuple[Set[Tuple[str, int, int]], List[ast.AST]]:
    """What is assigned to a name that the crash line calls (``self.fc1``, ``self.head`` built as an
    ``nn.Sequential``): the ``Linear(...)`` calls in it (keys), and the assigned values."""
    stmt = sf.stmt_at(line)
    if stmt is None:
        return set(), []
    called = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                called.add(("self", f.attr))
            elif isinstance(f, ast.Name):
                called.add(("", f.id))
    cls = sf.class_of(stmt)
    keys, values = set(), []
    for scope in ([cls] if cls is not None else []) + [sf.scope_of(stmt)]:
        for node in ast.walk(scope):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                key = (("self", t.attr) if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                       and t.value.id == "self" else ("", t.id) if isinstance(t, ast.Name) else None)
                if key in called:
                    keys.update((sf.rel, c.lineno, c.col_offset) for c in linear_calls(node.value))
                    values.append(node.value)
    return keys, values


def factory_sites(ctx, sf: SourceFile, values: List[ast.AST], shapes: Shapes, score: float = FACTORY) -> bool:
    """Calls in ``values`` of a layer factory of this file (``block(32, 4)`` where ``def block(d_in,
    d_out)`` builds ``nn.Linear(d_in, d_out)``) that pass the message's in_features: the argument is
    the fix site, since the factory's other calls build other layers."""
    found = False
    for value in values:
        for call in (n for n in ast.walk(value) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
            fn = sf.top_level(call.func.id)
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            names = param_names(fn)
            env = scope_names(sf, call)
            given = dict(zip(names, call.args))
            given.update({k.arg: k for k in call.keywords if k.arg})
            for layer in linear_calls(fn):
                first, second = linear_args(layer)
                p_in = first.id if isinstance(first, ast.Name) and first.id in given else None
                if p_in is None:
                    continue
                arg = given[p_in]
                value_node = arg.value if isinstance(arg, ast.keyword) else arg
                out_node = given.get(second.id) if isinstance(second, ast.Name) else second
                out_v = evaluate(out_node.value if isinstance(out_node, ast.keyword) else out_node, env)
                if evaluate(value_node, env) != shapes.expected or (out_v is not None and out_v != shapes.out):
                    continue
                same = [n for n, v in env.items() if v == shapes.got]
                write = same[0] if len(same) == 1 else str(shapes.got)
                given_text = sf.segment(value_node) or str(shapes.expected)
                if given_text != str(shapes.expected):
                    given_text += f" = {shapes.expected}"
                ctx.add(sf, arg.lineno, arg.col_offset, "factory-in-features",
                        f"{call.func.id}() builds nn.Linear({p_in}, ...) with {p_in}={given_text}, but that "
                        f"layer's input has {shapes.got} features: pass {write}.", score)
                ctx.sites[-1] = replace(ctx.sites[-1], write=write)
                found = True
    return found


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
