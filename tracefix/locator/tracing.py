"""Shared value tracing over the user's source (``ast``), used by every family's locate module.

Where a value comes from (assignments, constructor calls, ``self`` attributes, module instances,
project functions and methods it may run, the caller's argument for a parameter) and how it is used
afterwards (as a number: ``.item()``, ``float()``, formatting, logging).  Reads source, never writes.
"""
from __future__ import annotations

import ast
import re
from typing import List, Optional, Tuple

from tracefix.pysource import FUNC_TYPES, SourceFile, const_str, dotted, keyword, last_name, own_nodes

MAX_DEPTH = 6
ACCEL_NAMES = {"accelerator", "fabric", "engine", "model_engine", "deepspeed", "ds_engine", "strategy",
               "precision", "trainer", "booster"}
LOG_CALLS = {"print", "info", "debug", "warning", "warn", "error", "log", "write", "format",
             "set_postfix", "set_description", "add_scalar", "add_scalars", "log_metrics",
             "log_dict", "isnan", "isinf", "isfinite", "float", "int", "round", "str", "repr"}
SCALAR_ATTRS = {"item", "tolist", "__float__"}
PASS_ATTRS = {"detach", "cpu", "data", "clone", "float", "double", "numpy"}


class Tracer:
    """Value tracing bound to one locate run (``ctx``: the project, the mapped frames)."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx

    @property
    def project(self):
        return self.ctx.project          # built on first use (see LocateContext.index)

    def assignments(self, sf: SourceFile, scope: ast.AST, name: str) -> List[ast.stmt]:
        key = ("assign", id(scope))
        table = sf.memo.get(key)
        if table is None:
            table = {}
            for node in sf.own(scope):
                names: List[str] = []
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            names.append(t.id)
                        elif isinstance(t, (ast.Tuple, ast.List)):
                            names.extend(e.id for e in t.elts if isinstance(e, ast.Name))
                elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
                    names.append(node.target.id)
                elif isinstance(node, ast.NamedExpr):
                    names.append(node.target.id)
                for n in names:
                    table.setdefault(n, []).append(node)
            for lst in table.values():
                lst.sort(key=lambda n: (n.lineno, n.col_offset))
            sf.memo[key] = table
        return table.get(name, [])  # type: ignore[union-attr]

    def last_assign(self, sf: SourceFile, scope: ast.AST, name: str, line: int) -> Optional[ast.AST]:
        before = [a for a in self.assignments(sf, scope, name) if a.lineno < line]
        if before:
            return before[-1]
        if not isinstance(scope, ast.Module) and sf.tree is not None:
            mod = [a for a in self.assignments(sf, sf.tree, name)]
            if mod and not is_param(scope, name):
                return mod[-1]
        return None

    def ctor_value(self, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int,
                    depth: int = 0) -> Optional[Tuple[SourceFile, ast.AST]]:
        """The expression an object (a name, self.attr, self.a.b) was built from."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(expr, ast.Name):
            a = self.last_assign(sf, scope, expr.id, line)
            if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None:
                if isinstance(a, ast.Assign) and not any(isinstance(t, ast.Name) for t in a.targets):
                    return None
                value = a.value
                if isinstance(value, ast.Name) and value.id != expr.id:
                    return self.ctor_value(sf, scope, value, a.lineno, depth + 1) or (sf, value)
                return sf, value
            return None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = sf.class_of(scope) if not isinstance(scope, ast.ClassDef) else scope
            if cls is None:
                return None
            table = sf.memo.get(("self-attrs", id(cls)))
            if table is None:
                table = {}
                for node in ast.walk(cls):
                    targets: List[ast.AST] = []
                    if isinstance(node, ast.Assign):
                        targets = list(node.targets)
                    elif isinstance(node, ast.AnnAssign) and node.value is not None:
                        targets = [node.target]
                    for t in targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            fn = sf.scope_of(node)
                            if t.attr not in table or getattr(fn, "name", "") == "__init__":
                                table[t.attr] = node.value
                sf.memo[("self-attrs", id(cls))] = table
            value = table.get(expr.attr)  # type: ignore[union-attr]
            return (sf, value) if value is not None else None
        if isinstance(expr, ast.Attribute):
            # obj.attr where obj is a local-class instance: look in that class
            inner = self.ctor_value(sf, scope, expr.value, line, depth + 1)
            if inner is not None:
                cls = self.class_of_value(*inner)
                if cls is not None:
                    csf, cdef = cls
                    init = method(cdef, "__init__") or cdef
                    fake = ast.Attribute(value=ast.Name(id="self", ctx=ast.Load()), attr=expr.attr, ctx=ast.Load())
                    return self.ctor_value(csf, init, fake, 10 ** 9, depth + 1)
        return None

    def class_of_value(self, sf: SourceFile, value: ast.AST) -> Optional[Tuple[SourceFile, ast.ClassDef]]:
        """The project class whose constructor call value is (through .to()/.cuda() chains)."""
        value = unwrap_chain(value)
        if not isinstance(value, ast.Call):
            return None
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr.startswith("from_"):
            # Model.from_config(config) / Model.from_pretrained(path): the alternative
            # constructors that build an instance of the class itself
            cls = self.resolve_class(sf, func.value)
            if cls is not None:
                return cls
        return self.resolve_class(sf, func)

    def resolve_class(self, sf: SourceFile, func: ast.AST) -> Optional[Tuple[SourceFile, ast.ClassDef]]:
        found = self.resolve_def(sf, func)
        if found is not None and isinstance(found[1], ast.ClassDef):
            return found  # type: ignore[return-value]
        return None

    def resolve_def(self, sf: SourceFile, func: ast.AST) -> Optional[Tuple[SourceFile, ast.AST]]:
        """A module-level project def/class referred to by Name or module.attr."""
        if isinstance(func, ast.Name):
            return self.project.lookup(sf.rel, func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            imp = sf.imports().get(func.value.id)
            if imp is not None:
                module, attr, level = imp
                mod = module if attr is None else (f"{module}.{attr}" if module else attr)
                target = self.project.resolve_module(sf.rel, mod, level)
                if target is not None:
                    return self.project.lookup(target, func.attr)
        return None

    def module_call(self, sf: SourceFile, scope: ast.AST, func: ast.AST, line: int
                     ) -> List[Tuple[SourceFile, ast.AST]]:
        """``func`` holds an instance of a project class: calling it runs its forward/__call__."""
        ctor = self.ctor_value(sf, scope, func, line)
        if ctor is not None:
            cls = self.class_of_value(*ctor)
            if cls is not None:
                m = method(cls[1], "forward") or method(cls[1], "__call__")
                if m is not None:
                    return [(cls[0], m)]
        return []

    def callees(self, sf: SourceFile, scope: ast.AST, call: ast.Call, line: int, wide: bool = False
                 ) -> List[Tuple[SourceFile, ast.AST]]:
        """Project functions a call may run (for following return values)."""
        func = call.func
        out: List[Tuple[SourceFile, ast.AST]] = []
        if isinstance(func, ast.Name):
            nested = [n for n in sf.own(scope) if isinstance(n, FUNC_TYPES) and n.name == func.id]
            if nested:
                return [(sf, nested[-1])]
            d = self.resolve_def(sf, func)
            if d is not None:
                if isinstance(d[1], FUNC_TYPES):
                    return [d]
                return []  # a class: construction
            return self.module_call(sf, scope, func, line)
        if not isinstance(func, ast.Attribute):
            return []
        recv = func.value
        if isinstance(recv, ast.Name) and recv.id == "self":
            cls = sf.class_of(scope)
            if cls is not None:
                m = method(cls, func.attr)
                if m is not None:
                    return [(sf, m)]
            return self.module_call(sf, scope, func, line)
        d = self.resolve_def(sf, func)
        if d is not None:
            return [d] if isinstance(d[1], FUNC_TYPES) else []
        ctor = self.ctor_value(sf, scope, recv, line)
        if ctor is not None:
            cls = self.class_of_value(*ctor)
            if cls is not None:
                m = method(cls[1], func.attr)
                return [(cls[0], m)] if m is not None else []
        if func.attr in ("forward", "__call__") or func.attr.startswith("__"):
            return []
        # unknown receiver (a parameter): any project method of that name in the closure
        files = self.project.closure(sf.rel)
        if wide:
            files = files + [r for r in self.project.py_files(("def " + func.attr,)) if r not in files]
        for rel in files:
            other = self.project.source(rel)
            if other is not None:
                out.extend((other, fn) for fn in methods_named(other, func.attr))
            if len(out) >= 4 or (out and not wide):
                break
        return out[:4]

    def is_scalar_use(self, sf: SourceFile, node: ast.AST) -> bool:
        cur = node
        while True:
            p = sf.parent(cur)
            if isinstance(p, ast.Attribute) and p.attr in PASS_ATTRS:
                gp = sf.parent(p)
                cur = gp if isinstance(gp, ast.Call) and gp.func is p else p
                continue
            break
        p = sf.parent(cur)
        if isinstance(p, ast.Attribute) and p.attr in SCALAR_ATTRS:
            return True
        if isinstance(p, ast.Call) and cur is not p.func and last_name(p.func) in LOG_CALLS:
            return True
        if isinstance(p, ast.keyword):
            gp = sf.parent(p)
            if isinstance(gp, ast.Call) and last_name(gp.func) in LOG_CALLS:
                return True
        if isinstance(p, ast.Compare) and all(isinstance(o, (ast.Lt, ast.Gt, ast.LtE, ast.GtE)) for o in p.ops):
            return True
        if isinstance(p, ast.BinOp) and isinstance(p.op, ast.Mod) and const_str(p.left) is not None:
            return True
        if isinstance(p, ast.Return) and is_step_closure(sf, sf.scope_of(p)):
            return True
        for anc in sf.ancestors(cur):
            if isinstance(anc, (ast.JoinedStr, ast.FormattedValue)):
                return True
            if isinstance(anc, (ast.stmt, ast.Attribute, ast.Subscript)):
                break   # f"{loss.sum().item()}" formats a reduction of the vector, not the loss itself
        return False

    def scalar_used(self, sf: SourceFile, scope: ast.AST, name: str) -> bool:
        return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                   and self.is_scalar_use(sf, n) for n in sf.own(scope))

    def only_consumed(self, sf: SourceFile, scope: ast.AST, name: str, assign: ast.AST,
                       consumer: ast.AST) -> bool:
        """True when the value bound by assign is used only by consumer (and as a scalar)."""
        later = [a.lineno for a in self.assignments(sf, scope, name) if a.lineno > assign.lineno]
        stop = min(later) if later else 10 ** 9
        for n in sf.own(scope):
            if not (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)):
                continue
            if n is consumer or not (assign.lineno <= n.lineno <= stop):
                continue
            if n.lineno == assign.lineno and contains(assign, n) and not isinstance(assign, ast.AugAssign):
                continue
            if self.needs_scalar(sf, n) or self.is_detached_return(sf, n):
                continue
            return False
        return True

    # -- who needs a scalar: the uses a reduction must cover (a loss read as a number) -------------
    def needs_scalar(self, sf: SourceFile, node: ast.AST) -> bool:
        """Does this read of a value (a name, a call's result) need one number: ``.item()``,
        ``float()``, formatting, logging, a comparison, or ``+=`` into a number (``total += v``)?"""
        if self.is_scalar_use(sf, node):
            return True
        cur = _through_passes(sf, node)
        p = sf.parent(cur)
        if isinstance(p, ast.AugAssign) and p.value is cur and isinstance(p.target, ast.Name):
            return self.is_number(sf, sf.scope_of(p), p.target, p.lineno)
        return False

    def number_read(self, sf: SourceFile, scope: ast.AST, name: str, skip: ast.AST,
                    returned: bool = True) -> Optional[ast.AST]:
        """The first load of ``name`` in scope (outside ``skip``) that needs a scalar, or (with
        ``returned``) hands the value to the callers (``return loss``); None when there is none."""
        for n in sorted((n for n in sf.own(scope) if isinstance(n, ast.Name) and n.id == name
                         and isinstance(n.ctx, ast.Load) and not contains(skip, n)),
                        key=lambda n: (n.lineno, n.col_offset)):
            base = _through_passes(sf, n)
            mean = _mean_of(sf, base)
            if self.needs_scalar(sf, n) or mean is not None and self.needs_scalar(sf, mean) or \
                    returned and isinstance(sf.parent(base), (ast.Return, ast.Yield)):
                return n
        return None

    def key_number_read(self, sf: SourceFile, scope: ast.AST, name: str, key: str,
                        skip: ast.AST) -> Optional[ast.AST]:
        """The first read of ``name[key]`` that needs a scalar, directly or through a loop or a
        comprehension over ``name.items()`` / ``name.values()`` (``{k: v.item() for k, v in ...}``)."""
        for n in sorted((n for n in sf.own(scope) if isinstance(n, ast.Name) and n.id == name
                         and isinstance(n.ctx, ast.Load) and not contains(skip, n)),
                        key=lambda n: (n.lineno, n.col_offset)):
            p = sf.parent(n)
            if isinstance(p, ast.Subscript) and const_str(p.slice) == key:
                if self.needs_scalar(sf, p):
                    return p
                continue
            call = sf.parent(p) if isinstance(p, ast.Attribute) and p.attr in ("items", "values") else None
            loop = sf.parent(call) if isinstance(call, ast.Call) and call.func is p else None
            if not isinstance(loop, (ast.comprehension, ast.For)) or loop.iter is not call:
                continue
            target = loop.target
            if p.attr == "items":
                target = target.elts[1] if isinstance(target, ast.Tuple) and len(target.elts) == 2 else None
            if not isinstance(target, ast.Name):
                continue
            body = sf.parent(loop) if isinstance(loop, ast.comprehension) else loop
            for m in ast.walk(body):
                if isinstance(m, ast.Name) and m.id == target.id and isinstance(m.ctx, ast.Load) and \
                        self.needs_scalar(sf, m):
                    return m
        return None

    def result_need(self, sf: SourceFile, call: ast.Call, index: Optional[int] = None) -> Optional[ast.AST]:
        """Where the result of ``call`` is needed as a number: the call itself
        (``criterion(out, y).item()``), or a later read of the name it is assigned to; with
        ``index``, of the name unpacked from that position (``logits, loss = model(x, y)``)."""
        if index is None and self.needs_scalar(sf, call):
            return call
        p = sf.parent(_through_passes(sf, call))
        if not (isinstance(p, ast.Assign) and len(p.targets) == 1):
            return None
        target = p.targets[0]
        if index is not None:
            elts = getattr(target, "elts", None)
            if not isinstance(target, (ast.Tuple, ast.List)) or len(elts) <= index or \
                    any(isinstance(e, ast.Starred) for e in elts):
                return None
            target = elts[index]
        if isinstance(target, ast.Name):
            return self.number_read(sf, sf.scope_of(p), target.id, p, returned=False)
        return None

    def object_calls(self, sf: SourceFile, scope: ast.AST, target: ast.AST, depth: int = 0
                     ) -> List[Tuple[SourceFile, ast.Call]]:
        """Calls of the object bound to ``target`` (a name of scope, or ``self.attr``), also where
        it is passed to a project function (``evaluate(model, criterion, loader)``)."""
        out: List[Tuple[SourceFile, ast.Call]] = []
        if depth > 3:
            return out
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            cls = sf.class_of(scope) if not isinstance(scope, ast.ClassDef) else scope
            for n in ast.walk(cls) if cls is not None else ():
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == target.attr \
                        and isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
                    out.append((sf, n))
            return out
        if not isinstance(target, ast.Name):
            return out
        nodes = ast.walk(sf.tree) if isinstance(scope, ast.Module) else sf.own(scope)
        for n in nodes:
            if not (isinstance(n, ast.Name) and n.id == target.id and isinstance(n.ctx, ast.Load)):
                continue
            p = sf.parent(n)
            if isinstance(p, ast.keyword):
                call, param = sf.parent(p), p.arg
            elif isinstance(p, ast.Call) and n in p.args:
                call, param = p, p.args.index(n)
            elif isinstance(p, ast.Call) and p.func is n:
                out.append((sf, p))
                continue
            else:
                continue
            if not isinstance(call, ast.Call) or param is None:
                continue
            for csf, fn in self.callees(sf, sf.scope_of(call), call, call.lineno):
                pname = param if isinstance(param, str) else _positional_param(fn, call, param)
                if pname and is_param(fn, pname):
                    out.extend(self.object_calls(csf, fn, ast.Name(id=pname, ctx=ast.Load()), depth + 1))
        return out

    def is_detached_return(self, sf: SourceFile, node: ast.AST) -> bool:
        """`return loss.detach()`: handed back for logging, not used for another computation."""
        cur, detached = node, False
        while True:
            p = sf.parent(cur)
            if isinstance(p, ast.Attribute) and p.attr in PASS_ATTRS:
                detached = detached or p.attr in ("detach", "data")
                gp = sf.parent(p)
                cur = gp if isinstance(gp, ast.Call) and gp.func is p else p
                continue
            return detached and isinstance(p, ast.Return)

    def caller_argument(self, fn: ast.AST, param: str, frame_i: int):
        """(caller file, call, argument node, line) that fed ``param`` of the crash function, or None."""
        if frame_i + 1 >= len(self.ctx.mapped):
            return None
        outer = self.ctx.mapped[frame_i + 1]
        osf = self.project.source(outer.rel_path)
        stmt = osf.stmt_at(outer.line) if osf is not None else None
        if stmt is None:
            return None
        for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
            if last_name(call.func) != fn.name:  # type: ignore[attr-defined]
                continue
            arg = argument_for(fn, call, param)
            if arg is not None:
                return osf, call, arg, outer.line
        return None

    def is_number(self, sf: SourceFile, scope: ast.AST, node: ast.AST, line: int) -> bool:
        """A plain Python number: a literal, or a name last assigned one."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return self.is_number(sf, scope, node.operand, line)
        if isinstance(node, ast.Name):
            a = self.last_assign(sf, scope, node.id, line)
            if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None:
                v = a.value
                if isinstance(v, ast.Constant):
                    return isinstance(v.value, (int, float)) and not isinstance(v.value, bool)
                return isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in ("int", "float", "len")
        return False

    def full_name(self, sf: SourceFile, func: ast.AST) -> str:
        """'F.cross_entropy' -> 'torch.nn.functional.cross_entropy' through the file's imports."""
        d = dotted(func)
        if not d:
            return ""
        head, _, rest = d.partition(".")
        imp = sf.imports().get(head)
        if imp is not None and not imp[2]:
            module, attr, _level = imp
            base = f"{module}.{attr}" if attr and module else (attr or module)
            d = f"{base}.{rest}" if rest else base
        elif head == "F":
            d = f"torch.nn.functional.{rest}" if rest else d
        elif head == "nn":
            d = f"torch.nn.{rest}" if rest else d
        return d


