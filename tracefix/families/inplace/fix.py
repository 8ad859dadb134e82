"""F2: a tensor saved for backward was modified in place."""
from __future__ import annotations

import builtins
import re
from typing import List, Optional, Set, Tuple

import libcst as cst

from tracefix.record import replace

from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.cstedit import Source, add_arg, dotted, expr, keyword, kwarg, positional, remove_arg
from tracefix.patcher.rebind import (Sources, dropped_write_risk, hook_of, in_loop, names_read as _names, read_after,
                                     reads_name, rebind_risk, view_risk, view_root)
from tracefix.records import FixSite
from tracefix.vocab import NOT_INPLACE_METHODS, OPTIMIZER_CLASSES, VIEW_ATTRS, VIEW_METHODS

_AUG_TO_BIN = {
    cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide, cst.FloorDivideAssign: cst.FloorDivide, cst.ModuloAssign: cst.Modulo,
    cst.PowerAssign: cst.Power, cst.MatrixMultiplyAssign: cst.MatrixMultiply,
    cst.LeftShiftAssign: cst.LeftShift, cst.RightShiftAssign: cst.RightShift,
    cst.BitOrAssign: cst.BitOr, cst.BitAndAssign: cst.BitAnd, cst.BitXorAssign: cst.BitXor,
}
_PRECEDENCE = {cst.BitOr: 1, cst.BitXor: 2, cst.BitAnd: 3, cst.LeftShift: 4, cst.RightShift: 4,
               cst.Add: 5, cst.Subtract: 5, cst.Multiply: 6, cst.MatrixMultiply: 6, cst.Divide: 6,
               cst.FloorDivide: 6, cst.Modulo: 6, cst.Power: 8}
ASSIGNABLE = (cst.Name, cst.Attribute, cst.Subscript)
_INPLACE_METHOD = re.compile(r"^[A-Za-z][A-Za-z0-9_]*[A-Za-z0-9]_$")
# in-place Tensor methods without an out-of-place twin (``name[:-1]`` is no method; torch 2.13's dir(torch.Tensor))
NO_OUT_OF_PLACE = {"apply_", "cauchy_", "copy_", "exponential_", "fill_", "fill_diagonal_", "geometric_",
                   "log_normal_", "map2_", "map_", "normal_", "random_", "resize_as_sparse_", "set_",
                   "share_memory_", "sparse_resize_", "sparse_resize_and_clear_", "uniform_", "zero_",
                   "resize_", "resize_as_", "detach_"}
VIEWS = VIEW_METHODS | VIEW_ATTRS


def _needs_parens(value: cst.BaseExpression, op: type) -> bool:
    if getattr(value, "lpar", None):
        return False
    if isinstance(value, cst.BinaryOperation):
        return _PRECEDENCE.get(type(value.operator), 0) <= _PRECEDENCE[op]
    if isinstance(value, cst.UnaryOperation):
        return isinstance(value.operator, cst.Not)
    return isinstance(value, (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda, cst.NamedExpr,
                              cst.Yield, cst.Tuple))


@fixer("inplace-augassign")
def augassign(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    node = src.find(site.line, site.col, cst.AugAssign)
    if node is None:
        return []
    binop = _AUG_TO_BIN[type(node.operator)]

    def make(n: cst.AugAssign) -> cst.Assign:
        value = n.value
        if _needs_parens(value, binop):
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        target = n.target.deep_clone()
        op = binop(whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" "))
        return cst.Assign(
            targets=[cst.AssignTarget(target=n.target, whitespace_before_equal=n.operator.whitespace_before,
                                      whitespace_after_equal=n.operator.whitespace_after)],
            value=cst.BinaryOperation(left=target, operator=op, right=value), semicolon=n.semicolon)

    target = src.code(node.target)
    op_text = src.code(node.operator).strip()
    text, risk = src.replace(node, make), ""
    if isinstance(node.target, cst.Name):
        text, risk = _rebound(src, node, target, _sources(ctx, site, src), text)
    return [Option(f"Replace the in-place `{target} {op_text} ...` with an out-of-place `{target} = {target} "
                   f"{op_text[:-1]} ...` so the tensor saved for backward keeps its value", _label(risk), risk,
                   {site.path: text})]


def _label(risk: str) -> str:
    return "unsafe" if risk else "safe"


def _inplace_call(n: cst.CSTNode) -> bool:
    return (isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
            and bool(_INPLACE_METHOD.match(n.func.attr.value)) and n.func.attr.value not in NOT_INPLACE_METHODS)


def _out_of_place(src: Source, call: cst.Call) -> Optional[cst.BaseExpression]:
    name = call.func.attr.value
    receiver = src.code(call.func.value).strip()
    function_form = dotted(call.func.value) in _FUNCTION_MODULES
    if name == "zero_" and not call.args and not function_form:
        return expr(f"torch.zeros_like({receiver})")
    if name == "fill_" and len(call.args) == 1 and not function_form and _number(call.args[0].value):
        # only a plain number: full_like would drop the gradient of a tensor fill value
        return expr(f"torch.full_like({receiver}, {src.code(call.args[0].value).strip()})")
    if name in NO_OUT_OF_PLACE:
        return None
    return call.with_changes(func=call.func.with_changes(attr=cst.Name(name[:-1])))


def _number(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float))


# Function forms whose first argument is the tensor changed in place (torch.relu_(x), F.relu_(x)).
_FUNCTION_MODULES = {"torch", "F", "nn.functional", "torch.nn.functional", "functional"}


def _chain(src: Source, call: cst.Call) -> List[cst.Call]:
    """The run of in-place calls ``call`` is part of, innermost first: ``h.mul_(a).add_(b)`` changes ``h``
    twice (an in-place method returns its receiver), so the run is rewritten as one."""
    while isinstance(call.func.value, cst.Call) and _inplace_call(call.func.value):
        call = call.func.value
    calls = [call]
    while True:
        attr = src.parents.get(calls[-1])
        outer = src.parents.get(attr) if isinstance(attr, cst.Attribute) else None
        if not (isinstance(outer, cst.Call) and outer.func is attr and _inplace_call(outer)):
            return calls
        calls.append(outer)


