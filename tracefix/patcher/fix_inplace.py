"""F2: a tensor saved for backward was modified in place."""
from __future__ import annotations

import re
from typing import List, Optional

import libcst as cst

from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.cstedit import Source, dotted, expr, keyword, positional, remove_arg
from tracefix.records import FixSite

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
NOT_TENSOR_INPLACE = {"requires_grad_", "share_memory_", "retain_grad_"}
NO_OUT_OF_PLACE = {"copy_", "set_", "resize_", "resize_as_", "detach_"}
VIEWS = {"view", "view_as", "reshape", "transpose", "t", "permute", "narrow", "select", "unsqueeze",
         "squeeze", "expand", "expand_as", "flatten", "unflatten", "split", "chunk", "unbind",
         "diagonal", "as_strided", "detach", "T", "mT", "movedim", "swapaxes", "unfold"}


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
    return [Option(f"Replace the in-place `{target} {op_text} ...` with an out-of-place `{target} = {target} "
                   f"{op_text[:-1]} ...` so the tensor saved for backward keeps its value", "safe", "",
                   {site.path: src.replace(node, make)})]


def _inplace_call(n: cst.CSTNode) -> bool:
    return (isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
            and bool(_INPLACE_METHOD.match(n.func.attr.value)) and n.func.attr.value not in NOT_TENSOR_INPLACE)


def _out_of_place(src: Source, call: cst.Call) -> Optional[cst.BaseExpression]:
    name = call.func.attr.value
    receiver = src.code(call.func.value).strip()
    if name in NO_OUT_OF_PLACE:
        return None
    if name == "zero_" and not call.args:
        return expr(f"torch.zeros_like({receiver})")
    if name == "fill_" and len(call.args) == 1:
        return expr(f"torch.full_like({receiver}, {src.code(call.args[0].value).strip()})")
    return call.with_changes(func=call.func.with_changes(attr=cst.Name(name[:-1])))


@fixer("inplace-method")
def inplace_method(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    call = src.find(site.line, site.col, cst.Call, _inplace_call)
    if call is None:
        return []
    new_call = _out_of_place(src, call)
    if new_call is None:
        return []
    method = call.func.attr.value
    receiver = call.func.value
    rcode = src.code(receiver).strip()
    parent = src.parent(call)
    if isinstance(parent, cst.Expr) and isinstance(receiver, ASSIGNABLE):
        def make(n: cst.Expr) -> cst.Assign:
            return cst.Assign(targets=[cst.AssignTarget(target=receiver)], value=new_call, semicolon=n.semicolon)
        text = src.replace(parent, make)
        return [Option(f"Replace `{rcode}.{method}(...)` with `{rcode} = {rcode}.{method[:-1]}(...)`: a new tensor "
                       "instead of changing the one saved for backward", "safe", "", {site.path: _torch(text, new_call)})]
    if isinstance(parent, cst.Expr):
        return []  # a.view(-1).relu_(): nothing to assign the result to
    text = src.replace(call, lambda n: new_call)
    safe = (isinstance(parent, cst.Assign) and len(parent.targets) == 1
            and src.code(parent.targets[0].target).strip() == rcode)
    return [Option(f"Use the out-of-place `{method[:-1]}` instead of `{method}`", "safe" if safe else "unsafe",
                   "" if safe else f"{rcode} is no longer modified; code that relied on that change must use the "
                                   "returned value", {site.path: _torch(text, new_call)})]


def _torch(text: str, new: cst.CSTNode) -> str:
    from tracefix.patcher.cstedit import ensure_torch
    return ensure_torch(text) if isinstance(new, cst.Call) and dotted(new.func).startswith("torch.") else text


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
    if call is None:
        return []
    arg = _true_inplace_arg(call)
    text = src.replace(arg.value, lambda n: n.with_changes(value="False"))
    return [Option(f"Turn off inplace in `{dotted(call.func) or 'the call'}(...)` so it returns a new tensor "
                   "instead of overwriting the one saved for backward", "safe", "", {site.path: text})]


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
    safe = isinstance(base, cst.Name)
    return [Option(f"Write into a copy: insert `{code} = {code}.clone()` before the indexed assignment, so the tensor "
                   "saved for backward is left untouched", "safe" if safe else "unsafe",
                   "" if safe else f"{code} then points to a copy; other references to the old tensor no longer see "
                                   "the write", {site.path: text})]


def _aliased(src: Source, name: str) -> bool:
    """Is ``name`` bound to a view/alias of something, or is something bound to a view of it?"""
    def root_name(v: cst.CSTNode) -> str:
        while True:
            if isinstance(v, cst.Subscript):
                v = v.value
            elif isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value in VIEWS:
                v = v.func.value
            elif isinstance(v, cst.Attribute) and v.attr.value in VIEWS:
                v = v.value
            else:
                return v.value if isinstance(v, cst.Name) else ""

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
    if not isinstance(parent, cst.Expr) or not isinstance(out.value, ASSIGNABLE):
        return []
    target = out.value
    code = src.code(target).strip()

    def make(n: cst.Expr) -> cst.Assign:
        return cst.Assign(targets=[cst.AssignTarget(target=target)], value=remove_arg(n.value, keyword(n.value, "out")),
                          semicolon=n.semicolon)

    aliased = not isinstance(target, cst.Name) or _aliased(src, code)
    return [Option(f"Assign the result instead of writing into `{code}` with out=", "unsafe" if aliased else "safe",
                   f"{code} may be aliased (a view or another name shares its memory); those no longer see the result"
                   if aliased else "", {site.path: src.replace(parent, make)})]


def explain_unpatchable(site: FixSite) -> str:
    """Why some fix sites get no automatic patch (the CLI shows this instead of a diff)."""
    if site.kind == "optimizer-step-between":
        return (f"{site.path}:{site.line} updates the parameters in place ({site.code.strip() or 'optimizer.step()'}) "
                "between the forward pass and backward(); move it after backward() (or recompute the forward "
                "after the step) — the right order depends on your loop, so tracefix does not rewrite it.")
    return f"{site.path}:{site.line}: no automatic fix for '{site.kind}'; change this line by hand."