# ---------------------------------------------------------------------------------------------
# small pure helpers
def value_col(sf: SourceFile, assign: ast.AST) -> int:
    """Byte column where the assigned value starts as written (an opening parenthesis included)."""
    value = assign.value  # type: ignore[attr-defined]
    col = value.col_offset
    raw = sf.line_text(value.lineno).encode("utf-8")
    i = col
    while i > 0 and raw[i - 1:i] in (b" ", b"\t", b"("):
        i -= 1
    if i > 0 and raw[i - 1:i] == b"=":
        j = i
        while raw[j:j + 1] == b" ":
            j += 1
        return j
    return col


def indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def src(sf: SourceFile, node: ast.AST) -> str:
    try:
        seg = sf.segment(node)
    except Exception:
        seg = None
    if seg:
        return " ".join(seg.split())[:80]
    try:
        return ast.unparse(node)[:80]
    except Exception:
        return "the value"


def func_name(sf: SourceFile, node: ast.AST) -> str:
    """'WeightedLoss.forward()' / 'compute_loss()' for the function holding node; 'The module' at top level."""
    fn = sf.scope_of(node)
    if not isinstance(fn, FUNC_TYPES):
        return "The module"
    cls = sf.parent(fn)
    return f"{cls.name}.{fn.name}()" if isinstance(cls, ast.ClassDef) else f"{fn.name}()"