def _twin(call: cst.Call, receiver: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The out-of-place form of an in-place method call ``call``, applied to ``receiver``."""
    name = call.func.attr.value
    if name == "zero_" and not call.args:
        return cst.Call(func=expr("torch.zeros_like"), args=[cst.Arg(receiver)])
    if name == "fill_" and len(call.args) == 1 and _number(call.args[0].value):
        return cst.Call(func=expr("torch.full_like"),
                        args=[cst.Arg(receiver, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                              cst.Arg(call.args[0].value)])
    if name in NO_OUT_OF_PLACE:
        return None
    return call.with_changes(func=call.func.with_changes(value=receiver, attr=cst.Name(name[:-1])))


@fixer("inplace-method")
def inplace_method(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    call = src.find(site.line, site.col, cst.Call, _inplace_call)
    if call is None:
        return []
    calls = _chain(src, call)
    new_call = _out_of_place(src, calls[0])
    for outer in calls[1:]:
        new_call = None if new_call is None else _twin(outer, new_call)
    if new_call is None:
        return []
    top = calls[-1]
    method = ".".join(c.func.attr.value for c in calls)
    receiver = calls[0].func.value
    if dotted(receiver) in _FUNCTION_MODULES:
        # torch.sigmoid_(logits) / F.relu_(h): the tensor modified is the first argument, not `torch`
        args = positional(calls[0])
        if not args:
            return []
        receiver = args[0].value
    rcode = src.code(receiver).strip()
    called = f"{src.code(top.func).strip()}(...)" if len(calls) == 1 else " ".join(src.code(top).split())
    new_code = " ".join(cst.Module([]).code_for_node(new_call).split())
    if len(new_code) > 80:
        new_code = new_code[:77] + "..."
    uses_torch = any(isinstance(n, cst.Call) and dotted(n.func).startswith("torch.") for n in _walk(new_call))
    sources = _sources(ctx, site, src)
    parent = src.parent(top)
    if isinstance(parent, cst.Expr) and isinstance(receiver, ASSIGNABLE):
        def make(n: cst.Expr) -> cst.Assign:
            return cst.Assign(targets=[cst.AssignTarget(target=receiver)], value=new_call, semicolon=n.semicolon)
        text = src.replace(parent, make)
        risk = ""
        if isinstance(receiver, cst.Name):
            text, risk = _rebound(src, parent, rcode, sources, text)
        return [Option(f"Replace `{called}` with `{rcode} = {new_code}`: a new tensor "
                       "instead of changing the one saved for backward", _label(risk), risk,
                       {site.path: _torch(text, uses_torch)})]
    if isinstance(parent, cst.Expr):
        return []  # a.view(-1).relu_(): nothing to assign the result to
    if isinstance(parent, cst.Assign) and isinstance(receiver, cst.Name) and \
            rcode not in {src.code(t.target).strip() for t in parent.targets} and read_after(src, parent, rcode):
        # `y = h.mul_(2)` and h is read later: bind both names, as the in-place call left both on one tensor
        text = src.replace(parent, lambda n: n.with_changes(
            targets=[*n.targets, cst.AssignTarget(target=receiver)], value=new_call))
        risk = rebind_risk(src, parent, rcode, sources)
        shown = " = ".join(src.code(t.target).strip() for t in parent.targets)
        return [Option(f"Replace `{called}` with `{shown} = {rcode} = {new_code}`, so '{rcode}' read later sees "
                       "the new value too", _label(risk), risk, {site.path: _torch(text, uses_torch)})]
    text = src.replace(top, lambda n: new_call)
    safe = (isinstance(parent, cst.Assign) and len(parent.targets) == 1
            and src.code(parent.targets[0].target).strip() == rcode)
    risk = "" if safe else (f"'{rcode}' is no longer modified in place; code that reads '{rcode}' after "
                            "this line and relied on that change must use the returned value")
    if safe and isinstance(receiver, cst.Name):   # `x = x.op_()`: rebound already, but a view's base lost the write
        risk = view_risk(src, parent, rcode)
    elif isinstance(receiver, cst.Name) and src.small_statement_of(top) is not None:
        # `return std.mul_(eps).add_(mu)`: only code that sees `std` later could miss the change
        risk = dropped_write_risk(src, top, rcode, sources)
    shown = f"`{method[:-1]}` instead of `{method}`" if len(calls) == 1 else f"`{new_code}` instead of `{called}`"
    return [Option(f"Use the out-of-place {shown}", _label(risk), risk,
                   {site.path: _torch(text, uses_torch)})]


def _rebound(src: Source, stmt: cst.CSTNode, name: str, sources: Sources, text: str) -> Tuple[str, str]:
    """(text, risk) for a rewrite binding ``name`` to a new tensor at ``stmt``: in a hook whose return
    value replaces ``name`` and that returns nothing, the hook now returns ``name`` (else the new
    tensor would be dropped)."""
    hook = hook_of(src, stmt, name, sources)
    if hook:
        returned = _return_name(src, stmt, name, text)
        if returned is not None:
            return returned, rebind_risk(src, stmt, name, sources, returned=True)
    return text, rebind_risk(src, stmt, name, sources)


class _BareReturns(cst.CSTTransformer):
    """``return`` -> ``return <name>`` in one function body (not in functions nested in it)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def leave_Return(self, original_node: cst.Return, updated_node: cst.Return) -> cst.Return:
        if updated_node.value is not None:
            return updated_node
        return updated_node.with_changes(value=cst.Name(self.name), whitespace_after_return=cst.SimpleWhitespace(" "))


def _return_name(src: Source, stmt: cst.CSTNode, name: str, text: str) -> Optional[str]:
    """``text`` (src with ``stmt`` rewritten) with the function holding ``stmt`` returning ``name``
    wherever it ended without a value; None when that cannot be done."""
    fn = next((a for a in src.ancestors(stmt) if isinstance(a, (cst.FunctionDef, cst.Lambda))), None)
    if not isinstance(fn, cst.FunctionDef):
        return None
    line = src.line_of(fn)
    new = Source.parse(str(text))
    if new is None:
        return None
    target = next((f for f in new.all(cst.FunctionDef, lambda f: f.name.value == fn.name.value)
                   if new.line_of(f) == line), None)
    if target is None or not isinstance(target.body, cst.IndentedBlock):
        return None

    def make(f: cst.FunctionDef) -> cst.FunctionDef:
        body = f.body.visit(_BareReturns(name))
        stmts = list(body.body)
        last = stmts[-1] if stmts else None
        if not (isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], (cst.Return, cst.Raise))):
            stmts.append(cst.SimpleStatementLine(body=[cst.Return(value=cst.Name(name))]))
        return f.with_changes(body=body.with_changes(body=stmts))

    return new.replace(target, make)


