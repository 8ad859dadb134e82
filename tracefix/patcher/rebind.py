"""Is rebinding a name what an in-place write did?

The in-place fixers replace ``N.op_(...)`` / ``N += ...`` / ``N[i] = ...`` by a statement that binds
``N`` to a new tensor (``N = N.op(...)``, ``N = N.clone()``).  That keeps the behaviour only when
the new value reaches the code that read the old one: ``N`` is read afterwards in the same scope
(or returned), and no other name shares the tensor that the in-place write used to change.
:func:`rebind_risk` says why it does not, or "" when it does.
"""
from __future__ import annotations

from typing import AbstractSet, List, Optional, Set, Tuple

import libcst as cst

from tracefix.patcher.cstedit import Source

# methods and attributes returning a view of (or the same memory as) their receiver
VIEW_METHODS = {"view", "view_as", "narrow", "select", "transpose", "t", "permute", "expand", "expand_as",
                "unsqueeze", "squeeze", "unflatten", "flatten", "reshape", "unfold", "diagonal", "chunk", "split",
                "unbind", "movedim", "moveaxis", "swapaxes", "swapdims", "as_strided", "detach", "view_as_real",
                "tensor_split", "hsplit", "vsplit"}
VIEW_ATTRS = {"T", "mT", "H", "mH", "data", "real", "imag"}
# iterating these yields the model's own parameters, buffers or modules: a rebound loop variable
# leaves them unchanged
_MODEL_ITERS = {"parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules",
                "children", "named_children"}
_SCOPES = (cst.FunctionDef, cst.Lambda)
_LOOPS = (cst.For, cst.While)


def rebind_risk(src: Source, stmt: cst.CSTNode, name: str) -> str:
    """Why binding ``name`` to a new tensor at ``stmt`` (a small statement) loses what the in-place
    write did; "" when nothing is lost."""
    scope = _scope(src, stmt)
    occ = _occurrences(src, scope, name, stmt)
    reads = _reads_after(src, stmt, scope, name, occ)
    if not reads:
        return (f"'{name}' is not read after this write, so the write would go to a copy that nothing uses "
                "(the in-place change was meant for the caller's tensor)")
    owner = _caller_owned(src, stmt, scope, name)
    if owner and not any(_in_return(src, n, scope) for n in reads):
        return (f"'{name}' is {owner} and is not returned: the in-place write also changed the caller's tensor, "
                "which the rewrite (a new tensor bound to a local name) no longer does")
    return view_risk(src, stmt, name)


def dropped_write_risk(src: Source, call: cst.Call, name: str) -> str:
    """Why leaving ``name`` unchanged at ``call`` (``name.op_()`` replaced by ``name.op()`` whose result
    is used right there) loses what the in-place write did: someone reads ``name`` afterwards, it is
    the caller's tensor, or a view of one read later; "" when nothing sees the difference."""
    stmt = src.small_statement_of(call)
    scope = _scope(src, stmt)
    occ = _occurrences(src, scope, name, stmt)
    # the call's own arguments are evaluated before the write; the rest of the statement after it
    inside = {id(n) for n in _nodes(call)}
    later = [n for n in _nodes(stmt) if isinstance(n, cst.Name) and n.value == name and id(n) not in inside]
    reads = _reads_after(src, stmt, scope, name, occ)
    if reads or later:
        where = f" (read at line {src.line_of(reads[0])})" if reads else ""
        return (f"'{name}' is no longer modified in place; code that reads '{name}' after this line{where} "
                "and relied on that change must use the returned value")
    owner = _caller_owned(src, stmt, scope, name)
    if owner:
        return (f"'{name}' is {owner}: the in-place write also changed the caller's tensor, which the "
                "out-of-place form no longer does")
    return view_risk(src, stmt, name)


