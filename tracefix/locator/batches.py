"""Where a batch's tensor is built: a value read at the crash line followed back to the expression
that makes it (a tensor factory, a cast, ``torch.from_numpy``), across the data pipeline.

The trail goes through assignments and tuple unpacking, ``for xb, yb in loader`` (also under
``enumerate``, ``zip``, ``tqdm``, ``iter``/``next``), ``DataLoader(ds, collate_fn=...)``,
``TensorDataset(a, b)``, ``random_split``/``Subset``, a project ``Dataset``'s ``__getitem__``,
project functions' returns, ``self`` attributes, and a parameter's callers.  Which element of a
batch is meant is carried along as *picks* (a tuple position, a dict key, or ``ITEM``: one sample
of a collection).  Reads source, never writes.
"""
from __future__ import annotations

import ast
from typing import List, Optional, Tuple

from tracefix.locator.tracing import ValueTracer, argument_for, method, returns
from tracefix.pysource import SourceFile, dotted, keyword, last_name, own_nodes, param_names
from tracefix.vocab import TENSOR_FACTORIES

ITEM = "<item>"                 # one sample (or row) of a loader, a dataset, a tensor
Pick = object                   # int (tuple position) | str (dict key) | ITEM
MAX_BUILT = 8
MAX_HOPS = 24                   # a data pipeline is deep: loader <- dataset <- split <- reader <- rows
# tensor methods that keep the dtype: the builder lies further in
KEEP_DTYPE = frozenset({"to", "cuda", "cpu", "squeeze", "unsqueeze", "view", "reshape", "flatten", "contiguous",
                        "clone", "detach", "pin_memory", "permute", "transpose", "t", "expand", "repeat"})
PASS_CALLS = frozenset({"tqdm", "iter", "list", "tuple", "trange", "cycle", "islice"})
SPLITS = frozenset({"random_split", "Subset", "ConcatDataset"})


class Built:
    """One expression a traced batch tensor is built by; ``trail``: the hops that led to it."""

    __slots__ = ("sf", "node", "trail")

    def __init__(self, sf: SourceFile, node: ast.AST, trail: Tuple[str, ...]) -> None:
        self.sf, self.node, self.trail = sf, node, trail

    @property
    def key(self) -> Tuple[str, int, int]:
        return self.sf.rel, getattr(self.node, "lineno", 0), getattr(self.node, "col_offset", 0)

    @property
    def where(self) -> str:
        return f"{self.sf.rel}:{getattr(self.node, 'lineno', 0)}"

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Built({self.where} via {' <- '.join(self.trail)})"


def unique(items: List[Built]) -> List[Built]:
    """``items`` without repeats of one builder (reached by two paths), first first."""
    seen, out = set(), []
    for b in items:
        if b.key not in seen:
            seen.add(b.key)
            out.append(b)
    return out


