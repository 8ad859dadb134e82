"""Is rebinding a name what an in-place write did?

The in-place fixers replace ``N.op_(...)`` / ``N += ...`` / ``N[i] = ...`` by a statement that binds
``N`` to a new tensor (``N = N.op(...)``, ``N = N.clone()``).  That keeps the behaviour only when
the new value reaches the code that read the old one: ``N`` is read afterwards in the same scope
(or returned), and no other name shares the tensor that the in-place write used to change.
:func:`rebind_risk` says why it does not, or "" when it does.
"""
from __future__ import annotations

from typing import AbstractSet, Callable, Iterable, List, Optional, Set, Tuple

import libcst as cst

from tracefix.patcher.cstedit import Source, dotted, keyword, positional
from tracefix.vocab import VIEW_ATTRS, VIEW_METHODS

# the files to look in for a function's callers and hook registrations: (path, parsed) pairs, made
# only when asked (a fixer's own file first)
Sources = Callable[[], Iterable[Tuple[str, Source]]]

# iterating these yields the model's own parameters, buffers or modules: a rebound loop variable
# leaves them unchanged
_MODEL_ITERS = {"parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules",
                "children", "named_children"}
_LOOPS = (cst.For, cst.While)


def rebind_risk(src: Source, stmt: cst.CSTNode, name: str, sources: Optional[Sources] = None,
                returned: bool = False) -> str:
    """Why binding ``name`` to a new tensor at ``stmt`` (a small statement) loses what the in-place
    write did; "" when nothing is lost.  ``returned``: the rewrite also returns ``name`` from a hook
    whose return value replaces it.  ``sources``: where to look for the function's callers."""
    scope = src.scope_of(stmt)
    if returned:
        return view_risk(src, stmt, name)
    occ = _occurrences(src, scope, name, stmt)
    reads = _reads_after(src, stmt, scope, name, occ)
    caller = caller_read(src, scope, name, sources)
    if not reads:
        return (f"'{name}' is not read after this write, so the write would go to a copy that nothing uses "
                f"(the in-place change was meant for the caller's tensor){caller}")
    owner = _caller_owned(src, stmt, scope, name)
    if owner and not any(_in_return(src, n, scope) for n in reads):
        return (f"'{name}' is {owner} and is not returned: the in-place write also changed the caller's tensor, "
                f"which the rewrite (a new tensor bound to a local name) no longer does{caller}")
    if owner and caller:
        return f"'{name}' is {owner}: the in-place write also changed the caller's tensor{caller}"
    return view_risk(src, stmt, name)


def dropped_write_risk(src: Source, call: cst.Call, name: str, sources: Optional[Sources] = None) -> str:
    """Why leaving ``name`` unchanged at ``call`` (``name.op_()`` replaced by ``name.op()`` whose result
    is used right there) loses what the in-place write did: someone reads ``name`` afterwards, it is
    the caller's tensor, or a view of one read later; "" when nothing sees the difference."""
    stmt = src.small_statement_of(call)
    scope = src.scope_of(stmt)
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
                f"out-of-place form no longer does{caller_read(src, scope, name, sources)}")
    return view_risk(src, stmt, name)


def view_risk(src: Source, stmt: cst.CSTNode, name: str) -> str:
    """Why ``name`` shares memory with a tensor read after ``stmt`` (so the in-place write changed that
    one too); "" when it does not, as far as this scope shows."""
    scope = src.scope_of(stmt)
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


def read_after(src: Source, stmt: cst.CSTNode, name: str) -> List[cst.Name]:
    """The reads of ``name`` that see the value it has after ``stmt`` (a small statement)."""
    scope = src.scope_of(stmt)
    return _reads_after(src, stmt, scope, name, _occurrences(src, scope, name, stmt))


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
    return bool(_loops(src, stmt, src.scope_of(stmt)))


# -- hooks and callers ------------------------------------------------------------------------------
# registrations whose hook's return value (when not None) replaces its last positional argument:
# a forward hook's ``output``, a tensor hook's ``grad``
HOOKS = {"register_forward_hook": "a forward hook", "register_hook": "a tensor hook"}