def view_risk(src: Source, stmt: cst.CSTNode, name: str) -> str:
    """Why ``name`` shares memory with a tensor read after ``stmt`` (so the in-place write changed that
    one too); "" when it does not, as far as this scope shows."""
    scope = _scope(src, stmt)
    base = _view_base(src, stmt, scope, name)
    if base is None:
        return ""
    if not isinstance(base, cst.Name):  # self.buf[...]: the object outlives this scope
        shown = src.code(base).strip()
        return (f"'{name}' is a view of '{shown}': the in-place write also changed '{shown}', "
                "which the out-of-place form no longer does")
    reads = _reads_after(src, stmt, scope, base.value, _occurrences(src, scope, base.value, stmt))
    if not reads:
        return ""
    return (f"'{name}' is a view of '{base.value}': the in-place write also changed '{base.value}' "
            f"(read at line {src.line_of(reads[0])}), which the out-of-place form no longer does")


def names_read(node: cst.CSTNode, skip_callees: bool = False) -> Set[str]:
    """Names read in ``node`` (not attribute names, keyword names or, with skip_callees, f in f(...))."""
    out: Set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

        def visit_Call(self, n: cst.Call) -> bool:
            if not (skip_callees and isinstance(n.func, cst.Name)):
                n.func.visit(self)
            for a in n.args:
                a.visit(self)
            return False

        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

    node.visit(V())
    return out


def reads_name(node: cst.CSTNode, name: str) -> bool:
    """Does ``node`` mention the variable ``name`` (not an attribute or keyword of that name)?"""
    return name in names_read(node)


def in_loop(src: Source, stmt: cst.CSTNode) -> bool:
    """Is ``stmt`` inside a for/while loop of its own scope?"""
    return bool(_loops(src, stmt, _scope(src, stmt)))


# -- helpers ----------------------------------------------------------------------------------------
def _scope(src: Source, node: cst.CSTNode) -> cst.CSTNode:
    return next((a for a in src.ancestors(node) if isinstance(a, _SCOPES)), src.module)


def _loops(src: Source, node: cst.CSTNode, scope: cst.CSTNode) -> List[cst.CSTNode]:
    out = []
    for a in src.ancestors(node):
        if a is scope:
            break
        if isinstance(a, _LOOPS):
            out.append(a)
    return out


def _start(src: Source, node: cst.CSTNode) -> Tuple[int, int]:
    p = src.positions[node].start
    return (p.line, p.column)


def _end(src: Source, node: cst.CSTNode) -> Tuple[int, int]:
    p = src.positions[node].end
    return (p.line, p.column)


def _occurrences(src: Source, scope: cst.CSTNode, name: str, stmt: cst.CSTNode) -> List[Tuple[cst.Name, bool]]:
    """(Name node, is it a read) for each use of the variable ``name`` in ``scope`` outside ``stmt``,
    in file order."""
    out = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)   # the attribute name itself is no variable
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

        def visit_Param(self, n: cst.Param) -> bool:
            return False

        def visit_Name(self, n: cst.Name) -> None:
            if n.value == name:
                out.append(n)

    body = scope.body if isinstance(scope, (cst.FunctionDef, cst.Lambda)) else scope
    body.visit(V())
    inside = {id(n) for n in _nodes(stmt)}
    # in `x = f(x)` the value is read before the name is bound: order a store by its value's end
    return sorted(((n, not _is_store(src, n)) for n in out if id(n) not in inside),
                  key=lambda t: _start(src, t[0]) if t[1] else _bound_at(src, t[0]))