def is_step_closure(sf: SourceFile, fn: ast.AST) -> bool:
    """``fn`` is a closure handed to ``optimizer.step(closure)``: the optimizer reads what it
    returns as a number (LBFGS: ``float(closure())``), so its return is a scalar use."""
    if not isinstance(fn, FUNC_TYPES):
        return False
    outer = sf.scope_of(fn)
    for n in ast.walk(outer):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step" and \
                any(isinstance(a, ast.Name) and a.id == fn.name for a in
                    list(n.args) + [k.value for k in n.keywords if k.arg == "closure"]):
            return True
    return False


def contains(outer: ast.AST, inner: ast.AST) -> bool:
    return any(n is inner for n in ast.walk(outer))


def is_param(fn: ast.AST, name: str) -> bool:
    return isinstance(fn, FUNC_TYPES) and name in param_names(fn)


def param_names(fn: ast.AST) -> List[str]:
    a = fn.args  # type: ignore[attr-defined]
    names = [x.arg for x in getattr(a, "posonlyargs", []) + a.args + a.kwonlyargs]
    if a.vararg:
        names.append(a.vararg.arg)
    if a.kwarg:
        names.append(a.kwarg.arg)
    return names


def argument_for(fn: ast.AST, call: ast.Call, param: str) -> Optional[ast.AST]:
    for kw in call.keywords:
        if kw.arg == param:
            return kw.value
    a = fn.args  # type: ignore[attr-defined]
    positional = [x.arg for x in getattr(a, "posonlyargs", []) + a.args]
    if positional and positional[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        positional = positional[1:]
    if param in positional:
        i = positional.index(param)
        if i < len(call.args) and not isinstance(call.args[i], ast.Starred):
            return call.args[i]
    return None


def methods_named(sf: SourceFile, name: str) -> List[ast.AST]:
    table = sf.memo.get("methods")
    if table is None:
        table = {}
        for fn in sf.functions():
            if isinstance(sf.parent(fn), ast.ClassDef):
                table.setdefault(fn.name, []).append(fn)
        sf.memo["methods"] = table
    return list(table.get(name, []))  # type: ignore[union-attr]


def method(cls: ast.ClassDef, name: str) -> Optional[ast.AST]:
    found = None
    for st in cls.body:
        if isinstance(st, FUNC_TYPES) and st.name == name:
            found = st
    return found


def returns(fn: ast.AST) -> List[ast.Return]:
    return sorted((n for n in own_nodes(fn) if isinstance(n, ast.Return) and n.value is not None),
                  key=lambda n: n.lineno)


def unwrap_chain(node: ast.AST) -> ast.AST:
    """model.to(dev).cuda().train() -> model; Net().to(dev) -> Net()."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("to", "cuda", "cpu", "train", "eval", "float", "requires_grad_", "half",
                               "bfloat16", "double", "type", "xpu", "mps", "share_memory"):
        node = node.func.value
    return node


def unwrap_call(node: ast.AST) -> ast.AST:
    return node.func if isinstance(node, ast.Call) else node


def is_true(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def walk_stmt(st: ast.AST):
    """Nodes of one simple statement, not descending into lambdas/comprehension-scoped defs."""
    stack = [st]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            stack.append(child)


def bound_names(st: ast.AST) -> List[str]:
    out: List[str] = []
    targets: List[ast.AST] = []
    if isinstance(st, ast.Assign):
        targets = list(st.targets)
    elif isinstance(st, (ast.AnnAssign, ast.AugAssign)):
        targets = [st.target]
    for t in targets:
        if isinstance(t, ast.Name):
            out.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            out.extend(e.id for e in t.elts if isinstance(e, ast.Name))
    return out


def classify_backward(call: ast.Call) -> Optional[Tuple[str, ast.AST]]:
    """('backward-receiver', receiver) or ('autograd-grad', output) for a backward-like call."""
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr == "backward":
            recv = func.value
            d = dotted(recv)
            if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) and recv.func.attr == "scale" \
                    and recv.args:
                return "backward-receiver", recv.args[0]
            if d.endswith("autograd") or d == "torch":
                return ("backward-receiver", call.args[0]) if call.args else None
            if call.args and last_name(recv) in ACCEL_NAMES:
                return "backward-receiver", call.args[0]
            return "backward-receiver", recv
        if func.attr == "manual_backward" and call.args:
            return "backward-receiver", call.args[0]
        if func.attr == "grad" and dotted(func.value).endswith("autograd"):
            out = call.args[0] if call.args else (keyword(call, "outputs").value if keyword(call, "outputs") else None)
            return ("autograd-grad", out) if out is not None else None
    elif isinstance(func, ast.Name):
        if func.id == "backward" and call.args:
            return "backward-receiver", call.args[0]
        if func.id == "grad" and call.args and len(call.args) >= 2:
            return "autograd-grad", call.args[0]
    return None


# ---------------------------------------------------------------------------------------------
# Value origins (added for the dtype families): where a plain value such as a dtype is written.
# Follows names, function parameters (callers' arguments, defaults, annotations), project
# function returns, ``getattr(module, name)``, and config objects: dataclass / class field
# defaults and constructor keywords, dict literal keys, argparse defaults, SimpleNamespace
# keywords, module-level constants imported from other files.
class Origin:
    """One place a traced value is written.

    ``node``: the literal (a constant, ``torch.float16``) or the expression the trace stopped at;
    ``source``: how it was reached ("" local, "default" a parameter default, "module" a module
    constant, "dataclass"/"class" a field default, "kwarg" a constructor keyword, "dict" a dict
    literal's key, "argparse" an argparse default); ``shared``: a binding on the way (a name, a
    config field or key) is read elsewhere too, so changing the literal changes more than this use;
    ``by_name``: the value is a name looked up with ``getattr(module, <value>)``."""

    __slots__ = ("sf", "node", "source", "shared", "by_name", "where")

    def __init__(self, sf: SourceFile, node: ast.AST, source: str, shared: bool, by_name: bool,
                 where: str = "") -> None:
        self.sf, self.node, self.source, self.shared, self.by_name = sf, node, source, shared, by_name
        self.where = where or f"{sf.rel}:{getattr(node, 'lineno', 0)}"   # "config.json:6" for a data file

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Origin({self.sf.rel}:{getattr(self.node, 'lineno', 0)} {self.source} shared={self.shared})"


MAX_ORIGINS = 8
MAX_CALLER_FILES = 40
MAX_GREP_PROJECT = 400      # beyond this many files, reads are counted in the import closure only
FILE_LOADERS = {"load", "safe_load", "full_load", "unsafe_load"}
NAMESPACES = {"SimpleNamespace", "Namespace", "EasyDict", "edict", "AttrDict", "Box", "create", "DictConfig",
              "Munch", "munchify"}


class ValueTracer(Tracer):
    """:class:`Tracer` plus :meth:`origins`."""

    def origins(self, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int) -> List[Origin]:
        out: List[Origin] = []
        self._origins(sf, scope, expr, line, 0, "", False, False, out)
        return out[:MAX_ORIGINS]

    def _origins(self, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int, depth: int,
                 source: str, shared: bool, by_name: bool, out: List[Origin]) -> None:
        """Append to ``out`` the places expr's value is written (what :meth:`origins` returns)."""
        if depth > MAX_DEPTH + 2 or len(out) >= MAX_ORIGINS:
            return
        if isinstance(expr, (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.ClassDef)):
            out.append(Origin(sf, expr, source, shared, by_name))
        elif isinstance(expr, ast.IfExp):
            for branch in (expr.body, expr.orelse):
                self._origins(sf, scope, branch, line, depth + 1, source, shared, by_name, out)
        elif isinstance(expr, ast.Name):
            self._name_origins(sf, scope, expr, line, depth, source, shared, by_name, out)
        elif isinstance(expr, ast.Call):
            self._call_origins(sf, scope, expr, line, depth, source, shared, by_name, out)
        elif isinstance(expr, ast.Subscript):
            self._subscript_origins(sf, scope, expr, line, depth, source, shared, by_name, out)
        elif isinstance(expr, ast.Attribute):
            self._attribute_origins(sf, scope, expr, line, depth, source, shared, by_name, out)
        else:
            out.append(Origin(sf, expr, source, shared, by_name))

    def _name_origins(self, sf: SourceFile, scope: ast.AST, expr: ast.Name, line: int, depth: int,
                      source: str, shared: bool, by_name: bool, out: List[Origin]) -> None:
        """A name: a parameter, its last assignment, a module constant imported here, or a class."""
        nxt = depth + 1
        if is_param(scope, expr.id):
            return self._param_origins(sf, scope, expr.id, nxt, source, shared, by_name, out)
        a = self.last_assign(sf, scope, expr.id, line)
        if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None and \
                bound_names(a) == [expr.id]:
            where = sf.scope_of(a)
            reads = sum(1 for n in sf.own(where) if isinstance(n, ast.Name) and n.id == expr.id
                        and isinstance(n.ctx, ast.Load))
            src_kind = source or ("module" if isinstance(where, ast.Module) and where is not scope else "")
            return self._origins(sf, where, a.value, a.lineno, nxt, src_kind, shared or reads > 1, by_name, out)
        if a is None:
            found = self.module_value(sf.rel, expr.id)
            if found is not None:
                osf, assign = found
                reads = len(self.attr_reads(expr.id, name=True))
                return self._origins(osf, osf.tree, assign.value, assign.lineno, nxt, source or "module",
                                     shared or reads > 1, by_name, out)
            cls = self.project.lookup(sf.rel, expr.id)
            if cls is not None and isinstance(cls[1], ast.ClassDef):
                out.append(Origin(cls[0], cls[1], source, shared, by_name))
                return
        out.append(Origin(sf, expr, source, shared, by_name))

    def _call_origins(self, sf: SourceFile, scope: ast.AST, expr: ast.Call, line: int, depth: int,
                      source: str, shared: bool, by_name: bool, out: List[Origin]) -> None:
        """A call: ``getattr(m, name)`` (the name), ``d.get(key)`` (as ``d[key]``), a project
        function's returns; else the call itself."""
        nxt = depth + 1
        func = expr.func
        if isinstance(func, ast.Name) and func.id == "getattr" and len(expr.args) >= 2:
            return self._origins(sf, scope, expr.args[1], line, nxt, source, shared, True, out)
        if isinstance(func, ast.Attribute) and func.attr == "get" and expr.args:
            sub = ast.Subscript(value=func.value, slice=expr.args[0], ctx=ast.Load())
            ast.copy_location(sub, expr)
            return self._origins(sf, scope, sub, line, nxt, source, shared, by_name, out)
        d = self.resolve_def(sf, func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if d is not None and isinstance(d[1], FUNC_TYPES):
            fsf, fn = d
            for r in returns(fn)[:3]:
                self._origins(fsf, fn, r.value, r.lineno, nxt, source, shared, by_name, out)
            return
        out.append(Origin(sf, expr, source, shared, by_name))

    def _subscript_origins(self, sf: SourceFile, scope: ast.AST, expr: ast.Subscript, line: int, depth: int,
                           source: str, shared: bool, by_name: bool, out: List[Origin]) -> None:
        """``obj[key]`` with constant keys: the value under the key in each dict literal (or config
        file) obj comes from."""
        nxt = depth + 1
        keys = [o.node for o in self.origins(sf, scope, expr.slice, line)]
        keys = [k.value for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, (str, int))]
        if not keys:
            out.append(Origin(sf, expr, source, shared, by_name))
            return
        # A key computed elsewhere (DTYPES[args.dtype]) makes the dict a lookup table: the
        # choice is made where the key is, not in the table.
        kind = "dict" if isinstance(expr.slice, ast.Constant) else "lookup"
        objs: List[Origin] = []
        self._origins(sf, scope, expr.value, line, nxt, source, False, False, objs)
        for obj in objs:
            if isinstance(obj.node, ast.Call):      # json.load(open("config.json"))["precision"]
                for key in keys:
                    found = self.config_file_value(obj.sf, obj.sf.scope_of(obj.node), obj.node, str(key))
                    if found is not None:
                        const = ast.copy_location(ast.Constant(value=found[2]), expr)
                        out.append(Origin(sf, const, "file", shared, by_name, f"{found[0]}:{found[1]}"))
                continue
            if not isinstance(obj.node, ast.Dict):
                continue
            for key in keys:
                for k, v in zip(obj.node.keys, obj.node.values):
                    if isinstance(k, ast.Constant) and k.value == key:
                        reads = len(self.key_reads(key)) if isinstance(key, str) else 1
                        self._origins(obj.sf, obj.sf.scope_of(v), v, v.lineno, nxt, kind,
                                      shared or reads > 1, by_name, out)

    def _attribute_origins(self, sf: SourceFile, scope: ast.AST, expr: ast.Attribute, line: int, depth: int,
                           source: str, shared: bool, by_name: bool, out: List[Origin]) -> None:
        """``module.NAME`` (a constant of an imported module), ``self.x`` (what the constructor
        assigns), ``obj.field`` (the field of each config object obj comes from)."""
        nxt = depth + 1
        if dotted(expr).split(".")[0] in ("torch", "np", "numpy", "jnp"):
            out.append(Origin(sf, expr, source, shared, by_name))
            return
        if isinstance(expr.value, ast.Name) and not is_param(scope, expr.value.id) and \
                self.last_assign(sf, scope, expr.value.id, line) is None:
            imp = sf.imports().get(expr.value.id)
            if imp is not None and imp[1] is None:        # import config; config.DTYPE
                target = self.project.resolve_module(sf.rel, imp[0], imp[2])
                if target is not None:
                    found = self.module_value(target, expr.attr)
                    if found is not None:
                        osf, assign = found
                        reads = len(self.attr_reads(expr.attr))
                        return self._origins(osf, osf.tree, assign.value, assign.lineno, nxt, "module",
                                             shared or reads > 1, by_name, out)
        if isinstance(expr.value, ast.Name) and expr.value.id == "self":
            ctor = self.ctor_value(sf, scope, expr, line)
            if ctor is not None:
                csf, value = ctor
                return self._origins(csf, csf.scope_of(value), value, value.lineno, nxt, source or "class",
                                     shared, by_name, out)
            out.append(Origin(sf, expr, source, shared, by_name))
            return
        objs: List[Origin] = []
        self._origins(sf, scope, expr.value, line, nxt, source, False, False, objs)
        before = len(out)
        for obj in objs:
            obj.shared = shared
            self._field_origins(obj, expr.attr, nxt, by_name, out)
        if len(out) == before and not objs:
            out.append(Origin(sf, expr, source, shared, by_name))

    def _param_origins(self, sf: SourceFile, fn: ast.AST, name: str, depth: int, source: str,
                       shared: bool, by_name: bool, out: List[Origin]) -> None:
        """A parameter's value: each caller's argument (or the default), else the annotation."""
        callers = self.call_sites(sf, fn)
        default = param_default(fn, name)
        reads = sum(1 for n in sf.own(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load))
        shared = shared or reads > 1
        used_default = False
        for csf, call in callers:
            arg = argument_for(fn, call, name)
            if arg is not None:
                self._origins(csf, csf.scope_of(call), arg, call.lineno, depth, source, shared, by_name, out)
            else:
                used_default = True
        if default is not None and (used_default or not callers):
            self._origins(sf, sf.scope_of(fn), default, fn.lineno, depth, source or "default", shared, by_name, out)
        elif not callers:
            ann = param_annotation(fn, name)
            if ann is not None:
                cls = self.resolve_class(sf, ann)
                if cls is not None:
                    out.append(Origin(cls[0], cls[1], source, shared, by_name))

    def _field_origins(self, obj: Origin, attr: str, depth: int, by_name: bool, out: List[Origin]) -> None:
        """``obj.attr`` where obj is a constructor call, a class, ``parse_args()`` or a namespace."""
        node, sf = obj.node, obj.sf
        shared = obj.shared or len(self.attr_reads(attr)) > 1
        if isinstance(node, ast.Call):
            fname = last_name(node.func)
            if fname == "parse_args":
                for add in self.argparse_options(sf, attr):
                    d = keyword(add, "default")
                    conv = keyword(add, "type")
                    # a string default goes through type= (type=lambda s: getattr(torch, s))
                    named = by_name or (conv is not None and last_name(conv.value) not in ("str", "int", "float"))
                    if d is not None:
                        self._origins(sf, sf.scope_of(add), d.value, add.lineno, depth, "argparse", shared,
                                      named, out)
                return
            kw = keyword(node, attr)
            if kw is not None:
                return self._origins(sf, sf.scope_of(node), kw.value, node.lineno, depth, "kwarg", shared,
                                     by_name, out)
            # SimpleNamespace(**CONFIG), EasyDict(CONFIG), OmegaConf.create(CONFIG): attribute = key
            if fname in NAMESPACES:
                spread = [k.value for k in node.keywords if k.arg is None] + node.args[:1]
                for d in spread:
                    sub = ast.copy_location(ast.Subscript(value=d, slice=ast.Constant(value=attr), ctx=ast.Load()), node)
                    self._origins(sf, sf.scope_of(node), sub, node.lineno, depth, "", shared, by_name, out)
                return
            cls = self.class_of_value(sf, node)          # Config(...) or Config.from_args(args)
            if cls is None:
                return
            csf, cdef = cls
            init = method(cdef, "__init__")
            if init is not None:
                for st in ast.walk(init):
                    if isinstance(st, ast.Assign) and any(
                            isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                            and t.attr == attr for t in st.targets):
                        v = st.value
                        if isinstance(v, ast.Name) and is_param(init, v.id):
                            arg = argument_for(init, ast.Call(func=ast.Attribute(value=node.func, attr="__init__"),
                                                              args=node.args, keywords=node.keywords), v.id)
                            if arg is not None:
                                return self._origins(sf, sf.scope_of(node), arg, node.lineno, depth, "kwarg",
                                                     shared, by_name, out)
                            v = param_default(init, v.id) or v
                        return self._origins(csf, init, v, st.lineno, depth, "class", shared, by_name, out)
            node, sf = cdef, csf
        if isinstance(node, ast.ClassDef):
            deco = {last_name(unwrap_call(d)) for d in node.decorator_list}
            for st in node.body:
                target = st.target if isinstance(st, ast.AnnAssign) else (
                    st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else None)
                if isinstance(target, ast.Name) and target.id == attr and st.value is not None:
                    value = st.value
                    if isinstance(value, ast.Call) and last_name(value.func) == "field":
                        dflt = keyword(value, "default")
                        if dflt is None:
                            return
                        value = dflt.value
                    kind = "dataclass" if "dataclass" in deco else "class"
                    return self._origins(sf, node, value, st.lineno, depth, kind, shared, by_name, out)

    # -- lookups used by the value-origin tracing -------------------------------------------------
    def module_value(self, rel: str, name: str, depth: int = 0) -> Optional[Tuple[SourceFile, ast.Assign]]:
        """The module-level ``name = ...`` of rel, following ``from x import name`` in the project."""
        sf = self.project.source(rel)
        if sf is None or depth > 4:
            return None
        found = None
        for st in sf.tree.body:
            if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None and bound_names(st) == [name]:
                found = st
        if found is not None:
            return sf, found
        imp = sf.imports().get(name)
        if imp is None or imp[1] is None:
            return None
        target = self.project.resolve_module(rel, imp[0], imp[2])
        if target is None or target == rel:
            return None
        return self.module_value(target, imp[1], depth + 1)

    def _reading_files(self, needle: str) -> List[str]:
        """The crash's import closure, plus (in a small project) the project's files holding needle."""
        files = list(self.ctx.crash_closure())
        if len(self.project.index.py_files()) <= MAX_GREP_PROJECT:
            files += [f for f in self.ctx.project_files((needle,)) if f not in files]
        return files[:MAX_CALLER_FILES]

    def attr_reads(self, attr: str, name: bool = False) -> List[ast.AST]:
        """Loads of ``.attr`` (or of the bare name, ``name=True``) in the project's files."""
        key = ("attr-reads", attr, name)
        memo = self.__dict__.setdefault("_value_memo", {})
        if key not in memo:
            hits: List[ast.AST] = []
            for rel in self._reading_files(attr):
                osf = self.project.source(rel)
                if osf is None or attr not in osf.text:
                    continue
                for n in ast.walk(osf.tree):
                    if name and isinstance(n, ast.Name) and n.id == attr and isinstance(n.ctx, ast.Load):
                        hits.append(n)
                    elif not name and isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Load):
                        hits.append(n)
            memo[key] = hits
        return memo[key]

    def key_reads(self, key: str) -> List[ast.AST]:
        """Reads of a string key (``x["key"]``, ``x.get("key")``) in the project's files."""
        mkey = ("key-reads", key)
        memo = self.__dict__.setdefault("_value_memo", {})
        if mkey not in memo:
            hits: List[ast.AST] = []
            for rel in self._reading_files(key):
                osf = self.project.source(rel)
                if osf is None or key not in osf.text:
                    continue
                for n in ast.walk(osf.tree):
                    if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and \
                            isinstance(n.slice, ast.Constant) and n.slice.value == key:
                        hits.append(n)
                    elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" \
                            and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value == key:
                        hits.append(n)
            memo[mkey] = hits
        return memo[mkey]

    def call_sites(self, sf: SourceFile, fn: ast.AST) -> List[Tuple[SourceFile, ast.Call]]:
        """Calls of the project function fn (by name) in the files that can reach it."""
        name = getattr(fn, "name", "")
        if not name:
            return []
        out: List[Tuple[SourceFile, ast.Call]] = []
        for rel in self._reading_files(name):
            osf = self.project.source(rel)
            if osf is None or name not in osf.text:
                continue
            for n in ast.walk(osf.tree):
                if isinstance(n, ast.Call) and last_name(n.func) == name:
                    out.append((osf, n))
            if len(out) >= MAX_ORIGINS:
                break
        return out[:MAX_ORIGINS]

    # -- config files read with json / yaml / toml loaders (dict keys whose value is in a data file)
    def config_file_value(self, sf: SourceFile, scope: ast.AST, call: ast.Call, key: str
                          ) -> Optional[Tuple[str, int, str]]:
        """(file, line, value) of ``key`` in the data file that ``json.load(open(P))``,
        ``yaml.safe_load(...)`` or ``tomllib.load(...)`` reads; None when it cannot be told."""
        if last_name(call.func) not in FILE_LOADERS or not call.args:
            return None
        arg = call.args[0]
        path_expr: Optional[ast.AST] = None
        if isinstance(arg, ast.Call) and last_name(arg.func) == "open" and arg.args:
            path_expr = arg.args[0]
        elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and \
                arg.func.attr in ("read_text", "read_bytes", "open"):
            inner = arg.func.value
            if isinstance(inner, ast.Call) and last_name(inner.func) == "Path" and inner.args:
                path_expr = inner.args[0]
        elif isinstance(arg, ast.Name):
            for n in ast.walk(scope):
                if isinstance(n, (ast.With, ast.AsyncWith)):
                    for item in n.items:
                        v, c = item.optional_vars, item.context_expr
                        if isinstance(v, ast.Name) and v.id == arg.id and isinstance(c, ast.Call) and \
                                last_name(c.func) == "open" and c.args:
                            path_expr = c.args[0]
        if path_expr is None:
            return None
        names = [o.node.value for o in self.origins(sf, scope, path_expr, call.lineno)
                 if isinstance(o.node, ast.Constant) and isinstance(o.node.value, str)]
        if len(names) != 1:
            return None
        here = sf.rel.rsplit("/", 1)[0] + "/" if "/" in sf.rel else ""
        for rel in (here + names[0].lstrip("./"), names[0].lstrip("./")):
            path = self.ctx.index.inside(self.ctx.index.abs_path(rel))
            if path is None or not path.is_file():
                continue
            try:
                text = path.read_text(encoding="utf-8", errors="replace")[:200_000]
            except OSError:
                return None
            if rel.endswith(".json"):
                rx = re.compile(r'"%s"\s*:\s*"([^"\n]*)"' % re.escape(key))
            else:                                   # yaml, toml: key: value / key = value
                rx = re.compile(r'^\s*%s\s*[:=]\s*["\']?([\w.]+)' % re.escape(key), re.M)
            found = [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in rx.finditer(text)]
            if len(found) == 1:                     # a key written twice (nested sections): cannot tell
                return rel, found[0][0], found[0][1]
            return None
        return None

    def argparse_options(self, sf: SourceFile, dest: str) -> List[ast.Call]:
        """``add_argument`` calls of sf whose destination is dest (``--param-dtype`` -> param_dtype)."""
        found = []
        for n in ast.walk(sf.tree):
            if not (isinstance(n, ast.Call) and last_name(n.func) == "add_argument"):
                continue
            kw = keyword(n, "dest")
            names = [const_str(a) or "" for a in n.args]
            if kw is not None:
                d = const_str(kw.value)
            else:
                longs = [s for s in names if s.startswith("--")]
                d = (longs[0] if longs else (names[0] if names else "")).lstrip("-").replace("-", "_")
            if d == dest:
                found.append(n)
        return found