def _sources(ctx: Context, site: FixSite, src: Source) -> Sources:
    """The files where a function's callers and hook registrations are looked for, parsed when first
    asked: the fix site's own file, the other files the diagnosis names, then its folder's .py files."""
    cache: List[Tuple[str, Source]] = []

    def get() -> List[Tuple[str, Source]]:
        if cache:
            return cache
        cache.append((site.path, src))
        names = [s.path for s in ctx.diag.fix_sites]
        if ctx.diag.crash_site is not None:
            names.append(ctx.diag.crash_site.path)
        tb = ctx.diag.traceback
        for frame in (*tb.frames, *tb.anomaly_frames):
            parts = [p for p in frame.path.replace("\\", "/").split("/") if p and p != "."]
            tail = next((t for t in ("/".join(parts[k:]) for k in range(len(parts))) if (ctx.root / t).is_file()), "")
            if tail and "site-packages/" not in frame.path and not frame.path.startswith("<"):
                names.append(tail)
        folder = site.path.rsplit("/", 1)[0] + "/" if "/" in site.path else ""
        try:
            names += sorted(folder + p.name for p in (ctx.root / folder).glob("*.py"))[:30]
        except OSError:
            pass
        seen = {site.path}
        for rel in names:
            if rel in seen or not (ctx.root / rel).is_file():
                continue
            seen.add(rel)
            other = ctx.source(rel)
            if other is not None:
                cache.append((rel, other))
        return cache

    return get


def _torch(text: str, uses_torch: bool) -> str:
    from tracefix.patcher.cstedit import ensure_torch
    return ensure_torch(text) if uses_torch else text


# inplace is the n-th positional parameter of these modules
_INPLACE_POSITION = {"ReLU": 0, "ReLU6": 0, "SELU": 0, "SiLU": 0, "Mish": 0, "Hardswish": 0, "Hardsigmoid": 0,
                     "Dropout": 1, "Dropout1d": 1, "Dropout2d": 1, "Dropout3d": 1, "AlphaDropout": 1,
                     "FeatureAlphaDropout": 1, "LeakyReLU": 1, "ELU": 1, "CELU": 1, "Threshold": 2, "Hardtanh": 2,
                     "relu": 1, "relu6": 1, "selu": 1, "silu": 1, "leaky_relu": 2, "elu": 2, "dropout": 3}


def _true_inplace_arg(call: cst.CSTNode) -> Optional[cst.Arg]:
    if not isinstance(call, cst.Call):
        return None
    kw = keyword(call, "inplace")
    if kw is not None:
        return kw if isinstance(kw.value, cst.Name) and kw.value.value == "True" else None
    at = _INPLACE_POSITION.get(dotted(call.func).rsplit(".", 1)[-1])
    pos = positional(call)
    if at is not None and len(pos) > at and isinstance(pos[at].value, cst.Name) and pos[at].value.value == "True":
        return pos[at]
    return None