def is_dtype_method(node: ast.AST) -> bool:
    """``x.float()``, ``x.long()``, ``x.to(torch.float32)``, ``x.type(torch.LongTensor)``: a cast."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    attr = node.func.attr
    if attr in ("float", "double", "half", "long", "int", "short", "bool", "bfloat16", "byte") and not node.args:
        return True
    if attr == "type" and node.args:
        return True
    if attr == "to":
        return keyword(node, "dtype") is not None or any(dotted(a).startswith("torch.") and "dtype" not in dotted(a)
                                                        and not dotted(a).startswith("torch.device")
                                                        for a in node.args if isinstance(a, ast.Attribute))
    return False


def makes(node: ast.AST, want: str) -> bool:
    """Does this builder surely make ``want`` (a dtype as messages name it: "Long", "Float")?"""
    names = {"Long": ("long", "int64"), "Float": ("float", "float32"), "Double": ("double", "float64"),
             "Half": ("half", "float16"), "BFloat16": ("bfloat16",)}[want]
    if is_dtype_method(node):
        f = node.func
        if f.attr in names:
            return True
        arg = keyword(node, "dtype").value if keyword(node, "dtype") else (node.args[0] if node.args else None)
        return arg is not None and dotted(arg).rpartition(".")[2] in names
    if isinstance(node, ast.Call):
        kw = keyword(node, "dtype")
        if kw is not None:
            return dotted(kw.value).rpartition(".")[2] in names
        return last_name(node.func) == f"{want}Tensor"
    return False


def span(sf: SourceFile, node: ast.AST) -> str:
    """"path:line:col:end_line:end_col" of ``node``, columns in characters."""
    def chars(line: int, col: int) -> int:
        return len(sf.line_text(line).encode("utf-8")[:col].decode("utf-8", "ignore"))

    end = node.end_lineno or node.lineno
    return (f"{sf.rel}:{node.lineno}:{chars(node.lineno, node.col_offset)}:{end}:"
            f"{chars(end, node.end_col_offset or 0)}")


class BatchTracer(ValueTracer):
    """:class:`ValueTracer` plus :meth:`built`."""

    def built(self, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int, frame: int = 0) -> List[Built]:
        """The expressions ``expr``'s tensor (read in ``scope`` at ``line``) is built by.

        ``frame``: the index of ``scope``'s frame in the mapped traceback, so a parameter is followed
        to the argument the caller on the traceback passed."""
        out: List[Built] = []
        self._seen: set = set()
        self._bound: dict = {}      # (file, def line, parameter) -> what it is bound to (a collate_fn's batch)
        self.entries: List[Tuple[SourceFile, ast.Call]] = []    # the calls into a module's forward passed
        self._follow(sf, scope, expr, line, (), 0, frame, (), out)
        return out[:MAX_BUILT]

    def _follow(self, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int, picks: Tuple[Pick, ...],
                depth: int, frame: Optional[int], trail: Tuple[str, ...], out: List[Built]) -> None:
        key = (sf.rel, getattr(expr, "lineno", 0), getattr(expr, "col_offset", 0), getattr(expr, "end_lineno", 0),
               getattr(expr, "end_col_offset", 0), picks)
        if depth > MAX_HOPS or len(out) >= MAX_BUILT or key in self._seen:
            return
        self._seen.add(key)
        trail = trail + (f"{sf.rel}:{getattr(expr, 'lineno', line)}",)
        nxt = depth + 1
        while picks and picks[0] is ITEM and isinstance(expr, ast.Call) and is_dtype_method(expr):
            picks = picks[1:]           # one row of a cast tensor: the cast builds it
        if isinstance(expr, ast.Name):
            self._name(sf, scope, expr, line, picks, nxt, frame, trail, out)
        elif isinstance(expr, ast.Subscript):
            sl = expr.slice
            if isinstance(sl, ast.Constant) and isinstance(sl.value, (int, str)) and not isinstance(sl.value, bool):
                self._follow(sf, scope, expr.value, line, (sl.value,) + picks, nxt, frame, trail, out)
            else:                       # Y[idx], X[batch]: rows of Y
                self._follow(sf, scope, expr.value, line, (ITEM,) + picks, nxt, frame, trail, out)
        elif isinstance(expr, (ast.Tuple, ast.List)) and picks and isinstance(picks[0], int):
            if -len(expr.elts) <= picks[0] < len(expr.elts):
                self._follow(sf, scope, expr.elts[picks[0]], line, picks[1:], nxt, frame, trail, out)
        elif isinstance(expr, ast.Dict) and picks and isinstance(picks[0], str):
            for k, v in zip(expr.keys, expr.values):
                if isinstance(k, ast.Constant) and k.value == picks[0]:
                    self._follow(sf, scope, v, line, picks[1:], nxt, frame, trail, out)
        elif isinstance(expr, ast.Call):
            self._call(sf, scope, expr, line, picks, nxt, frame, trail, out)
        elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            found = self.ctor_value(sf, scope, expr, line)
            if found is not None:
                csf, value = found
                self._follow(csf, csf.scope_of(value), value, value.lineno, picks, nxt, None, trail, out)
        elif not [p for p in picks if p is not ITEM] and isinstance(expr, ast.BinOp) and _operands(expr):
            # (img - 0.2) / 0.3: a Python number does not change a tensor's dtype; the tensors do
            for operand in _operands(expr):
                self._follow(sf, scope, operand, line, picks, nxt, frame, trail, out)
        elif isinstance(expr, ast.UnaryOp) and isinstance(expr.operand, ast.Constant):
            return              # -1: a Python number, not a tensor
        elif not [p for p in picks if p is not ITEM] and isinstance(expr, (ast.BinOp, ast.Compare, ast.UnaryOp)):
            out.append(Built(sf, expr, trail))

    def _name(self, sf, scope, expr: ast.Name, line, picks, depth, frame, trail, out) -> None:
        if expr.id in _params(scope):
            bound = self._bound.get((sf.rel, getattr(scope, "lineno", 0), expr.id))
            if bound is not None:
                bsf, bscope, value, bline, bframe = bound
                self._follow(bsf, bscope, value, bline, picks, depth, bframe, trail, out)
            else:
                self._param(sf, scope, expr.id, picks, depth, frame, trail, out)
            return
        a = self.last_assign(sf, scope, expr.id, line)
        for other in _other_branches(sf, scope, a, expr.id):    # if ...: y = A  else: y = B
            self._follow(sf, scope, other.value, other.lineno, picks, depth, frame, trail, out)
        loop = _loop_binding(sf, scope, expr.id, line)
        if loop is not None and (a is None or loop[1] > a.lineno):
            it, at, path = loop
            self._follow(sf, scope, it, at, (ITEM,) + path + picks, depth, frame, trail, out)
            return
        if isinstance(a, ast.Assign) and len(a.targets) == 1:
            path = _binding_path(a.targets[0], expr.id)
            if path is not None:
                where = sf.scope_of(a)
                self._follow(sf, where, a.value, a.lineno, path + picks, depth,
                             frame if where is scope else None, trail, out)
        elif isinstance(a, ast.AnnAssign) and a.value is not None:
            self._follow(sf, sf.scope_of(a), a.value, a.lineno, picks, depth, frame, trail, out)

    def _param(self, sf, fn, name: str, picks, depth, frame, trail, out) -> None:
        """A parameter: the argument the caller on the traceback passed, else every caller's."""
        if frame is not None and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found = self.caller_argument(fn, name, frame)
            if found is None and fn.name in ("forward", "__call__"):
                found = self._module_caller(fn, name, frame)
            if found is not None:
                csf, call, arg, cline = found
                if fn.name in ("forward", "__call__"):
                    self.entries.append((csf, call))
                self._follow(csf, csf.scope_of(call), arg, cline, picks, depth, frame + 1, trail, out)
                return
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return
        for csf, call in self.call_sites(sf, fn)[:4]:
            arg = argument_for(fn, call, name)
            if arg is not None:
                self._follow(csf, csf.scope_of(call), arg, call.lineno, picks, depth, None, trail, out)

    def _module_caller(self, fn: ast.AST, name: str, frame: int):
        """``model(x)`` on the traceback's next frame ran ``fn`` (a forward): (file, call, the
        argument for ``name``, line)."""
        if frame + 1 >= len(self.ctx.mapped):
            return None
        outer = self.ctx.mapped[frame + 1]
        osf = self.project.source(outer.rel_path)
        stmt = osf.stmt_at(outer.line) if osf is not None and osf.tree is not None else None
        if stmt is None:
            return None
        positional = [p for p in param_names(fn) if p not in ("self", "cls")]
        calls = [c for c in ast.walk(stmt) if isinstance(c, ast.Call) and c.args and _callable_module(c.func)]
        mine = [c for c in calls if any(d is fn for _s, d in self.module_call(osf, osf.scope_of(stmt), c.func, outer.line))]
        for call in mine or calls[:1]:
            arg = next((k.value for k in call.keywords if k.arg == name), None)
            if arg is None and name in positional and positional.index(name) < len(call.args):
                arg = call.args[positional.index(name)]
            if arg is not None and not isinstance(arg, ast.Starred):
                return osf, call, arg, outer.line
        return None

    def _call(self, sf, scope, call: ast.Call, line, picks, depth, frame, trail, out) -> None:
        func = call.func
        name = last_name(func)
        first = call.args[0] if call.args else None
        if isinstance(func, ast.Attribute) and name in KEEP_DTYPE and not is_dtype_method(call):
            self._follow(sf, scope, func.value, line, picks, depth, frame, trail, out)
            return
        if not picks or all(p is ITEM for p in picks):
            if is_dtype_method(call) or _is_factory(func):
                out.append(Built(sf, call, trail))
                return
        lead = picks[0] if picks else None
        if name == "next" and first is not None:
            self._follow(sf, scope, first, line, (ITEM,) + picks, depth, frame, trail, out)
        elif name in PASS_CALLS and first is not None:
            self._follow(sf, scope, first, line, picks, depth, frame, trail, out)
        elif name == "enumerate" and lead is ITEM and len(picks) > 1 and picks[1] == 1 and first is not None:
            self._follow(sf, scope, first, line, (ITEM,) + picks[2:], depth, frame, trail, out)
        elif name == "zip" and len(call.args) == 1 and isinstance(call.args[0], ast.Starred) and \
                isinstance(lead, int) and len(picks) > 1 and picks[1] is ITEM:
            # imgs, targets = zip(*batch): imgs holds element 0 of each item of batch
            self._follow(sf, scope, call.args[0].value, line, (ITEM, lead) + picks[2:], depth, frame, trail, out)
        elif name == "zip" and lead is ITEM and len(picks) > 1 and isinstance(picks[1], int) \
                and picks[1] < len(call.args):
            self._follow(sf, scope, call.args[picks[1]], line, (ITEM,) + picks[2:], depth, frame, trail, out)
        elif name == "DataLoader" and lead is ITEM:
            self._loader(sf, scope, call, line, picks, depth, frame, trail, out)
        elif name == "TensorDataset" and lead is ITEM and len(picks) > 1 and isinstance(picks[1], int) \
                and picks[1] < len(call.args):
            self._follow(sf, scope, call.args[picks[1]], line, (ITEM,) + picks[2:], depth, frame, trail, out)
        elif name in SPLITS and first is not None:
            rest = picks[1:] if picks and isinstance(picks[0], int) else picks   # a, b = random_split(ds, ...)
            self._follow(sf, scope, first, line, rest, depth, frame, trail, out)
        elif name in ("stack", "cat", "concatenate", "vstack", "hstack") and first is not None \
                and dotted(func).split(".")[0] in ("torch", "np", "numpy") and all(p is ITEM for p in picks):
            self._follow(sf, scope, first, line, (ITEM,) + picks, depth, frame, trail, out)
        elif not self._project_call(sf, scope, call, line, picks, depth, trail, out) and first is not None \
                and all(p is ITEM for p in picks) and _keeps_input_dtype(func):
            # a layer (self.fc1(x)) or a function (F.relu(x)) computes in its input's dtype
            self._follow(sf, scope, first, line, picks, depth, frame, trail, out)

    def _loader(self, sf, scope, call: ast.Call, line, picks, depth, frame, trail, out) -> None:
        collate = keyword(call, "collate_fn")
        if collate is not None and isinstance(collate.value, (ast.Name, ast.Attribute)):
            found = self.resolve_def(sf, collate.value)
            ds = call.args[0] if call.args else (keyword(call, "dataset").value if keyword(call, "dataset") else None)
            if found is not None and not isinstance(found[1], ast.ClassDef):
                fsf, fn = found
                params = param_names(fn)
                if params and ds is not None:       # collate_fn(batch): batch is a list of the dataset's items
                    self._bound[(fsf.rel, fn.lineno, params[0])] = (sf, scope, ds, line, frame)
                for r in returns(fn)[:3]:
                    if r.value is not None:
                        self._follow(fsf, fn, r.value, r.lineno, picks[1:], depth, None, trail, out)
                return
        ds = call.args[0] if call.args else (keyword(call, "dataset").value if keyword(call, "dataset") else None)
        if ds is not None:
            self._follow(sf, scope, ds, line, picks, depth, frame, trail, out)

    def _project_call(self, sf, scope, call: ast.Call, line, picks, depth, trail, out) -> bool:
        """A project class (a Dataset: one item is what ``__getitem__`` returns), function, or
        method of a project object (a generator: one item is what it yields); False when the call
        is none of them.  The callee's parameters are bound to this call's arguments."""
        found = self._callee(sf, scope, call, line)
        if found is None:
            return False
        fsf, node = found
        if isinstance(node, ast.ClassDef):
            get = method(node, "__getitem__")
            if get is None or not picks or picks[0] is not ITEM:
                return True
            init = method(node, "__init__")
            if init is not None:
                self._bind(fsf, init, sf, scope, call, line, method_call=True)
            for r in returns(get)[:3]:
                if r.value is not None:
                    self._follow(fsf, get, r.value, r.lineno, picks[1:], depth, None, trail, out)
            return True
        self._bind(fsf, node, sf, scope, call, line, method_call=isinstance(call.func, ast.Attribute))
        yields = [n for n in own_nodes(node) if isinstance(n, ast.Yield) and n.value is not None]
        if yields and picks and picks[0] is ITEM:
            for y in yields[:3]:
                self._follow(fsf, node, y.value, y.lineno, picks[1:], depth, None, trail, out)
            return True
        for r in returns(node)[:3]:
            if r.value is not None:
                self._follow(fsf, node, r.value, r.lineno, picks, depth, None, trail, out)
        return True

    def _callee(self, sf, scope, call: ast.Call, line):
        """(file, def or class) a call runs: a module-level one, or a method of a project object."""
        func = call.func
        found = self.resolve_def(sf, func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if found is not None or not isinstance(func, ast.Attribute):
            return found
        ctor = self.ctor_value(sf, scope, func.value, line)
        cls = self.class_of_value(*ctor) if ctor is not None else None
        m = method(cls[1], func.attr) if cls is not None else None
        return (cls[0], m) if m is not None else None

    def _bind(self, fsf, fn, sf, scope, call: ast.Call, line: int, method_call: bool) -> None:
        params = param_names(fn)
        if method_call and params and params[0] in ("self", "cls"):
            params = params[1:]
        for i, p in enumerate(params):
            arg = next((k.value for k in call.keywords if k.arg == p), None)
            if arg is None and i < len(call.args) and not isinstance(call.args[i], ast.Starred):
                arg = call.args[i]
            if arg is not None:
                self._bound[(fsf.rel, fn.lineno, p)] = (sf, scope, arg, line, None)


def _is_factory(func: ast.AST) -> bool:
    d = dotted(func)
    head, _, tail = d.rpartition(".")
    if head in ("torch", "th") and (tail in TENSOR_FACTORIES or tail.endswith("Tensor")):
        return True
    return head in ("np", "numpy") and tail in ("array", "asarray", "zeros", "ones", "stack", "concatenate",
                                                  "loadtxt", "genfromtxt", "load", "random.rand", "random.randn")


def _operands(expr: ast.BinOp) -> List[ast.AST]:
    """The operands of an arithmetic chain that are not plain numbers (nested chains flattened)."""
    out: List[ast.AST] = []
    for side in (expr.left, expr.right):
        if isinstance(side, ast.BinOp):
            out += _operands(side)
        elif not (isinstance(side, ast.Constant) or isinstance(side, ast.UnaryOp) and isinstance(side.operand, ast.Constant)):
            out.append(side)
    return out


def _other_branches(sf: SourceFile, scope: ast.AST, assign: Optional[ast.AST], name: str) -> List[ast.Assign]:
    """Assignments of ``name`` in the other branches of the ``if`` that holds ``assign`` (the last one
    in each): either may have made the value read after the ``if``."""
    if not isinstance(assign, ast.Assign):
        return []
    out: List[ast.Assign] = []
    child: ast.AST = assign
    for up in sf.ancestors(assign):
        if up is scope:
            break
        if isinstance(up, ast.If):
            other = up.orelse if any(child is st for st in up.body) else up.body
            found = [n for st in other for n in ast.walk(st) if isinstance(n, ast.Assign) and len(n.targets) == 1
                     and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name]
            if found:
                out.append(found[-1])
        child = up
    return out


def _callable_module(func: ast.AST) -> bool:
    """``model``, ``self.encoder``: a callee that may be a module (not ``torch.x``, ``F.x``, ``np.x``)."""
    root = dotted(func).split(".")[0]
    return bool(root) and root not in ("torch", "F", "nn", "np", "numpy", "math", "print", "len", "float", "int")


def _keeps_input_dtype(func: ast.AST) -> bool:
    """A layer held by ``self`` or a torch function: its result has its first argument's dtype."""
    d = dotted(func)
    head = d.split(".")[0]
    if head == "self":
        return True
    return head in ("torch", "F", "nn") and d.rpartition(".")[2] not in TENSOR_FACTORIES


def _params(fn: ast.AST) -> List[str]:
    return param_names(fn) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else []


def _binding_path(target: ast.AST, name: str) -> Optional[Tuple[Pick, ...]]:
    """The picks that lead from an assigned value to ``name`` in ``target`` (() for the whole)."""
    if isinstance(target, ast.Name):
        return () if target.id == name else None
    if isinstance(target, (ast.Tuple, ast.List)):
        for i, elt in enumerate(target.elts):
            sub = _binding_path(elt, name)
            if sub is not None:
                return (i,) + sub
    return None


def _loop_binding(sf: SourceFile, scope: ast.AST, name: str, line: int
                  ) -> Optional[Tuple[ast.AST, int, Tuple[Pick, ...]]]:
    """(iterable, its line, picks) of the innermost ``for`` or comprehension around ``line`` (in
    ``scope``) whose target binds ``name``."""
    best = None
    for node in sf.own(scope):
        if not hasattr(node, "lineno") or not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        if isinstance(node, (ast.For, ast.AsyncFor)):
            loops = [(node.target, node.iter)]
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            loops = [(g.target, g.iter) for g in node.generators]
        else:
            continue
        for target, it in loops:
            path = _binding_path(target, name)
            if path is not None and (best is None or node.lineno >= best[1]):
                best = (it, node.lineno, path)
    return best
