"""The numbers a linear-shape message carries, and int expressions of the source evaluated.

Pure and cheap: shared by the family's locate and fix steps.
"""
from __future__ import annotations

import ast
from typing import Dict, Optional, Tuple

from tracefix.pysource import param_names
from tracefix.record import record

LINEAR_CALLS = ("Linear",)          # LazyLinear infers in_features and cannot raise this


@record(frozen=True)
class Shapes:
    """``(rows x got and expected x out)``: the input has ``got`` features, the layer takes ``expected``."""
    rows: Optional[int]
    got: Optional[int]
    expected: Optional[int]
    out: Optional[int]

    @property
    def folded(self) -> bool:
        """One row whose features are a whole number of layer inputs: the batch was flattened in."""
        return (self.rows == 1 and self.got is not None and self.expected is not None
                and self.got > self.expected and self.got % self.expected == 0)


def shapes_of(fields) -> Shapes:
    def num(name: str) -> Optional[int]:
        text = dict(fields).get(name, "")
        return int(text) if text.isdigit() else None
    return Shapes(num("rows"), num("got"), num("expected"), num("out"))


def linear_args(call: ast.Call) -> Tuple[Optional[ast.AST], Optional[ast.AST]]:
    """The (in_features, out_features) expressions of an ``nn.Linear(...)`` call."""
    got = {k.arg: k.value for k in call.keywords if k.arg}
    first = call.args[0] if call.args else got.get("in_features")
    second = call.args[1] if len(call.args) > 1 else got.get("out_features")
    return first, second


def constants(tree: ast.AST) -> Dict[str, int]:
    """Names bound once to an int at a module's or a class's top level (``A, B = 64, 128`` too)."""
    seen: Dict[str, Optional[int]] = {}

    def bind(target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, ast.Name):
            v = evaluate(value, {k: x for k, x in seen.items() if x is not None})
            seen[target.id] = v if target.id not in seen else None
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts):
                bind(t, v)

    for node in getattr(tree, "body", []):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            bind(node.targets[0], node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            bind(node.target, node.value)
    return {k: v for k, v in seen.items() if v is not None}


def defaults(fn: ast.AST) -> Dict[str, int]:
    """A function's parameters whose default is an int expression."""
    args = getattr(fn, "args", None)
    if args is None:
        return {}
    out: Dict[str, int] = {}
    positional = args.posonlyargs + args.args
    for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults):
        v = evaluate(d, {})
        if v is not None:
            out[a.arg] = v
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        v = evaluate(d, {}) if d is not None else None
        if v is not None:
            out[a.arg] = v
    return out


def evaluate(node: Optional[ast.AST], names: Dict[str, int]) -> Optional[int]:
    """The int value of a literal expression over ``names`` (+, -, *, //, **); None otherwise."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, int) and not isinstance(node.value, bool) else None
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = evaluate(node.operand, names)
        return None if v is None else -v
    if isinstance(node, ast.BinOp):
        a, b = evaluate(node.left, names), evaluate(node.right, names)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.FloorDiv) and b:
            return a // b
        if isinstance(node.op, ast.Pow) and 0 <= b <= 8:
            return a ** b
    return None


def factors(node: ast.AST) -> Optional[list]:
    """The int literals of a product written ``a * b * c``; None for anything else."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = factors(node.left), factors(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return [node.value]
    return None


def same_shape_product(old: list, value: int) -> Optional[str]:
    """``16 * 5 * 5`` for 576 -> ``16 * 6 * 6``: the channels kept, the equal spatial factors solved."""
    if len(old) < 2 or value <= 0 or old[0] <= 0 or value % old[0]:
        return None
    rest, n = value // old[0], len(old) - 1
    if len(set(old[1:])) != 1:
        return None
    k = round(rest ** (1.0 / n))
    for cand in (k - 1, k, k + 1):
        if cand > 0 and cand ** n == rest:
            return " * ".join([str(old[0])] + [str(cand)] * n)
    return None


def scope_names(sf, node: ast.AST) -> Dict[str, int]:
    """Int names visible at ``node``: the module's and class's constants, the enclosing function's
    once-bound locals and its parameters' defaults."""
    names = dict(constants(sf.tree))
    cls = sf.class_of(node)
    if cls is not None:
        names.update(constants(cls))
    fn = sf.scope_of(node)
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        names.update(defaults(fn))
        names.update(constants(fn))
    return names


def linear_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _last(node.func) in LINEAR_CALLS:
            yield node


def _last(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def from_caller(sf, call: ast.Call) -> Optional[str]:
    """The parameter ``in_features`` is read from when a caller chooses it (a layer factory)."""
    first, _ = linear_args(call)
    fn = sf.scope_of(call)
    if not isinstance(first, ast.Name) or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return first.id if first.id in param_names(fn) and first.id not in defaults(fn) else None


def replacement(sf, call: ast.Call, expected: int, got: int, names: Dict[str, int]) -> str:
    """What to write for ``in_features`` (``names``: the ints visible at the call, see
    :func:`scope_names`, with what callers pass): the name the code already has for ``got`` (the
    previous layer's ``out_features``, a parameter), the same product with new spatial factors, the
    expression scaled (``n * 2`` where it evaluated to half), or the number."""
    first, _ = linear_args(call)
    scope = sf.scope_of(call)
    best = None
    for other in linear_calls(scope):
        if other is call or sf.scope_of(other) is not scope:
            continue
        _, out_expr = linear_args(other)
        if out_expr is None or isinstance(out_expr, ast.Constant) or evaluate(out_expr, names) != got:
            continue
        # the nearest layer above it is the one whose output it reads
        rank = (other.lineno <= call.lineno, other.lineno if other.lineno <= call.lineno else -other.lineno)
        if best is None or rank > best[0]:
            best = (rank, sf.segment(out_expr))
    if best is not None and best[1]:
        return best[1]
    same = [n for n in param_names(scope) if names.get(n) == got and n != "self"]
    if len(same) == 1:
        return same[0]
    old = factors(first) if first is not None else None
    product = same_shape_product(old, got) if old else None
    if product:
        return product
    text = sf.segment(first) if first is not None else None
    if text and isinstance(first, (ast.Name, ast.Attribute)):
        if got % expected == 0:
            return f"{text} * {got // expected}"
        if expected % got == 0:
            return f"{text} // {expected // got}"
    return str(got)