def hook_of(src: Source, stmt: cst.CSTNode, name: str, sources: Optional[Sources] = None) -> str:
    """"a forward hook" / "a tensor hook" when ``stmt`` is in a function registered (in ``sources``) as
    such a hook, ``name`` is the argument its return value replaces, and the function returns no value
    (so returning the new value is what keeps the change); "" otherwise."""
    scope = src.scope_of(stmt)
    if not isinstance(scope, cst.FunctionDef) or not isinstance(scope.body, cst.IndentedBlock):
        return ""
    params = [*scope.params.posonly_params, *scope.params.params]
    if not params or params[-1].name.value != name or _returns_value(scope):
        return ""
    fn = scope.name.value
    for _path, s in (sources() if sources else [("", src)]):
        for call in s.all(cst.Call, lambda n: isinstance(n.func, cst.Attribute) and n.func.attr.value in HOOKS):
            arg = (positional(call) or [keyword(call, "hook")])[0]
            if arg is None:
                continue
            v = arg.value
            if isinstance(v, cst.Call) and dotted(v.func).rsplit(".", 1)[-1] == "partial" and positional(v):
                v = positional(v)[0].value     # functools.partial(hook, ...)
            if dotted(v).rsplit(".", 1)[-1] == fn:
                return HOOKS[call.func.attr.value]
    return ""


def _returns_value(fn: cst.FunctionDef) -> bool:
    """Does ``fn`` itself (not a nested function) return a value or yield?"""
    found = []

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            return n is fn

        def visit_Lambda(self, n: cst.Lambda) -> bool:
            return False

        def visit_ClassDef(self, n: cst.ClassDef) -> bool:
            return False

        def visit_Return(self, n: cst.Return) -> None:
            if n.value is not None:
                found.append(n)

        def visit_Yield(self, n: cst.Yield) -> None:
            found.append(n)

    fn.visit(V())
    return bool(found)


def caller_read(src: Source, scope: cst.CSTNode, name: str, sources: Optional[Sources] = None) -> str:
    """``'; train.py:12 reads 'y' after norm_(y) (line 11)...'`` when a caller of the function ``scope``
    passes a variable as its parameter ``name`` and reads that variable after the call without
    rebinding it to the result (it relied on the in-place change); "" when no caller found does."""
    if not isinstance(scope, cst.FunctionDef) or sources is None:
        return ""
    p = scope.params
    params = [*p.posonly_params, *p.params]
    names = [q.name.value for q in params]
    kwonly = {q.name.value for q in p.kwonly_params}
    if name not in names and name not in kwonly:
        return ""
    fn = scope.name.value
    method = bool(names) and names[0] in ("self", "cls")
    for path, s in sources():
        for call in s.all(cst.Call, lambda n: dotted(n.func).rsplit(".", 1)[-1] == fn):
            if method and not isinstance(call.func, cst.Attribute):
                continue
            arg = keyword(call, name)
            if arg is None and name in names and not any(a.star for a in call.args):
                at = names.index(name) - (1 if method else 0)
                pos = positional(call)
                arg = pos[at] if 0 <= at < len(pos) else None
            if arg is None or not isinstance(arg.value, cst.Name):
                continue
            var = arg.value.value
            stmt = s.small_statement_of(call)
            if stmt is None or isinstance(stmt, cst.Assign) and any(
                    isinstance(t.target, cst.Name) and t.target.value == var for t in stmt.targets):
                continue     # `y = norm_(y)`: the caller reads the returned value
            where = s.scope_of(stmt)
            inside = {id(n) for n in _nodes(call)}
            later = [n for n in _nodes(stmt) if isinstance(n, cst.Name) and n.value == var and id(n) not in inside
                     and not _is_store(s, n)]
            reads = later or _reads_after(s, stmt, where, var, _occurrences(s, where, var, stmt))
            if reads:
                at_ = f"{path}:{s.line_of(reads[0])}" if path else f"line {s.line_of(reads[0])}"
                return (f"; {at_} reads '{var}' after {dotted(call.func)}({var}) (line {s.line_of(call)}) without "
                        f"rebinding it to the result, so it would see the old value")
    return ""


# -- helpers ----------------------------------------------------------------------------------------
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