def _mean_of(sf: SourceFile, node: ast.AST) -> Optional[ast.Call]:
    """``node.mean()`` (no arguments) where node is read so, else None: one number, the same
    whether node holds the per-sample values or already their mean (``loss.mean().item()``)."""
    p = sf.parent(node)
    call = sf.parent(p) if isinstance(p, ast.Attribute) and p.value is node and p.attr == "mean" else None
    if isinstance(call, ast.Call) and call.func is p and not call.args and not call.keywords:
        return call
    return None


def _through_passes(sf: SourceFile, node: ast.AST) -> ast.AST:
    """node climbed through ``.detach()`` / ``.cpu()`` / ``.data`` (the same value)."""
    cur = node
    while True:
        p = sf.parent(cur)
        if not (isinstance(p, ast.Attribute) and p.value is cur and p.attr in PASS_ATTRS):
            return cur
        gp = sf.parent(p)
        cur = gp if isinstance(gp, ast.Call) and gp.func is p else p


def _positional_param(fn: ast.AST, call: ast.Call, i: int) -> str:
    """The parameter of fn that the i-th positional argument of call binds ('' when none)."""
    a = fn.args  # type: ignore[attr-defined]
    names = [x.arg for x in getattr(a, "posonlyargs", []) + a.args]
    if names and names[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        names = names[1:]
    if any(isinstance(x, ast.Starred) for x in call.args[:i + 1]):
        return ""
    return names[i] if i < len(names) else ""


def param_default(fn: ast.AST, name: str) -> Optional[ast.AST]:
    a = fn.args  # type: ignore[attr-defined]
    positional = getattr(a, "posonlyargs", []) + a.args
    for arg, dflt in zip(positional[len(positional) - len(a.defaults):], a.defaults):
        if arg.arg == name:
            return dflt
    for arg, dflt in zip(a.kwonlyargs, a.kw_defaults):
        if arg.arg == name:
            return dflt
    return None


def param_annotation(fn: ast.AST, name: str) -> Optional[ast.AST]:
    a = fn.args  # type: ignore[attr-defined]
    for arg in getattr(a, "posonlyargs", []) + a.args + a.kwonlyargs:
        if arg.arg == name:
            return arg.annotation
    return None