@fixer("inplace-kwarg")
def inplace_kwarg(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    call = src.find(site.line, site.col, cst.Call, lambda n: _true_inplace_arg(n) is not None)
    shown = lambda c: dotted(c.func) or " ".join(src.code(c.func).split())[:40] or "the call"  # noqa: E731
    if call is None:
        # `inplace=flag`: the locator names such a call only when the witness saw it built in place
        call = src.find(site.line, site.col, cst.Call, lambda n: _flag_inplace_arg(n) is not None)
        if call is None:
            return []
        arg = _flag_inplace_arg(call)
        flag = " ".join(src.code(arg.value).split())
        text = src.replace(arg.value, lambda n: cst.Name("False"))
        return [Option(f"Turn off inplace in `{shown(call)}(...)`: inplace=False instead of `{flag}` (True when "
                       "it crashed), so it returns a new tensor instead of overwriting the one saved for backward",
                       "safe", "", {site.path: text})]
    arg = _true_inplace_arg(call)
    text = src.replace(arg.value, lambda n: n.with_changes(value="False"))
    return [Option(f"Turn off inplace in `{shown(call)}(...)` so it returns a new tensor "
                   "instead of overwriting the one saved for backward", "safe", "", {site.path: text})]


def _flag_inplace_arg(call: cst.CSTNode) -> Optional[cst.Arg]:
    """``inplace=<an expression>`` (a flag, a config value), not a literal."""
    kw = keyword(call, "inplace") if isinstance(call, cst.Call) else None
    if kw is None or isinstance(kw.value, (cst.Name, cst.SimpleString, cst.Integer)) and \
            getattr(kw.value, "value", "") in ("True", "False", "None"):
        return None
    return kw if isinstance(kw.value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) else None


def _subscript_base(target: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(target, cst.Subscript):
        target = target.value
    return target


def _is_clone_of(stmt: cst.CSTNode, code: str, src: Source) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    small = stmt.body[0]
    return (isinstance(small, cst.Assign) and len(small.targets) == 1
            and src.code(small.targets[0].target).strip() == code
            and src.code(small.value).strip() in (f"{code}.clone()",))


@fixer("inplace-subscript")
def inplace_subscript(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []

    def subscript_target(n: cst.CSTNode) -> bool:
        targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
        return any(isinstance(t, cst.Subscript) for t in targets)

    node = src.find(site.line, site.col, (cst.Assign, cst.AugAssign), subscript_target)
    if node is None:
        return []
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
    base = _subscript_base(next(t for t in targets if isinstance(t, cst.Subscript)))
    if not isinstance(base, (cst.Name, cst.Attribute)):
        return []
    code = src.code(base).strip()
    line = src.parent(node)
    clone = cst.Assign(targets=[cst.AssignTarget(target=base)], value=expr(f"{code}.clone()"))
    if isinstance(line, cst.SimpleStatementLine) and line.body[0] is node:
        block = src.parent(line)
        if isinstance(block, (cst.Module, cst.IndentedBlock)):
            index = next(i for i, s in enumerate(block.body) if s is line)
            if index > 0 and _is_clone_of(block.body[index - 1], code, src):
                return []

        def make(body, i):  # the comments above the statement stay above both lines
            new = cst.SimpleStatementLine(body=[clone], leading_lines=body[i].leading_lines)
            return body[:i] + [new, body[i].with_changes(leading_lines=[])] + body[i + 1:]
        text = src.edit_body(line, make)
    elif isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        i = next(k for k, s in enumerate(line.body) if s is node)
        if i > 0 and isinstance(line.body[i - 1], cst.Assign) and src.code(line.body[i - 1].value).strip() == f"{code}.clone()":
            return []

        def make_small(n):
            body = list(n.body)
            semi = cst.Semicolon(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" "))
            return n.with_changes(body=body[:i] + [clone.with_changes(semicolon=semi)] + body[i:])
        text = src.replace(line, make_small)
    else:
        return []
    if text is None:
        return []
    risk = _clone_risk(src, node, base, code)
    if isinstance(base, cst.Name) and not reads_name(node.value, code):
        text, risk = _rebound(src, node, code, _sources(ctx, site, src), text)
    return [Option(f"Write into a copy: insert `{code} = {code}.clone()` before the indexed assignment, so the tensor "
                   "saved for backward is left untouched", _label(risk), risk, {site.path: text})]


def _clone_risk(src: Source, node: cst.CSTNode, base: cst.BaseExpression, code: str) -> str:
    """Why writing into a fresh copy of ``base`` is not the same as the indexed write; "" when it is."""
    if not isinstance(base, cst.Name):
        return f"{code} then points to a copy; other references to the old tensor no longer see the write"
    if reads_name(node.value, code):
        # states[:, i + 1] = f(states[:, i]): f saves a slice of the copy, which this line then writes
        where = " (and the loop repeats it)" if in_loop(src, node) else ""
        return (f"the right-hand side reads '{code}', which is now the copy this line writes into: if that read "
                f"is saved for backward, the error remains{where}")
    return rebind_risk(src, node, code)


def _aliased(src: Source, name: str) -> bool:
    """Is ``name`` bound to a view/alias of something, or is something bound to a view of it?"""
    def root_name(v: cst.BaseExpression) -> str:
        root, _ = view_root(v, VIEWS, VIEWS)   # this check's own, wider view set
        return root.value if isinstance(root, cst.Name) else ""

    for assign in src.all(cst.Assign):
        targets = {src.code(t.target).strip() for t in assign.targets}
        source = root_name(assign.value)
        if name in targets and source and source != name:
            return True
        if source == name and name not in targets:
            return True
    return False


@fixer("inplace-out")
def inplace_out(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    call = src.find(site.line, site.col, cst.Call, lambda n: keyword(n, "out") is not None)
    if call is None:
        return []
    parent = src.parent(call)
    out = keyword(call, "out")
    if not isinstance(out.value, ASSIGNABLE):
        return []
    if not isinstance(parent, cst.Expr):
        # `x * torch.normal(..., out=self.noise)`: the result is used right here; drop out= and the
        # buffer is simply no longer written
        code = src.code(out.value).strip()
        others = [n for n in src.all((cst.Name, cst.Attribute)) if src.code(n).strip() == code
                  and not any(a is out for a in src.ancestors(n))]
        kept = bool(others)
        return [Option(f"Drop `out={code}` so the call returns a new tensor instead of overwriting `{code}`, "
                       "which an earlier use saved for backward", "unsafe" if kept else "safe",
                       f"{code} is no longer updated by this call; the other code that reads it sees its old value"
                       if kept else "", {site.path: src.replace(call, lambda n: remove_arg(n, keyword(n, "out")))})]
    target = out.value
    code = src.code(target).strip()

    def make(n: cst.Expr) -> cst.Assign:
        return cst.Assign(targets=[cst.AssignTarget(target=target)], value=remove_arg(n.value, keyword(n.value, "out")),
                          semicolon=n.semicolon)

    aliased = not isinstance(target, cst.Name) or _aliased(src, code)
    text = src.replace(parent, make)
    if aliased:
        risk = f"{code} may be aliased (a view or another name shares its memory); those no longer see the result"
    else:
        text, risk = _rebound(src, parent, code, _sources(ctx, site, src), text)
    return [Option(f"Assign the result instead of writing into `{code}` with out=", _label(risk), risk,
                   {site.path: text})]


# -- optimizer.step() between two backward passes -------------------------------------------------
_PARAM_VIEWS = {"parameters", "named_parameters", "modules", "children", "buffers", "state_dict"}
_BUILTINS = set(dir(builtins))


def _is_optimizer(call: cst.CSTNode) -> bool:
    if not isinstance(call, cst.Call):
        return False
    parts = dotted(call.func).split(".")
    return parts[-1] in OPTIMIZER_CLASSES or any(p in ("optim", "optimizer", "optimizers") for p in parts[:-1])


def _mentions(node: cst.CSTNode, names: Set[str], dotted_names: Set[str]) -> bool:
    found = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> bool:
            if dotted(n) in dotted_names:
                found.append(n)
            return True

        def visit_Name(self, n: cst.Name) -> None:
            if n.value in names or n.value in dotted_names:
                found.append(n)

    node.visit(V())
    return bool(found)


def _reads_grad(node: cst.CSTNode) -> bool:
    return any(True for n in _walk(node) if isinstance(n, cst.Attribute) and n.attr.value == "grad")


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


def _assignments(src: Source, target: str) -> List[cst.BaseExpression]:
    """Values assigned to ``target`` (dotted code) anywhere in the file; None marks one we cannot read."""
    values: List[Optional[cst.BaseExpression]] = []
    for node in src.all((cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.With, cst.NamedExpr)):
        if isinstance(node, cst.Assign):
            for t in node.targets:
                tt = t.target
                if src.code(tt).strip() == target:
                    values.append(node.value)
                elif isinstance(tt, (cst.Tuple, cst.List)):
                    codes = [src.code(e.value).strip() for e in tt.elements]
                    if target in codes:
                        v = node.value
                        same = isinstance(v, (cst.Tuple, cst.List)) and len(v.elements) == len(codes) \
                            and not any(isinstance(e, cst.StarredElement) for e in v.elements)
                        values.append(v.elements[codes.index(target)].value if same else None)
        elif isinstance(node, cst.AnnAssign):
            if src.code(node.target).strip() == target:
                values.append(node.value)
        elif isinstance(node, cst.AugAssign):
            if src.code(node.target).strip() == target:
                values.append(None)
        elif isinstance(node, cst.NamedExpr):
            if src.code(node.target).strip() == target:
                values.append(node.value)
        elif isinstance(node, cst.For):
            if target in {src.code(n).strip() for n in _walk(node.target) if isinstance(n, (cst.Name, cst.Attribute))}:
                values.append(None)
        elif isinstance(node, cst.With):
            for item in node.items:
                if item.asname is not None and target in {src.code(n).strip() for n in _walk(item.asname.name)
                                                          if isinstance(n, (cst.Name, cst.Attribute))}:
                    values.append(None)
    return values


def _optimizer_roots(src: Source, opt: str) -> Optional[Set[str]]:
    """Names that hold what optimizer ``opt`` updates (its models, parameter lists, their aliases)."""
    values = _assignments(src, opt)
    if not values or any(v is None or not _is_optimizer(v) for v in values):
        return None
    roots: Set[str] = set()
    for v in values:
        params = positional(v)[:1] or [a for a in v.args if a.keyword is not None and a.keyword.value == "params"]
        if not params:
            return None
        roots |= _names(params[0].value) - _BUILTINS
    if not roots:
        return None
    # what those names were built from (params = list(D.parameters()) -> D), then names bound to aliases
    # of them (disc = D, ps = D.parameters())
    todo = list(roots)
    while todo:
        name = todo.pop()
        for v in _assignments(src, name):
            if v is None:
                continue
            for n in _names(v, skip_callees=True) - _BUILTINS - roots:
                roots.add(n)
                todo.append(n)
    changed = True
    while changed:
        changed = False
        for assign in src.all(cst.Assign):
            v = assign.value
            while isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value in _PARAM_VIEWS:
                v = v.func.value
            while isinstance(v, cst.Attribute):
                v = v.value
            if not (isinstance(v, cst.Name) and v.value in roots):
                continue
            for t in assign.targets:
                if isinstance(t.target, cst.Name) and t.target.value not in roots:
                    roots.add(t.target.value)
                    changed = True
    return roots


def _param_sources(node: cst.CSTNode) -> Set[str]:
    """What an optimizer's params argument draws on, as dotted paths: ``model.trunk_parameters``
    and ``model.action_head`` in ``model.trunk_parameters() + list(model.action_head.parameters())``."""
    if isinstance(node, (cst.Name, cst.Attribute)) and dotted(node):
        return {dotted(node)} - _BUILTINS
    out: Set[str] = set()
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _PARAM_VIEWS and dotted(func.value):
            return {dotted(func.value)}
        if dotted(func) and dotted(func) not in _BUILTINS and not dotted(func).startswith("itertools."):
            out.add(dotted(func))
        for a in node.args:
            out |= _param_sources(a.value)
        return out
    for child in node.children:
        out |= _param_sources(child)
    return out


def _shared_sources(src: Source, opt1: str, opt2: str) -> Set[str]:
    """The param sources of two optimizers that overlap (one is the other or contains it)."""
    def sources(opt: str) -> Set[str]:
        out: Set[str] = set()
        for v in _assignments(src, opt):
            params = positional(v)[:1] or [a for a in v.args if a.keyword is not None and a.keyword.value == "params"]
            if params:
                out |= _param_sources(params[0].value)
        return out
    a, b = sources(opt1), sources(opt2)
    return {x for x in a for y in b if x == y or x.startswith(y + ".") or y.startswith(x + ".")} | \
        {y for x in a for y in b if x == y or x.startswith(y + ".") or y.startswith(x + ".")}


def _step_call(stmt: cst.CSTNode) -> Optional[cst.Call]:
    """The call of a statement line that is exactly ``<optimizer>.step()``."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
        return None
    call = stmt.body[0].value
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "step" \
            and not call.args and dotted(call.func.value):
        return call
    return None


def _backward_calls(stmt: cst.CSTNode) -> List[cst.Call]:
    return [n for n in _walk(stmt) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
            and n.func.attr.value == "backward"]


def _has_inputs(call: cst.Call) -> Optional[bool]:
    """Does the backward call already pass inputs (None: cannot tell, *args / **kwargs)?"""
    if any(a.star for a in call.args):
        return None
    if keyword(call, "inputs") is not None:
        return True
    module_form = dotted(call.func) in ("torch.autograd.backward", "autograd.backward")
    return len(positional(call)) > (5 if module_form else 3)


def _reorder_option(ctx: Context, site: FixSite) -> Optional[Option]:
    src = ctx.source(site.path)
    if src is None:
        return None
    line = next((s for s in src.all_on_line(site.line, cst.SimpleStatementLine)
                 if src.line_of(s) == site.line and _step_call(s) is not None), None)
    if line is None:
        return None
    block = src.parent(line)
    if not isinstance(block, (cst.Module, cst.IndentedBlock)):
        return None
    body = list(block.body)
    at = next(i for i, s in enumerate(body) if s is line)
    opt1 = dotted(_step_call(line).func.value)
    # (1) the next statement with a backward() call, then the other optimizer's step()
    b = next((i for i in range(at + 1, len(body)) if _backward_calls(body[i])), None)
    if b is None or not isinstance(body[b], cst.SimpleStatementLine) or len(_backward_calls(body[b])) != 1:
        return None
    backward = _backward_calls(body[b])[0]
    has_inputs = _has_inputs(backward)
    if has_inputs is None:
        return None
    s2 = next((i for i in range(b + 1, len(body)) if _step_call(body[i]) is not None
               and _optimizer_roots(src, dotted(_step_call(body[i]).func.value)) is not None), None)
    if s2 is None:
        return None
    opt2 = dotted(_step_call(body[s2]).func.value)
    roots1 = _optimizer_roots(src, opt1)
    roots2 = _optimizer_roots(src, opt2)
    if opt2 == opt1 or roots1 is None or roots2 is None:
        return None
    # parameters in both optimizers (an actor-critic's shared trunk) get both losses' gradients
    # whatever the backward's inputs; the step then runs on their sum
    shared = _shared_sources(src, opt1, opt2)
    if roots1 & roots2 and not shared:
        return None  # related through what the models were built from: which parameters, unknown
    # (2)/(3) nothing up to the backward touches the stepped model, its optimizer, gradients or a
    # function of this file (which could use the model behind our back)
    local_defs = {f.name.value for f in src.all((cst.FunctionDef, cst.ClassDef))}
    for stmt in body[at + 1:b + 1]:
        if _mentions(stmt, roots1 | local_defs, {opt1}) or _reads_grad(stmt):
            return None
    for stmt in body[b + 1:s2]:
        if _mentions(stmt, set(), {opt1}):
            return None

    moved_comments = [ln for ln in line.leading_lines if ln.comment is not None]
    blanks = [ln for ln in line.leading_lines if ln.comment is None]

    def make(updated: cst.CSTNode) -> cst.CSTNode:
        new = list(updated.body)
        step = new[at].with_changes(leading_lines=moved_comments)
        nxt = new[at + 1]
        if blanks and not (nxt.leading_lines and nxt.leading_lines[0].comment is None):
            new[at + 1] = nxt.with_changes(leading_lines=[blanks[0], *nxt.leading_lines])
        if not has_inputs and not shared:
            params = expr(f'[p for group in {opt2}.param_groups for p in group["params"] if p.requires_grad]')
            target = _backward_calls(new[b])[0]
            new[b] = new[b].visit(_Swap(target, _append(target, kwarg("inputs", params))))
        return updated.with_changes(body=new[:at] + new[at + 1:b + 1] + [step] + new[b + 1:])

    text = src.replace(block, make)
    what = src.code(backward.func.value).strip()
    if shared:
        return Option(f"Move `{opt1}.step()` after `{what}.backward()`, so that backward() runs through the "
                      "parameters its forward pass saved",
                      "unsafe", f"{opt1} and {opt2} share parameters ({', '.join(sorted(shared))}): after "
                      f"the move, both steps use the sum of both losses' gradients on them, where {opt1}'s step "
                      "used only the first loss's.", {site.path: text})
    return Option(f"Move `{opt1}.step()` after `{what}.backward()` and let that backward() fill only `{opt2}`'s "
                  "gradients, so it runs through the parameters its forward pass saved",
                  "unsafe", f"The optimizer step is moved after the second backward(), which now only accumulates "
                  f"gradients into {opt2}'s parameters (those of {opt1} no longer receive its gradient).",
                  {site.path: text})


def _append(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """add_arg, but a lone argument on its own line (``f(\\n    a,\\n)``) gets the new one on the next line."""
    args = list(call.args)
    if len(args) == 1 and isinstance(args[0].comma, cst.Comma) \
            and isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        between = args[0].comma.with_changes(whitespace_after=call.whitespace_before_args)
        return call.with_changes(args=[args[0].with_changes(comma=between), arg.with_changes(comma=args[0].comma)])
    return add_arg(call, arg)


class _Swap(cst.CSTTransformer):
    def __init__(self, old: cst.CSTNode, new: cst.CSTNode) -> None:
        super().__init__()
        self.old, self.new = old, new

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        return self.new if original_node is self.old else updated_node


def _binds(stmt: cst.CSTNode, name: str) -> bool:
    """Does stmt assign name, or change it in place (``name.fill_(...)``, ``name += ...``)?"""
    for n in _walk(stmt):
        if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)):
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            if any(isinstance(x, cst.Name) and x.value == name for t in targets for x in _walk(t)):
                return True
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value.endswith("_") \
                and not n.func.attr.value.startswith("_") and name in _names(n.func.value):
            return True
    return False


def _single_assign(stmt: cst.CSTNode) -> Optional[Tuple[str, cst.BaseExpression]]:
    """(name, value) of a statement line that is exactly ``name = value``."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign) \
            and len(stmt.body[0].targets) == 1 and isinstance(stmt.body[0].targets[0].target, cst.Name):
        return stmt.body[0].targets[0].target.value, stmt.body[0].value
    return None


def _recompute_option(ctx: Context, site: FixSite) -> Optional[Option]:
    """Run the stepped model's forward again after its step (a GAN's ``output = netD(fake)``),
    when the next backward's loss is computed after the step from that model's stale output."""
    src = ctx.source(site.path)
    if src is None:
        return None
    line = next((s for s in src.all_on_line(site.line, cst.SimpleStatementLine)
                 if src.line_of(s) == site.line and _step_call(s) is not None), None)
    if line is None:
        return None
    block = src.parent(line)
    if not isinstance(block, (cst.Module, cst.IndentedBlock)):
        return None
    body = list(block.body)
    at = next(i for i, s in enumerate(body) if s is line)
    opt1 = dotted(_step_call(line).func.value)
    roots = _optimizer_roots(src, opt1)
    b = next((i for i in range(at + 1, len(body)) if _backward_calls(body[i])), None)
    if roots is None or b is None or len(_backward_calls(body[b])) != 1:
        return None
    receiver = _backward_calls(body[b])[0].func.value
    # the loss: computed after the step, in this block, from names bound before it
    reads = _names(receiver)
    made = next((i for i in range(b - 1, at, -1) if _single_assign(body[i]) is not None
                 and _single_assign(body[i])[0] in reads), None)
    if made is None:
        return None
    stale: List[int] = []
    for name in sorted(_names(_single_assign(body[made])[1])):
        if any(_binds(st, name) for st in body[at + 1:made]):
            continue                                   # bound again after the step: fresh
        j = next((i for i in range(at - 1, -1, -1) if _binds(body[i], name)), None)
        if j is None or _single_assign(body[j]) is None:
            continue
        value = _single_assign(body[j])[1]
        if not (isinstance(value, cst.Call) and dotted(value.func).split(".")[0] in roots):
            continue                                   # not the stepped model's own forward call
        args = _names(value, skip_callees=True) - {dotted(value.func).split(".")[0]}
        if any(_binds(st, a) for st in body[j + 1:at + 1] for a in args):
            return None                                # its inputs changed since: no faithful rerun
        stale.append(j)
    if not stale:
        return None

    def make(updated: cst.CSTNode) -> cst.CSTNode:
        new = list(updated.body)
        again = [new[j].deep_clone().with_changes(leading_lines=()) for j in stale]
        return updated.with_changes(body=new[:at + 1] + again + new[at + 1:])

    text = src.replace(block, make)
    names = ", ".join(f"`{_single_assign(body[j])[0]}`" for j in stale)
    model = dotted(_single_assign(body[stale[0]])[1].func)
    loss = _single_assign(body[made])[0]
    return Option(f"Compute {names} again after `{opt1}.step()`, so `{loss}` runs through the updated `{model}` "
                  "instead of the graph whose saved weights the step overwrote",
                  "unsafe", f"`{loss}` now sees `{model}` after its step (as pytorch/examples' DCGAN does), and "
                  f"`{model}` runs one more forward pass per iteration (BatchNorm statistics and dropout see it).",
                  {site.path: text})


@fixer("optimizer-step-between")
def optimizer_step_between(ctx: Context, site: FixSite) -> List[Option]:
    options = [_recompute_option(ctx, site), _reorder_option(ctx, site)]
    options = [o for o in options if o is not None]
    return options[:1] + [replace(o, alternative=True) for o in options[1:]]


# -- parameters changed in place after the forward pass, before its backward ----------------------
# Calls allowed between the moved statement and the backward: they neither run a model nor touch
# parameter values (tensor arithmetic on local values, zero_grad, printing).
_HARMLESS_METHODS = {"mean", "sum", "detach", "item", "float", "double", "view", "reshape", "squeeze", "unsqueeze",
                     "abs", "pow", "log", "exp", "neg", "clamp", "sqrt", "square", "max", "min", "norm", "size",
                     "numel", "dim", "flatten", "t", "transpose", "permute", "cpu", "to", "clone", "tolist"}
_HARMLESS_FUNCS = {"print", "len", "float", "int", "str", "round", "abs", "min", "max", "isinstance"}


def _refs(node: cst.CSTNode) -> Set[str]:
    """Dotted names read in node, as long as written (``self.opt.zero_grad``, ``critic``)."""
    out: Set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> bool:
            d = dotted(n)
            if d:
                out.add(d)
                return False
            return True

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

    node.visit(V())
    return out


def _overlap(a: Set[str], b: Set[str]) -> bool:
    return any(x == y or x.startswith(y + ".") or y.startswith(x + ".") for x in a for y in b)


def _harmless(stmt: cst.CSTNode, steps: bool) -> bool:
    """Can the moved statement pass over stmt unchanged in effect?"""
    for n in _walk(stmt):
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Yield, cst.Await, cst.Global,
                          cst.Nonlocal, cst.Return, cst.Raise)):
            return False
        if isinstance(n, cst.Call):
            func = n.func
            if isinstance(func, cst.Attribute):
                name = func.attr.value
                if name == "zero_grad":
                    if steps:
                        return False   # the step the moved call makes would then see no gradient
                    continue
                if name in _HARMLESS_METHODS and isinstance(func.value, (cst.Name, cst.Attribute, cst.Call)):
                    continue
            elif isinstance(func, cst.Name) and func.value in _HARMLESS_FUNCS:
                continue
            return False
    return True


def _assigns_names(node: cst.CSTNode) -> bool:
    """``val = f(...)`` / ``a, b = f(...)``: plain names bound (their later reads stay after the move)."""
    if not isinstance(node, cst.Assign):
        return False
    for t in node.targets:
        target = t.target
        elts = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
        if not all(isinstance(e, cst.Name) for e in elts):
            return False
    return True


def _statement_at(src: Source, line: int) -> Optional[cst.CSTNode]:
    """The statement of a block (simple line or compound) that starts on line."""
    for node in src.all_on_line(line, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        if src.line_of(node) == line and isinstance(src.parent(node), (cst.Module, cst.IndentedBlock)):
            if isinstance(node, cst.BaseCompoundStatement) and not isinstance(node, (cst.For, cst.With)):
                continue
            return node
    return None


def _move_below_backward(ctx: Context, site: FixSite) -> Optional[Option]:
    src = ctx.source(site.path)
    if src is None:
        return None
    stmt = _statement_at(src, site.line)
    if stmt is None:
        return None
    block = src.parent(stmt)
    body = list(block.body)
    at = next(i for i, s in enumerate(body) if s is stmt)
    if isinstance(stmt, cst.SimpleStatementLine) and (len(stmt.body) != 1 or not (
            isinstance(stmt.body[0], cst.Expr) or _assigns_names(stmt.body[0]))):
        return None                 # a call, or `name = call`: what it binds is checked below like what it reads
    crash = ctx.diag.crash_site
    later = [i for i in range(at + 1, len(body)) if _backward_calls(body[i])]
    if crash is not None and crash.path == site.path:
        later = [i for i in later if src.line_of(body[i]) <= crash.line <= src.positions[body[i]].end.line] or []
    if not later:
        return None
    b = later[0]
    if not isinstance(body[b], cst.SimpleStatementLine):
        return None
    steps = site.kind == "param-step-before-backward"
    refs = _refs(stmt) - _BUILTINS
    for s in body[at + 1:b]:
        if not _harmless(s, steps) or _overlap(refs, _refs(s)):
            return None
    if _overlap(refs, _refs(body[b]) - {"backward"}):
        return None
    moved_comments = [ln for ln in stmt.leading_lines if ln.comment is not None]
    blanks = [ln for ln in stmt.leading_lines if ln.comment is None]
    backward = _backward_calls(body[b])[0]
    # a step moved below the backward would also receive that backward's gradient: restrict the
    # backward to the parameters of the optimizer stepped right after it, when the code names it
    opt2 = _next_step_optimizer(ctx, site.path, src, body, b) if steps and _has_inputs(backward) is False else None

    def make(updated: cst.CSTNode) -> cst.CSTNode:
        new = list(updated.body)
        moved = new[at].with_changes(leading_lines=moved_comments)
        nxt = new[at + 1]
        if blanks and not (nxt.leading_lines and nxt.leading_lines[0].comment is None):
            new[at + 1] = nxt.with_changes(leading_lines=[blanks[0], *nxt.leading_lines])
        if opt2:
            params = expr(f'[p for group in {opt2}.param_groups for p in group["params"] if p.requires_grad]')
            target = _backward_calls(new[b])[0]
            new[b] = new[b].visit(_Swap(target, _append(target, kwarg("inputs", params))))
        return updated.with_changes(body=new[:at] + new[at + 1:b + 1] + [moved] + new[b + 1:])

    text = src.replace(block, make)
    shown = " ".join(src.code(stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else stmt).split())[:60]
    back = " ".join(src.code(body[b].body[0]).split())[:60]
    summary = (f"Move `{shown}` below `{back}`, so the backward pass runs through the parameter values its "
               "forward pass saved")
    if steps and opt2:
        return Option(summary + f", and let that backward() fill only `{opt2}`'s gradients", "unsafe",
                      f"`{back}` now runs before the optimizer step in `{shown}` and only accumulates gradients "
                      f"into {opt2}'s parameters (the parameters `{shown}` steps no longer receive its gradient).",
                      {site.path: text})
    if steps:
        return Option(summary, "unsafe", f"`{back}` now runs before the optimizer step in `{shown}`, and adds its "
                      "gradient to the parameters that step updates when they are part of its graph; pass "
                      "inputs= to that backward() if they must not receive it.", {site.path: text})
    return Option(summary, "safe", "", {site.path: text})


@fixer("param-update-before-backward", "param-step-before-backward")
def param_update_before_backward(ctx: Context, site: FixSite) -> List[Option]:
    option = _move_below_backward(ctx, site)
    return [] if option is None else [option]


def _next_step_optimizer(ctx: Context, path: str, src: Source, body, b: int) -> Optional[str]:
    """The optimizer stepped by the statement after body[b]: ``opt_g.step()``, or ``trainer.update_actor()``
    whose method (of a class built in this file, defined here or imported from a sibling module) runs
    exactly one ``self.<opt>.step()`` -> ``trainer.<opt>``."""
    for stmt in body[b + 1:b + 3]:
        call = _step_call(stmt)
        if call is not None:
            return dotted(call.func.value)
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
            continue
        call = stmt.body[0].value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)):
            continue
        recv, meth = call.func.value.value, call.func.attr.value
        values = _assignments(src, recv)
        if len(values) != 1 or not isinstance(values[0], cst.Call) or not isinstance(values[0].func, cst.Name):
            continue
        cls_name = values[0].func.value
        csrc = _class_source(ctx, path, src, cls_name)
        if csrc is None:
            continue
        found = set()
        for cls in csrc.all(cst.ClassDef, lambda n: n.name.value == cls_name):
            for fn in cls.body.body:
                if isinstance(fn, cst.FunctionDef) and fn.name.value == meth:
                    for n in _walk(fn):
                        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "step" \
                                and dotted(n.func.value).startswith("self.") and not n.args:
                            found.add(recv + dotted(n.func.value)[len("self"):])
        if len(found) == 1:
            return found.pop()
    return None


def _class_source(ctx: Context, path: str, src: Source, name: str) -> Optional[Source]:
    if src.all(cst.ClassDef, lambda n: n.name.value == name):
        return src
    for imp in src.all(cst.ImportFrom):
        if imp.relative or isinstance(imp.names, cst.ImportStar) or imp.module is None:
            continue
        if any(isinstance(a.name, cst.Name) and a.name.value == name and a.asname is None for a in imp.names):
            folder = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
            return ctx.source(folder + dotted(imp.module).replace(".", "/") + ".py")
    return None