def _nodes(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _nodes(child)


def _bound_at(src: Source, n: cst.Name) -> Tuple[int, int]:
    """Where the store ``n`` takes effect: after the value of its assignment."""
    for a in src.ancestors(n):
        if isinstance(a, (cst.Assign, cst.AnnAssign)):
            return _end(src, a.value) if a.value is not None else _start(src, n)
        if isinstance(a, cst.BaseSmallStatement) or isinstance(a, cst.BaseCompoundStatement):
            break
    return _start(src, n)


def _is_store(src: Source, n: cst.Name) -> bool:
    child, p = n, src.parents.get(n)
    while isinstance(p, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
        child, p = p, src.parents.get(p)
    if isinstance(p, (cst.AssignTarget, cst.AsName)):
        return True
    return isinstance(p, (cst.For, cst.CompFor, cst.AnnAssign, cst.NamedExpr)) and p.target is child


def _reads_after(src: Source, stmt: cst.CSTNode, scope: cst.CSTNode, name: str,
                 occ: List[Tuple[cst.Name, bool]]) -> List[cst.Name]:
    """Reads of ``name`` that see the value ``stmt`` leaves: the first use after it when that is a
    read (a plain rebinding first means nothing reads it), and the same for each enclosing loop whose
    next iteration starts over (unless the loop itself rebinds ``name``)."""
    end = _end(src, stmt)
    reads = _run(occ, lambda n: _start(src, n) >= end)
    for loop in _loops(src, stmt, scope):
        if isinstance(loop, cst.For) and reads_name(loop.target, name):
            break   # the next iteration reads a new element
        first, here = _start(src, loop.body), _start(src, stmt)
        reads += _run(occ, lambda n: first <= _start(src, n) < here)
    return reads


def _run(occ: List[Tuple[cst.Name, bool]], where) -> List[cst.Name]:
    """The reads in ``occ`` (limited to ``where``) before its first plain rebinding."""
    out = []
    for n, is_read in occ:
        if not where(n):
            continue
        if not is_read:
            break
        out.append(n)
    return out


def _in_return(src: Source, n: cst.CSTNode, scope: cst.CSTNode) -> bool:
    for a in src.ancestors(n):
        if a is scope:
            return False
        if isinstance(a, cst.Return):
            return True
    return False


def _caller_owned(src: Source, stmt: cst.CSTNode, scope: cst.CSTNode, name: str) -> str:
    """What makes ``name`` someone else's tensor: a parameter of the function, or a loop variable over
    a model's parameters, buffers or modules (changed in place, they are changed for the model); ""."""
    if isinstance(scope, cst.FunctionDef):
        p = scope.params
        params = [*p.posonly_params, *p.params, *p.kwonly_params]
        params += [s for s in (p.star_arg, p.star_kwarg) if isinstance(s, cst.Param)]
        if any(q.name.value == name for q in params):
            return f"a parameter of {scope.name.value}()"
    for loop in _loops(src, stmt, scope):
        if isinstance(loop, cst.For) and reads_name(loop.target, name) and _iterates_model(loop.iter):
            return "a loop variable over a model's parameters or modules"
    return ""


def _iterates_model(node: cst.CSTNode) -> bool:
    for n in _nodes(node):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _MODEL_ITERS:
            return True
        if isinstance(n, cst.SimpleString) and n.value.strip("'\"") == "params":  # group["params"]
            return True
    return False


def _view_base(src: Source, stmt: cst.CSTNode, scope: cst.CSTNode, name: str) -> Optional[cst.BaseExpression]:
    """The tensor ``name`` views, from its last binding in this scope before ``stmt``."""
    here = _start(src, stmt)
    last = None
    for n, is_read in _occurrences(src, scope, name, stmt):
        if not is_read and _start(src, n) < here:
            last = n
    if last is None:
        return None
    assign = next((a for a in src.ancestors(last) if isinstance(a, (cst.Assign, cst.AnnAssign, cst.For))), None)
    if not isinstance(assign, (cst.Assign, cst.AnnAssign)) or assign.value is None:
        return None
    root, viewed = view_root(assign.value)
    if root is None or not viewed and not isinstance(assign.value, (cst.Name, cst.Attribute)):
        return None
    if isinstance(root, cst.Name) and root.value == name:
        return None
    return root


def view_root(v: cst.BaseExpression, methods: AbstractSet[str] = VIEW_METHODS,
              attrs: AbstractSet[str] = VIEW_ATTRS) -> Tuple[Optional[cst.BaseExpression], bool]:
    """(the name or attribute ``v`` is a view of, whether a view step was taken): through indexing,
    the view ``methods`` and the view ``attrs``."""
    viewed = False
    while True:
        if isinstance(v, cst.Subscript):
            v = v.value
        elif isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value in methods:
            v = v.func.value
        elif isinstance(v, cst.Attribute) and v.attr.value in attrs:
            v = v.value
        else:
            return (v if isinstance(v, (cst.Name, cst.Attribute)) else None), viewed
        viewed = True
