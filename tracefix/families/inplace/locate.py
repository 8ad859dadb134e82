"""inplace-modification: a tensor autograd saved was modified in place before backward().

With ``output k of XBackward0`` in the message: the values produced by ops of that family (or by
modules whose forward ends in one) that are then written in place (augmented assignment, ``x.op_()``,
``x[i] = v``, ``inplace=True``, ``out=``), also inside project functions the value is passed to; an
in-place op *of* that family applied to a value an earlier op had saved (autograd then calls the
tensor its output); ``nn.Sequential`` layers applied in place to the previous layer's saved output.
Modules are followed through factory functions, registries (``ACTS[name](...)``) and
``Sequential``/``ModuleList``/``ModuleDict`` indexing and iteration.  With an anomaly-mode forward
trace, the write that follows the traced line.  Without a node (a leaf), or with a view node
(``AsStrided``: a parameter's ``.t()`` saved by a Linear): a call between the forward pass and the
crashing backward that changes parameters in place (optimizer steps, clamping or decay loops, also in
helpers and methods in other files), an optimizer step between two backward() calls, or a buffer
written in place.
"""
from __future__ import annotations

import ast
import re
from typing import Dict, List, Optional, Set, Tuple, Union

from tracefix import vocab
from tracefix.locator.ops import BINOP_FAMILY, KNOWN_FAMILIES, op_family
from tracefix.locator.tracing import (FUNC_TYPES, MAX_DEPTH, Tracer, argument_for, bound_names, classify_backward,
                                      is_true, method, param_names, returns, src, unwrap_call, unwrap_chain,
                                      walk_stmt)
from tracefix.pysource import SourceFile, base_name, const_str, dotted, keyword, last_name, own_nodes
from tracefix.record import field, record, replace
from tracefix.vocab import NOT_INPLACE_METHODS, OPTIMIZER_CLASSES, TENSOR_FACTORIES

STEP_SKIP_RX = re.compile(r"sched|lr_?|warmup|trainer|env|progress|pbar|bar", re.I)
STEP_OPT_RX = re.compile(r"opt|sgd|adam|solver|scaler", re.I)
# what aliases its receiver (contiguous() too, when it already is)
VIEW_METHODS = vocab.VIEW_METHODS | vocab.VIEW_ATTRS | {"contiguous"}

# Scores of an in-place write of a traced value, by what made the value.  The message's family is
# what autograd says it saved; the further a value is from it, the less likely its write is the one.
MATCH_SCORE = 0.8           # made by the message's family (or rebased by it): the likely culprit
ANOMALY_SCORE = 0.95        # the anomaly-mode trace names the value: evidence beyond the source, ranks above
PARAM_SCORE = 0.25          # a forward() argument: only an error if the caller's op saved it
OTHER_FAMILY_SCORE = 0.3    # a known family, not the message's: it may not have saved this value
KNOWN_FAMILY_SCORE = 0.5    # a known family, the message's is not one we know: it may be the one
UNRESOLVED_SCORE = 0.2      # made by something we could not resolve: possible, nothing more
DEPTH_PENALTY = 0.01        # per call followed into: on a tie the direct write ranks first
REPEAT_PENALTY = 0.05       # per earlier write of the same value: the first one already changed it


@record(frozen=True)
class _Origin:
    """What made a tracked value: its op families (with the markers "param", "view", "?mod" for a
    module we could not resolve and "?"), where, and how to name it in a reason."""
    fams: Set[str]
    line: Union[int, str]       # a line of this file, or "file:line" of the caller's file it came from
    desc: str


@record
class _Scan:
    """One scope's scan: what it looks for and the values it tracks so far."""
    sf: SourceFile
    scope: ast.AST
    fam: str
    seed: Optional[Dict[str, _Origin]]
    score_match: float
    why: str
    depth: int
    tracked: Dict[str, _Origin]
    used: Set[str]                      # tracked names some operation has read (and may have saved)
    seed_origins: List[_Origin]
    hits_per_origin: Dict[Union[int, str], int] = field(default_factory=dict)
    count: int = 0


def run(ctx) -> None:
    _Inplace(ctx).run()


class _Inplace(Tracer):
    def run(self) -> None:
        self._scanned: Set[Tuple[str, int, Tuple[str, ...]]] = set()
        node = self._node_name()
        if not node:
            # a leaf: a parameter updated between forward and backward, or a buffer/constant written in place
            self._step_between()
            self._params_updated_before_backward()
            self._leaf_buffer_writes()
            return
        fam = op_family(node)
        if fam == "view":
            # AsStrided & co.: a view (weight.t() saved by a Linear) whose base was changed in place,
            # typically a parameter updated after the forward pass, or (when no such update is found:
            # a step between backwards is told by line order alone) by a step between two backwards
            found = len(self.ctx.sites)
            self._params_updated_before_backward()
            if len(self.ctx.sites) == found:
                self._step_between()
        self._anomaly_unexplained = ""
        if self.ctx.anomaly_mapped and self._inplace_from_anomaly(fam):
            return
        files = self.ctx.search_files()
        before = len(self.ctx.sites)
        for rel, sf in self.ctx.sources(files):
            for scope in sf.scopes():
                self._scan_inplace(sf, scope, fam)
            self._sequential_chains(sf, fam)
            self._forward_hooks(sf, fam)
        if len(self.ctx.sites) == before and fam != "view":
            self._inplace_modules(files, node)
        if self._anomaly_unexplained:
            # said once the search is over, so that it does not promise candidates there are none of
            rest = "other candidates are listed." if self.ctx.sites else "no other candidate was found either."
            self.ctx.notes.append(self._anomaly_unexplained + rest)

    def _inplace_modules(self, files: List[str], node: str) -> None:
        """No traced write: every module built with ``inplace=True`` in these files is a candidate
        (it may receive the saved output through a container built elsewhere, e.g. a list of layers
        unpacked into nn.Sequential).  Candidates only: ``--apply`` writes one only with ``--pick``."""
        start = len(self.ctx.sites)
        for rel, sf in self.ctx.sources(files):
            if sf.tree is None or "inplace" not in sf.text:
                continue
            for call in ast.walk(sf.tree):
                if not (isinstance(call, ast.Call) and last_name(call.func)[:1].isupper()):
                    continue
                kw = keyword(call, "inplace")
                if kw is None or not is_true(kw.value):
                    continue
                what = src(sf, call.func)
                self.ctx.add(sf, kw.lineno, kw.col_offset, "inplace-kwarg",
                             f"{what}(inplace=True) overwrites its input; no write to the {node} output was "
                             f"traced, but if this module receives that output (through layers put together "
                             f"elsewhere), it is the write backward() found. `tracefix run` (the witness) tells.",
                             0.3)
        guess = (f"no traced write reaches this module; the change keeps behaviour, but the error remains "
                 f"unless the {node} output comes through it (tracefix run's witness tells)")
        self.ctx.sites[start:] = [replace(s, searched=True, guess=guess) for s in self.ctx.sites[start:]]

    def _node_name(self) -> str:
        node = self.ctx.diag.field("node")
        if not node:
            m = re.search(r"which is output \d+ of ([\w:.<>]+),", self.ctx.diag.traceback.message or "")
            node = m.group(1) if m else ""
        return node

    def _expr_families(self, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int,
                       depth: int = 0) -> Set[str]:
        """Op families that produce the value of expr (its outermost operation)."""
        if depth > MAX_DEPTH or expr is None:
            return set()
        if isinstance(expr, ast.BinOp):
            f = BINOP_FAMILY.get(type(expr.op))
            return {f} if f else set()
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
            return {"neg"}
        if isinstance(expr, ast.Subscript):
            return {"view"}
        if isinstance(expr, ast.Attribute) and expr.attr in ("T", "mT", "data", "real", "imag"):
            return {"view"}
        if isinstance(expr, ast.IfExp):
            return (self._expr_families(sf, scope, expr.body, line, depth + 1)
                    | self._expr_families(sf, scope, expr.orelse, line, depth + 1))
        if isinstance(expr, ast.Name) and isinstance(scope, FUNC_TYPES):
            # `return y` after `y = self.relu(self.deconv3(y))`: what made the name's last value
            a = self.last_assign(sf, scope, expr.id, line)
            if isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name) \
                    and sf.scope_of(a) is scope:
                return self._expr_families(sf, scope, a.value, a.lineno, depth + 1)
            return set()
        if not isinstance(expr, ast.Call):
            return set()
        func = expr.func
        name = last_name(func)
        fams: Set[str] = set()
        if isinstance(func, ast.Attribute) and name in VIEW_METHODS:
            # a view shares its base's memory and version counter: writing it in place spoils
            # what the base's producer saved, and autograd names that producer
            return {"view"} | self._expr_families(sf, scope, func.value, line, depth + 1)
        if _module_like(func):
            for csf, ctor in self._module_ctors(sf, scope, func, line, depth + 1):
                fams |= self._module_families(csf, ctor, depth + 1)
            if fams:
                return fams
        for csf, fn in self.callees(sf, scope, expr, line)[:2]:
            for ret in returns(fn):
                fams |= self._expr_families(csf, fn, ret.value, ret.lineno + 1, depth + 1)
        if fams:
            return fams
        if name in ("forward", "__call__", "apply"):
            return set()
        if name and (name[0].islower() or name in ("T",)) and not name.endswith("_"):
            return {op_family(name)}
        if name and name[0].isupper():
            return {op_family(name)}
        return set()

    def _module_families(self, sf: SourceFile, value: ast.AST, depth: int) -> Set[str]:
        """Families produced by calling a module built as value (nn.ReLU(), nn.Sequential(...), Block())."""
        value = unwrap_chain(value)
        if depth > MAX_DEPTH or not isinstance(value, ast.Call):
            return set()
        name = last_name(value.func)
        if name == "Sequential":
            if value.args:
                last = value.args[-1]
                if isinstance(last, ast.Starred):
                    return set()
                fams: Set[str] = set()
                for csf, c in self._expand_factory(sf, last, depth + 1):
                    fams |= self._module_families(csf, c, depth + 1)
                return fams
            return set()
        if name in ("Identity", "ModuleList", "ModuleDict"):
            return set()
        if isinstance(value.func, ast.Subscript):
            # REGISTRY[cfg.name](...): any of the classes the registry holds
            fams = set()
            for csf, cls_expr in self._registry_values(sf, value.func):
                fams |= self._module_families(csf, ast.Call(func=cls_expr, args=[], keywords=[]), depth + 1)
            return fams
        cls = self.class_of_value(sf, value)
        if cls is not None:
            csf, cdef = cls
            fwd = method(cdef, "forward") or method(cdef, "__call__")
            fams = set()
            if fwd is not None:
                for ret in returns(fwd):
                    fams |= self._expr_families(csf, fwd, ret.value, ret.lineno + 1, depth + 1)
            return fams
        if name and name[0].isupper():
            return {op_family(name)}
        return set()

    # -- what a called module object was built as ------------------------------------------------
    def _module_ctors(self, sf: SourceFile, scope: ast.AST, func: ast.AST, line: int, depth: int = 0
                      ) -> List[Tuple[SourceFile, ast.AST]]:
        """The constructor expressions a called module (``self.act``, ``head``, ``self.heads["x"]``) may
        have been built from: through factory functions and methods that return it, registries
        (``ACTS[name](...)``), and ``nn.Sequential``/``ModuleList``/``ModuleDict`` indexing and iteration."""
        if depth > MAX_DEPTH:
            return []
        if isinstance(func, ast.Subscript):
            out: List[Tuple[SourceFile, ast.AST]] = []
            for csf, c in self._module_ctors(sf, scope, func.value, line, depth + 1):
                out.extend(self._container_items(csf, c, func.slice, depth + 1))
            return out
        if isinstance(func, ast.Name):
            loop = self._loop_source(sf, scope, func.id, line)
            if loop is not None:
                out = []
                for csf, c in self._module_ctors(sf, scope, loop, line, depth + 1):
                    out.extend(self._container_items(csf, c, None, depth + 1))
                return out
        ctor = self.ctor_value(sf, scope, func, line)
        if ctor is None:
            return []
        return self._expand_factory(ctor[0], ctor[1], depth + 1, sf.scope_of(ctor[1]))

    def _expand_factory(self, sf: SourceFile, value: ast.AST, depth: int, scope: Optional[ast.AST] = None
                        ) -> List[Tuple[SourceFile, ast.AST]]:
        """value itself, or what the project function it calls returns (``make_act()`` -> ``nn.ReLU(...)``)."""
        value = unwrap_chain(value)
        if depth > MAX_DEPTH:
            return []
        if isinstance(value, ast.Name) and scope is not None:
            ctor = self.ctor_value(sf, scope, value, 10 ** 9)
            return self._expand_factory(ctor[0], ctor[1], depth + 1, scope) if ctor is not None else []
        if not isinstance(value, ast.Call) or isinstance(value.func, ast.Subscript):
            return [(sf, value)]
        scope = scope if scope is not None else sf.scope_of(value)
        fns = [] if self.class_of_value(sf, value) is not None else self.callees(sf, scope, value, value.lineno)[:2]
        fns = [(csf, fn) for csf, fn in fns if getattr(fn, "name", "") not in ("forward", "__call__")]
        if not fns:
            return [(sf, value)]
        out: List[Tuple[SourceFile, ast.AST]] = []
        for csf, fn in fns:
            for ret in returns(fn):
                out.extend(self._expand_factory(csf, ret.value, depth + 1, fn))
        return out or [(sf, value)]

    def _container_items(self, sf: SourceFile, value: ast.AST, key: Optional[ast.AST], depth: int
                         ) -> List[Tuple[SourceFile, ast.AST]]:
        """Elements of nn.Sequential/ModuleList/ModuleDict (``.items()``/``.values()`` stripped by the caller)."""
        value = unwrap_chain(value)
        if not isinstance(value, ast.Call):
            return []
        name = last_name(value.func)
        elems: List[ast.AST] = []
        if name == "ModuleDict" and value.args and isinstance(value.args[0], ast.Dict):
            d = value.args[0]
            want = const_str(key) if key is not None else None
            elems = [v for k, v in zip(d.keys, d.values) if want is None or const_str(k) == want]
        elif name in ("Sequential", "ModuleList"):
            args = value.args
            if name == "ModuleList" and len(args) == 1:
                a = args[0]
                if isinstance(a, (ast.List, ast.Tuple)):
                    args = a.elts
                elif isinstance(a, (ast.ListComp, ast.GeneratorExp)):
                    args = [a.elt]
            args = [a for a in args if not isinstance(a, ast.Starred)]
            if key is not None and isinstance(key, ast.Constant) and isinstance(key.value, int) \
                    and -len(args) <= key.value < len(args):
                args = [args[key.value]]
            elems = list(args)
        out: List[Tuple[SourceFile, ast.AST]] = []
        for e in elems:
            out.extend(self._expand_factory(sf, e, depth + 1))
        return out

    def _loop_source(self, sf: SourceFile, scope: ast.AST, name: str, line: int) -> Optional[ast.AST]:
        """The container a loop or comprehension variable iterates (``for head in self.heads.values()``)."""
        best = None
        for node in sf.own(scope):
            gens: List[Tuple[ast.AST, ast.AST, int]] = []
            if isinstance(node, (ast.For, ast.AsyncFor)) and node.lineno <= line:
                gens.append((node.target, node.iter, node.lineno))
            elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)) \
                    and node.lineno <= line <= getattr(node, "end_lineno", node.lineno):
                gens.extend((g.target, g.iter, node.lineno) for g in node.generators)
            for target, it, ln in gens:
                if isinstance(target, ast.Name) and target.id == name:
                    src_expr = it
                    if isinstance(it, ast.Call) and last_name(it.func) == "enumerate" and it.args:
                        continue
                elif isinstance(target, ast.Tuple) and len(target.elts) == 2 and \
                        isinstance(target.elts[1], ast.Name) and target.elts[1].id == name:
                    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items":
                        src_expr = it.func.value
                    elif isinstance(it, ast.Call) and last_name(it.func) == "enumerate" and it.args:
                        src_expr = it.args[0]
                    else:
                        continue
                else:
                    continue
                if isinstance(src_expr, ast.Call) and isinstance(src_expr.func, ast.Attribute) and \
                        src_expr.func.attr in ("values", "children", "modules"):
                    src_expr = src_expr.func.value
                if best is None or ln >= best[0]:
                    best = (ln, src_expr)
        return best[1] if best else None

    def _registry_values(self, sf: SourceFile, sub: ast.Subscript) -> List[Tuple[SourceFile, ast.AST]]:
        """The values of a module-level dict ``REGISTRY`` indexed as ``REGISTRY[key]``."""
        if not isinstance(sub.value, ast.Name) or sf.tree is None:
            return []
        a = self.last_assign(sf, sf.tree, sub.value.id, 10 ** 9)
        if isinstance(a, ast.Assign) and isinstance(a.value, ast.Dict):
            want = const_str(sub.slice)
            return [(sf, v) for k, v in zip(a.value.keys, a.value.values) if want is None or const_str(k) == want]
        return []

    def _inplace_module(self, sf: SourceFile, scope: ast.AST, call: ast.Call, line: int
                        ) -> Optional[Tuple[SourceFile, ast.keyword, Set[str], str]]:
        """(file, inplace=True keyword, families, description) of a module or functional call that
        ``call`` applies in place to its first argument."""
        kw = keyword(call, "inplace")
        if kw is not None:
            if not is_true(kw.value):
                return None
            return sf, kw, self._call_op_families(sf, scope, call, line), src(sf, call.func)
        func = call.func
        if not _module_like(func):
            return None
        for csf, value in self._module_ctors(sf, scope, func, line):
            found = self._first_inplace(csf, value, 0)
            if found is not None:
                kw_sf, kw, fams, what = found
                return kw_sf, kw, fams, f"{src(sf, func)} ({what})"
        return None

    def _first_inplace(self, sf: SourceFile, value: ast.AST, depth: int
                       ) -> Optional[Tuple[SourceFile, ast.keyword, Set[str], str]]:
        """The inplace=True keyword of the module built as value, or of the first module of a Sequential."""
        value = unwrap_chain(value)
        if depth > MAX_DEPTH or not isinstance(value, ast.Call):
            return None
        if last_name(value.func) == "Sequential" and value.args and not isinstance(value.args[0], ast.Starred):
            for csf, c in self._expand_factory(sf, value.args[0], depth + 1):
                found = self._first_inplace(csf, c, depth + 1)
                if found is not None:
                    return found
            return None
        kw = keyword(value, "inplace")
        if kw is not None and is_true(kw.value):
            return sf, kw, self._module_families(sf, value, depth + 1), src(sf, value.func)
        return None

    def _call_op_families(self, sf: SourceFile, scope: ast.AST, call: ast.Call, line: int) -> Set[str]:
        name = last_name(call.func)
        if _module_like(call.func):
            fams: Set[str] = set()
            for csf, ctor in self._module_ctors(sf, scope, call.func, line):
                fams |= self._module_families(csf, ctor, 1)
            if fams:
                return fams
        return {op_family(name)} if name else set()

    def _describe(self, sf: SourceFile, scope: ast.AST, value: ast.AST, line: int, fams: Set[str]) -> str:
        """'self.proj (nn.Linear)', 'torch.tanh', or the op families when the code says no more."""
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and last_name(value.func) in VIEW_METHODS \
                and isinstance(value.func.value, ast.Call):
            base = self._describe(sf, scope, value.func.value, line, fams - {"view"})
            return f"{base}, seen through .{value.func.attr}()"
        if isinstance(value, ast.Call):
            func = value.func
            if _module_like(func):
                ctors = self._module_ctors(sf, scope, func, line)
                names = sorted({dotted(unwrap_chain(c).func) for _, c in ctors
                                if isinstance(unwrap_chain(c), ast.Call) and dotted(unwrap_chain(c).func)})
                if len(names) == 1:
                    return f"{src(sf, func)} ({names[0]})"
            text = src(sf, func)
            if text and len(text) <= 40:
                return text
        return ", ".join(sorted(f for f in fams if f not in ("param", "?", "?mod"))) or "an earlier operation"

    def _scan_inplace(self, sf: SourceFile, scope: ast.AST, fam: str,
                      seed: Optional[Dict[str, _Origin]] = None, start: int = 0,
                      score_match: float = MATCH_SCORE, why: str = "", init: Optional[Dict[str, _Origin]] = None,
                      init_used: Optional[Set[str]] = None, depth: int = 0) -> int:
        """Track values produced by ops in scope and report in-place modifications of them.

        ``seed``: only these values (an anomaly trace named them); ``init``: values handed in by a
        caller (a tensor passed to a project function, followed into it)."""
        scan = _Scan(sf=sf, scope=scope, fam=fam, seed=seed, score_match=score_match, why=why, depth=depth,
                     tracked=dict(seed or {}), used=set(init_used or ()),
                     seed_origins=list((seed or {}).values()))
        if seed is None and isinstance(scope, FUNC_TYPES) and scope.name == "forward":
            for a in param_names(scope):
                if a not in ("self", "cls"):
                    scan.tracked[a] = _Origin({"param"}, scope.lineno, f"the argument '{a}'")
        scan.tracked.update(init or {})
        stmts = sorted((n for n in sf.own(scope) if isinstance(n, ast.stmt)
                        and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                        and _is_simple_stmt(n) and n.lineno > start),
                       key=lambda n: (n.lineno, n.col_offset))
        for st in stmts:
            self._writes_in(scan, st)
            # names read by this statement: a later in-place change of them overwrites a value in use
            scan.used.update(n.id for n in walk_stmt(st)
                             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in scan.tracked)
            self._bind(scan, st)
        return scan.count

    def _writes_in(self, scan: _Scan, st: ast.stmt) -> None:
        """Report st's in-place writes of tracked values; follow tracked values into the project calls it makes."""
        sf, tracked = scan.sf, scan.tracked
        for node in walk_stmt(st):
            if isinstance(node, ast.AugAssign):
                b = base_name(node.target)
                if b in tracked and isinstance(node.target, (ast.Name, ast.Subscript)):
                    self._report(scan, tracked[b], node.lineno, node.target.col_offset, "inplace-augassign", b,
                                 op_fams={BINOP_FAMILY.get(type(node.op), "")}, op_desc=f"'{src(sf, node)}'",
                                 used_before=self._used_before(scan, b, st, node))
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Subscript) and base_name(t) in tracked:
                        self._report(scan, tracked[base_name(t)], node.lineno, t.col_offset, "inplace-subscript",
                                     base_name(t))
            elif isinstance(node, ast.Call):
                if not self._call_write(scan, st, node) and scan.depth < 2 and scan.seed is None:
                    self._follow_call(scan, st, node)

    def _call_write(self, scan: _Scan, st: ast.stmt, node: ast.Call) -> bool:
        """Report node if it writes a tracked value in place (``x.op_()``, ``torch.op_(x)``, ``out=x``, a
        module applied in place).  True when it writes one, reported or not: such a call is not followed."""
        sf, tracked = scan.sf, scan.tracked
        func = node.func
        name = last_name(func)
        inplace_name = name.endswith("_") and not name.startswith("_") and name not in NOT_INPLACE_METHODS
        if isinstance(func, ast.Attribute) and inplace_name:
            b = base_name(func.value)
            if b in tracked and _is_view_chain(func.value):
                self._report(scan, tracked[b], node.lineno, node.col_offset, "inplace-method", b,
                             op_fams={op_family(name)}, op_desc=f"{src(sf, func)}(...)",
                             used_before=self._used_before(scan, b, st, node))
                return True
        if inplace_name and node.args:
            b = base_name(node.args[0])
            if b in tracked and _is_view_chain(node.args[0]) and not (
                    isinstance(func, ast.Attribute) and base_name(func.value) in tracked):
                self._report(scan, tracked[b], node.lineno, node.col_offset, "inplace-method", b,
                             op_fams={op_family(name)}, op_desc=f"{src(sf, func)}(...)",
                             used_before=self._used_before(scan, b, st, node))
                return True
        out_kw = keyword(node, "out")
        if out_kw is not None and base_name(out_kw.value) in tracked:
            b = base_name(out_kw.value)
            self._report(scan, tracked[b], node.lineno, out_kw.col_offset, "inplace-out", b,
                         op_fams={op_family(name)}, op_desc=f"{src(sf, func)}(..., out=...)",
                         used_before=self._used_before(scan, b, st, node))
            return True
        if node.args and base_name(node.args[0]) in tracked and _is_view_chain(node.args[0]):
            where = self._inplace_module(sf, scan.scope, node, node.lineno)
            if where is not None:
                b = base_name(node.args[0])
                wsf, kw, op_fams, what = where
                self._report(scan, tracked[b], node.lineno, kw.col_offset, "inplace-kwarg", b,
                             (wsf, kw) if wsf is not sf or kw.lineno != node.lineno else None,
                             op_fams=op_fams, op_desc=what, used_before=self._used_before(scan, b, st, node))
                return True
        return False

    def _bind(self, scan: _Scan, st: ast.stmt) -> None:
        """Track the names st assigns with their value's origin (an alias: its base's), or stop tracking them."""
        if not (isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None):
            return
        tracked, used = scan.tracked, scan.used
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        value = st.value
        alias_of = base_name(value) if _is_view_chain(value) else ""
        origin: Optional[_Origin]
        if alias_of and alias_of in tracked:
            origin = tracked[alias_of]
            if scan.seed is None and not isinstance(value, ast.Name) and "view" not in origin.fams:
                # `rep = hidden.flatten(1)`: a write through the view reaches the base;
                # autograd then names the view (AsStrided)
                origin = replace(origin, fams=set(origin.fams) | {"view"})
        else:
            origin = self._value_origin(scan, st, value)
        for t in targets:
            names = [t] if isinstance(t, ast.Name) else (
                [e for e in t.elts if isinstance(e, ast.Name)] if isinstance(t, (ast.Tuple, ast.List)) else [])
            for nm in names:
                if origin is not None:
                    tracked[nm.id] = origin
                else:
                    tracked.pop(nm.id, None)
                if not (alias_of and alias_of in tracked and alias_of in used):
                    used.discard(nm.id)

    def _value_origin(self, scan: _Scan, st: ast.stmt, value: ast.AST) -> Optional[_Origin]:
        """The origin of a value st computes, or None when it is not recognisably a tensor."""
        sf = scan.sf
        if not _tensorish(value) or _reads_namespace(sf, value):
            return None
        fams = self._expr_families(sf, scan.scope, value, st.lineno)
        if not fams and isinstance(value, ast.Call) and (
                isinstance(value.func, ast.Name) or dotted(value.func).startswith("self.")):
            fams = {"?mod"}
        return _Origin(fams or {"?"}, st.lineno, self._describe(sf, scan.scope, value, st.lineno, fams))

    def _report(self, scan: _Scan, origin: _Origin, line: int, col: int, kind: str, target: str,
                where: Optional[Tuple[SourceFile, ast.keyword]] = None, op_fams: Set[str] = frozenset(),
                op_desc: str = "", used_before: bool = False) -> None:
        """Add the in-place write of ``target`` as a fix site, unless its origin makes it no candidate."""
        scored = _score(scan, origin, kind, op_fams, used_before)
        if scored is None:
            return
        score, rebased = scored
        if scan.depth:
            score -= DEPTH_PENALTY * scan.depth
        n = scan.hits_per_origin.get(origin.line, 0)
        scan.hits_per_origin[origin.line] = n + 1
        score -= REPEAT_PENALTY * n
        reason = _reason(scan, origin, target, op_fams, op_desc, used_before, rebased)
        if where is not None:
            wsf, kw = where
            self.ctx.add(wsf, kw.lineno, kw.col_offset, "inplace-kwarg", reason, score)
        else:
            self.ctx.add(scan.sf, line, col, kind, reason, score)
        scan.count += 1

    def _used_before(self, scan: _Scan, b: str, st: ast.AST, node: ast.AST) -> bool:
        """Was b read by another operation before node changed it?"""
        if b in scan.used:
            return True
        # the write's own operands are evaluated before it (`x /= x.norm()`: norm saved x)
        if isinstance(node, ast.AugAssign):
            own, operands = node.target, [node.value]
        elif isinstance(node, ast.Call):
            # ... except the tensor it writes (`torch.relu_(x)`, `self.act(x)`, `out=x`)
            own = node.func
            operands = [a for a in [*node.args, *(k.value for k in node.keywords)]
                        if not (base_name(a) == b and _is_view_chain(a))]
        else:
            own, operands = node, []
        inside = {id(n) for n in ast.walk(own)}
        first = {id(n) for o in operands for n in ast.walk(o)}
        for n in walk_stmt(st):
            if isinstance(n, ast.Name) and n.id == b and isinstance(n.ctx, ast.Load) and id(n) not in inside \
                    and ((n.lineno, n.col_offset) < (node.lineno, node.col_offset) or id(n) in first):
                return True
        # applied in a comprehension or a loop over several modules: an earlier pass read it too
        for anc in scan.sf.ancestors(node):
            if isinstance(anc, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                targets = {t.id for g in anc.generators for t in ast.walk(g.target) if isinstance(t, ast.Name)}
                return b not in targets
            if isinstance(anc, (ast.For, ast.AsyncFor)):
                assigned = {t for s in ast.walk(anc) if isinstance(s, ast.stmt) for t in bound_names(s)}
                assigned |= {t.id for t in ast.walk(anc.target) if isinstance(t, ast.Name)}
                return b not in assigned
            if anc is scan.scope:
                break
        return False

    def _forward_hooks(self, sf: SourceFile, fam: str) -> None:
        """A forward hook's ``output`` is the module's output, which the module's backward may
        have saved: scan each hook registered here with that argument tracked."""
        for scope in sf.scopes():
            for call in sf.own(scope):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr in ("register_forward_hook", "register_module_forward_hook")
                        and call.args):
                    continue
                found = self._local_def(sf, scope, call.args[0])
                if found is None:
                    continue
                hsf, hook = found
                params = [a for a in param_names(hook) if a not in ("self", "cls")]
                if len(params) < 3:
                    continue
                # `isinstance(m, nn.ReLU)` around the registration: the hooked modules' family
                fams = {op_family(last_name(c)) for n in sf.own(scope) if isinstance(n, ast.Call)
                        and last_name(n.func) == "isinstance" and len(n.args) == 2
                        for c in (n.args[1].elts if isinstance(n.args[1], ast.Tuple) else [n.args[1]])}
                fams.discard("")
                origin = _Origin(fams or {"?mod"}, _line_in(sf, hsf, call.lineno),
                                 f"the module that {src(sf, call.func)}(...) hooks")
                self._scan_inplace(hsf, hook, fam, init={params[2]: origin}, init_used={params[2]})

    def _local_def(self, sf: SourceFile, scope: ast.AST, ref: ast.AST) -> Optional[Tuple[SourceFile, ast.AST]]:
        """The def that ref names: one nested in scope, or a project-level one."""
        if isinstance(ref, ast.Name):
            for n in sf.own(scope):
                if isinstance(n, FUNC_TYPES) and n.name == ref.id:
                    return sf, n
        found = self.resolve_def(sf, ref)
        if found is not None and isinstance(found[1], FUNC_TYPES):
            return found
        return None

    def _follow_call(self, scan: _Scan, st: ast.AST, call: ast.Call) -> None:
        """A tracked tensor passed to a project function: follow it in (``mean_cosine(za)`` writing ``z.div_``)."""
        sf, scope, tracked = scan.sf, scan.scope, scan.tracked
        passed = [a for a in list(call.args) + [k.value for k in call.keywords]
                  if isinstance(a, ast.Name) and a.id in tracked]
        if not passed:
            return
        for csf, fn in self.callees(sf, scope, call, call.lineno)[:2]:
            if fn is scope or not isinstance(fn, FUNC_TYPES):
                continue
            init: Dict[str, _Origin] = {}
            init_used: Set[str] = set()
            for p in param_names(fn):
                if p in ("self", "cls"):
                    continue
                arg = argument_for(fn, call, p)
                if isinstance(arg, ast.Name) and arg.id in tracked:
                    o = tracked[arg.id]
                    init[p] = _Origin(o.fams, _line_in(sf, csf, o.line),
                                      o.desc if "param" not in o.fams else f"the argument '{arg.id}'")
                    if self._used_before(scan, arg.id, st, call):
                        init_used.add(p)
            if not init:
                continue
            # by value: the same function entered with the same origins for its parameters
            key = (csf.rel, fn.lineno, fn.col_offset,
                   tuple(sorted((k, tuple(sorted(v.fams)), str(v.line), v.desc) for k, v in init.items())))
            if key in self._scanned:
                continue
            self._scanned.add(key)
            self._scan_inplace(csf, fn, scan.fam, init=init, init_used=init_used, depth=scan.depth + 1)

    def _sequential_chains(self, sf: SourceFile, fam: str) -> None:
        """``nn.Sequential(..., A, B(inplace=True), ...)``: B overwrites A's output in place; an error when A
        saved its own output (relu, tanh, sigmoid, softmax...), i.e. when A's family is the message's."""
        if sf.tree is None or not fam:
            return
        for call in ast.walk(sf.tree):
            if not (isinstance(call, ast.Call) and last_name(call.func) == "Sequential") or \
                    any(isinstance(a, ast.Starred) for a in call.args):
                continue
            for prev, cur in zip(call.args, call.args[1:]):
                found = None
                for csf, c in self._expand_factory(sf, cur, 1):
                    found = self._first_inplace(csf, c, 1)
                    if found is not None:
                        break
                if found is None:
                    continue
                kw_sf, kw, _fams, what = found
                prev_fams: Set[str] = set()
                for csf, c in self._expand_factory(sf, prev, 1):
                    prev_fams |= self._module_families(csf, c, 1)
                if fam in prev_fams:
                    score = MATCH_SCORE
                elif not prev_fams:
                    score = UNRESOLVED_SCORE
                else:
                    continue        # the previous layer does not save its output: no error from here
                self.ctx.add(kw_sf, kw.lineno, kw.col_offset, "inplace-kwarg",
                             f"In this nn.Sequential, {what}(inplace=True) overwrites the output of "
                             f"{src(sf, prev)} (line {prev.lineno}), which that layer saved for backward.", score)

    def _inplace_from_anomaly(self, fam: str) -> bool:
        """Use the anomaly-mode forward trace: its innermost user frame created the saved tensor."""
        frames = self.ctx.anomaly_mapped
        for i, m in enumerate(frames):
            sf = self.project.source(m.rel_path)
            if sf is None:
                continue
            stmt = sf.stmt_at(m.line)
            if stmt is None:
                continue
            why = (f"The anomaly-mode trace shows the saved tensor was created at {m.rel_path}:{m.line}; "
                   f"it is modified in place here.")
            before = len(self.ctx.sites)
            # the created value flows outward while it is returned
            j = i
            cur_sf, cur_stmt = sf, stmt
            while True:
                scope = cur_sf.scope_of(cur_stmt)
                # in the creating statement itself: a module applied in place to the new value
                for node in walk_stmt(cur_stmt):
                    if isinstance(node, ast.Call) and node.args and not isinstance(node.args[0], ast.Name):
                        where = self._inplace_module(cur_sf, scope, node, node.lineno)
                        if where is not None:
                            self.ctx.add(where[0], where[1].lineno, where[1].col_offset, "inplace-kwarg", why,
                                         ANOMALY_SCORE)
                names = bound_names(cur_stmt)
                if names:
                    seed = {n: _Origin({fam or "?"}, cur_stmt.lineno, fam or "an earlier operation") for n in names}
                    self._scan_inplace(cur_sf, scope, fam, seed=seed, start=cur_stmt.lineno,
                                       score_match=ANOMALY_SCORE, why=why)
                    if len(self.ctx.sites) > before:
                        return True
                    returned = any(isinstance(n, ast.Return) and n.value is not None and
                                   base_name(n.value) in names and _is_view_chain(n.value)
                                   for n in sf.own(scope))
                    if not returned:
                        break
                elif not isinstance(cur_stmt, ast.Return):
                    break
                if len(self.ctx.sites) > before:
                    return True
                # go to the caller (next outer anomaly frame that maps)
                j += 1
                if j >= len(frames):
                    break
                nsf = self.project.source(frames[j].rel_path)
                nstmt = nsf.stmt_at(frames[j].line) if nsf is not None else None
                if nstmt is None:
                    break
                cur_sf, cur_stmt = nsf, nstmt
            if len(self.ctx.sites) > before:
                return True
            # the op there may have saved one of its inputs (a Linear saves x): a later in-place write of it
            inputs = sorted({a.id for c in walk_stmt(stmt) if isinstance(c, ast.Call) for a in c.args
                             if isinstance(a, ast.Name)} - set(bound_names(stmt)) - {"self", "cls"})
            if inputs:
                seed = {n: _Origin({fam or "?"}, stmt.lineno, f"'{n}'") for n in inputs}
                why_in = (f"The anomaly-mode trace shows {m.rel_path}:{m.line} passing {', '.join(inputs)} to an "
                          f"operation that saved it for backward; it is modified in place here.")
                self._scan_inplace(sf, sf.scope_of(stmt), fam, seed=seed, start=stmt.lineno,
                                   score_match=ANOMALY_SCORE, why=why_in)
                if len(self.ctx.sites) > before:
                    return True
            self._anomaly_unexplained = (f"The anomaly-mode trace points at {m.rel_path}:{m.line}, but no in-place "
                                         f"change of that value was found; ")
            return False
        return False

    # -- parameters changed in place after the forward pass and before its backward -----------------
    def _params_updated_before_backward(self) -> None:
        """A call between the forward pass and the crashing backward() that changes parameters in place:
        an optimizer step, clamping/decay loops over ``.parameters()``, ``p.data.copy_`` (EMA), also
        inside helpers and methods in other files.  The fix site is that call in the crashing function."""
        if not self.ctx.mapped:
            return
        m = self.ctx.mapped[0]
        sf = self.project.source(m.rel_path)
        stmt = sf.stmt_at(m.line) if sf is not None else None
        if stmt is None:
            return
        back = next((c for c in ast.walk(stmt) if isinstance(c, ast.Call) and classify_backward(c) is not None
                     and classify_backward(c)[0] == "backward-receiver"), None)
        if back is None:
            return
        scope = sf.scope_of(stmt)
        # In a training loop the forward pass is this iteration's: the model's definition above the
        # loop is not part of it.
        loop = next((a for a in sf.ancestors(stmt) if isinstance(a, (ast.For, ast.AsyncFor, ast.While))
                     and sf.scope_of(a) is scope), None)
        start = self._forward_start(sf, scope, classify_backward(back)[1], m.line, loop)
        if start is None:
            # the loss came in as an argument: the whole function runs after its forward pass
            if not (isinstance(scope, FUNC_TYPES) and any(isinstance(n, ast.Name) and n.id in param_names(scope)
                                                          for n in ast.walk(classify_backward(back)[1]))):
                return
            start = scope.lineno
        backs = [c.lineno for c in sf.own(scope) if isinstance(c, ast.Call) and classify_backward(c) is not None]
        loss = src(sf, classify_backward(back)[1])
        for st in sorted((n for n in sf.own(scope) if isinstance(n, ast.stmt) and start < n.lineno < m.line
                          and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))),
                         key=lambda n: n.lineno):
            if _is_simple_stmt(st):
                calls = [c for c in walk_stmt(st) if isinstance(c, ast.Call)]
                if any(classify_backward(c) is not None for c in calls):
                    continue
                for c in calls:
                    if _is_optimizer_step(c) and any(b < c.lineno for b in backs):
                        continue    # a step between two backward() calls: _step_between names it
                    what, steps = self._param_update(sf, scope, c, 0)
                    if what:
                        self._add_param_update(sf, st, c, what, loss, m.line, steps)
                        break
            elif isinstance(st, (ast.For, ast.With)) and isinstance(sf.parent(st), (ast.Module,) + FUNC_TYPES
                                                                     + (ast.For, ast.While, ast.If, ast.With)) \
                    and not st.lineno <= m.line <= (st.end_lineno or st.lineno):   # not the loop around it all
                what = self._param_loop(sf, scope, st, 0)
                if what and sf.scope_of(st) is scope and not any(
                        isinstance(a, (ast.For, ast.With)) and start < a.lineno for a in sf.ancestors(st)
                        if a is not scope and isinstance(a, ast.stmt)):
                    self._add_param_update(sf, st, None, what, loss, m.line, False)

    def _add_param_update(self, sf: SourceFile, st: ast.stmt, call: Optional[ast.Call], what: str, loss: str,
                          back_line: int, steps: bool) -> None:
        shown = src(sf, call) if call is not None else f"the `{sf.line_text(st.lineno).strip()}` block"
        inner = "" if what.startswith(shown) else f" ({what})"
        kind = "param-step-before-backward" if steps else "param-update-before-backward"
        self.ctx.add(sf, st.lineno, (call or st).col_offset, kind,
                     f"{shown}{inner} changes parameters in place after the forward pass saved them and before "
                     f"{loss}.backward() (line {back_line}) needs their old values.", 0.85)

    def _forward_start(self, sf: SourceFile, scope: ast.AST, loss: ast.AST, line: int,
                       loop: Optional[ast.AST] = None) -> Optional[int]:
        """First line of the computation the backward's loss comes from, in this scope (in ``loop``)."""
        todo = [n.id for n in ast.walk(loss) if isinstance(n, ast.Name)]
        seen: Set[str] = set()
        lines: List[int] = []
        while todo and len(seen) < 40:
            name = todo.pop()
            if name in seen or name == "self":
                continue
            seen.add(name)
            a = self.last_assign(sf, scope, name, line)
            if not isinstance(a, (ast.Assign, ast.AnnAssign)) or a.value is None or sf.scope_of(a) is not scope:
                continue
            if loop is not None and not loop.lineno < a.lineno <= (loop.end_lineno or a.lineno):
                continue
            if any(isinstance(n, ast.Call) for n in ast.walk(a.value)):
                lines.append(a.lineno)
            todo.extend(n.id for n in ast.walk(a.value) if isinstance(n, ast.Name))
        return min(lines) if lines else None

    def _param_update(self, sf: SourceFile, scope: ast.AST, call: ast.Call, depth: int) -> Tuple[str, bool]:
        """('p.clamp_(-c, c) (wgan_utils.py:9)', steps) when call changes parameters in place; steps: by an
        optimizer step (which reads the gradients)."""
        if depth > 3:
            return "", False
        if _is_optimizer_step(call) or self._steps_optimizer(sf, scope, call):
            return f"{src(sf, call)}" + (f" ({sf.rel}:{call.lineno})" if depth else ""), True
        name = last_name(call.func)
        if name in ("zero_grad", "backward", "item", "print") or name.endswith("_grad_norm_") or \
                name.endswith("_grad_value_"):
            return "", False
        for csf, fn in self.callees(sf, scope, call, call.lineno)[:2]:
            if fn is scope or getattr(fn, "name", "") in ("forward", "__init__"):
                continue
            for node in sorted((n for n in csf.own(fn) if isinstance(n, (ast.Call, ast.For))),
                               key=lambda n: n.lineno):
                if isinstance(node, ast.For):
                    what, steps = self._param_loop(csf, fn, node, depth + 1), False
                else:
                    what, steps = self._param_update(csf, fn, node, depth + 1)
                if what:
                    return what, steps
        return "", False

    def _steps_optimizer(self, sf: SourceFile, scope: ast.AST, call: ast.Call) -> bool:
        """``X.step()`` where X was built by a torch.optim class (``self.opt_critic = torch.optim.Adam(...)``)."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "step" and not call.args):
            return False
        ctor = self.ctor_value(sf, scope, func.value, call.lineno)
        if ctor is None:
            return False
        value = unwrap_chain(ctor[1])
        return isinstance(value, ast.Call) and (".optim." in f".{dotted(value.func)}." or
                                                 last_name(value.func) in OPTIMIZER_CLASSES)

    def _param_loop(self, sf: SourceFile, scope: ast.AST, node: ast.AST, depth: int) -> str:
        """A loop (or with-block) that writes parameters in place: ``for p in m.parameters(): p.clamp_(...)``."""
        loops = [n for n in ast.walk(node) if isinstance(n, ast.For)]
        for loop in loops:
            names = {t.id for t in ast.walk(loop.target) if isinstance(t, ast.Name)}
            if not names or not self._iterates_params(sf, scope, loop.iter, loop.lineno):
                continue
            for n in ast.walk(loop):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_") \
                        and not n.func.attr.startswith("_") and n.func.attr not in NOT_INPLACE_METHODS \
                        and n.func.attr != "zero_" and base_name(n.func.value) in names \
                        and not _reads_grad_attr(n.func.value):
                    return f"{src(sf, n)} ({sf.rel}:{n.lineno})"
                if isinstance(n, ast.AugAssign) and base_name(n.target) in names and not _reads_grad_attr(n.target):
                    return f"{src(sf, n)} ({sf.rel}:{n.lineno})"
        return ""

    def _iterates_params(self, sf: SourceFile, scope: ast.AST, it: ast.AST, line: int, depth: int = 0) -> bool:
        """Does iterating ``it`` yield parameters (``m.parameters()``, ``zip(...)`` of them, a list built so)?"""
        if depth > 5:
            return False
        for n in ast.walk(it):
            if isinstance(n, ast.Call) and last_name(n.func) in ("parameters", "named_parameters"):
                return True
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and \
                it.func.id in ("zip", "list", "tuple", "enumerate", "reversed", "iter"):
            return any(self._iterates_params(sf, scope, a, line, depth + 1) for a in it.args)
        if isinstance(it, (ast.Name, ast.Attribute)):
            ctor = self.ctor_value(sf, scope, it, line)
            if ctor is not None:
                return self._iterates_params(ctor[0], ctor[0].scope_of(ctor[1]), ctor[1], 10 ** 9, depth + 1)
            if isinstance(it, ast.Name) and isinstance(scope, FUNC_TYPES) and it.id in param_names(scope):
                return self._argument_iterates_params(sf, scope, it.id, depth + 1)
        return False

    def _argument_iterates_params(self, sf: SourceFile, fn: ast.AST, param: str, depth: int) -> bool:
        """``EMA(model.parameters())``: the callers of fn (or of its class, for __init__) pass parameters."""
        cls = sf.parent(fn)
        name = cls.name if isinstance(cls, ast.ClassDef) and fn.name == "__init__" else fn.name
        for rel in self.ctx.search_files((name,))[:50]:
            csf = self.project.source(rel)
            if csf is None:
                continue
            for call in (n for n in ast.walk(csf.tree) if isinstance(n, ast.Call) and last_name(n.func) == name):
                arg = argument_for(fn, call, param) if name == fn.name else _init_argument(fn, call, param)
                if arg is not None and self._iterates_params(csf, csf.scope_of(call), arg, call.lineno, depth):
                    return True
        return False

    def _buffer_read(self, sf: SourceFile, fn: ast.AST, write: ast.AST, attr: str) -> bool:
        """Is self.<attr> used as an operand in fn (or is the written result itself used)?"""
        if isinstance(write, ast.Call) and keyword(write, "out") is not None and not isinstance(sf.parent(write), ast.Expr):
            return True
        inside = {id(x) for x in ast.walk(write)}
        for n in own_nodes(fn):
            if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.value, ast.Name) and \
                    n.value.id == "self" and isinstance(n.ctx, ast.Load) and id(n) not in inside:
                p = sf.parent(n)
                if isinstance(p, ast.Attribute) and p.attr.endswith("_"):
                    continue        # another in-place write
                if isinstance(p, ast.keyword) and p.arg == "out":
                    continue
                return True
        return False

    # -- a tensor that needs no grad (a buffer) written in place while a saved use still needs it ------
    def _leaf_buffer_writes(self) -> None:
        """Without ``output k of`` the tensor has no grad_fn: besides parameters, a buffer or constant
        tensor (``register_buffer``, ``self.x = torch.empty(...)``) written in place in a forward pass."""
        for rel, sf in self.ctx.sources(self.ctx.search_files()):
            for cls in (n for n in ast.walk(sf.tree) if isinstance(n, ast.ClassDef)):
                buffers = _buffer_attrs(cls)
                if not buffers:
                    continue
                for fn in (f for f in cls.body if isinstance(f, FUNC_TYPES)):
                    if fn.name == "__init__":
                        continue
                    base = 0.6 if fn.name in ("forward", "__call__") else 0.4
                    for n in own_nodes_sorted(fn):
                        hit = _buffer_write(n, buffers)
                        if hit is None:
                            continue
                        kind, col, attr = hit
                        # a running statistic only written (read in eval code) is saved by nothing
                        score = base if self._buffer_read(sf, fn, n, attr) else base / 2
                        self.ctx.add(sf, n.lineno, col, kind,
                                     f"self.{attr} is a buffer (it needs no gradient, so the message names no "
                                     f"operation); {fn.name}() overwrites it in place here while an earlier use "
                                     f"of it is still saved for backward.", score)

    def _step_between(self) -> None:
        """Leaf/parameter tensor modified: an optimizer step (or no_grad update) between two backwards."""
        files = self.ctx.search_files(("backward",))
        crash_scopes = set()
        for m in self.ctx.mapped[:1]:
            sf = self.project.source(m.rel_path)
            st = sf.stmt_at(m.line) if sf is not None else None
            if st is not None:
                crash_scopes.add((m.rel_path, id(sf.scope_of(st))))
        for rel, sf in self.ctx.sources(files):
            for scope in sf.scopes():
                bonus = 0.05 if (rel, id(scope)) in crash_scopes else 0.0
                calls = [n for n in sf.own(scope) if isinstance(n, ast.Call)]
                backs = sorted(n.lineno for n in calls if classify_backward(n) is not None
                               and classify_backward(n)[0] == "backward-receiver")
                if not backs:
                    continue
                for c in calls:
                    if not _is_optimizer_step(c):
                        continue
                    recv = src(sf, c.func.value) if isinstance(c.func, ast.Attribute) else "optimizer"
                    if any(b < c.lineno for b in backs) and any(b > c.lineno for b in backs):
                        self.ctx.add(sf, c.lineno, c.col_offset, "optimizer-step-between",
                                  f"{recv}.step() updates the parameters in place between two backward() "
                                  f"calls, and the second backward still needs their old values.", 0.8 + bonus)
                # manual no_grad updates between two backwards
                for w in (n for n in sf.own(scope) if isinstance(n, ast.With)):
                    if not any("no_grad" in dotted(unwrap_call(it.context_expr)) for it in w.items):
                        continue
                    if not (any(b < w.lineno for b in backs) and any(b > w.lineno for b in backs)):
                        continue
                    for n in ast.walk(w):
                        if isinstance(n, ast.AugAssign):
                            self.ctx.add(sf, n.lineno, n.target.col_offset, "inplace-augassign",
                                      "A parameter is updated in place between two backward() calls.", 0.6 + bonus)


def _score(scan: _Scan, origin: _Origin, kind: str, op_fams: Set[str],
           used_before: bool) -> Optional[Tuple[float, bool]]:
    """(score, rebased) of a write of a value of this origin, before penalties; None: no candidate.
    Rebased: the message's op rewrote a value an earlier op had saved, so autograd names that op."""
    fam, fams = scan.fam, origin.fams
    if scan.seed is not None:
        if not any(origin is o for o in scan.seed_origins):
            return None         # targeted run: only the value the anomaly trace names
        return scan.score_match, False
    if fam and fam in fams:
        return scan.score_match, False
    if fam and fam in op_fams and used_before:
        # the in-place op of the message's family rewrote a tensor an earlier op had saved:
        # autograd now calls it "the output of <that op>"
        return scan.score_match, True
    if "param" in fams:
        return None if kind == "inplace-subscript" else (PARAM_SCORE, False)
    if fams & KNOWN_FAMILIES:
        return (OTHER_FAMILY_SCORE if fam in KNOWN_FAMILIES else KNOWN_FAMILY_SCORE), False
    if "?mod" in fams or fam not in KNOWN_FAMILIES:
        return UNRESOLVED_SCORE, False
    return None                 # not recognisably a tensor op: a dict, a list, a path...


def _reason(scan: _Scan, origin: _Origin, target: str, op_fams: Set[str], op_desc: str,
            used_before: bool, rebased: bool) -> str:
    """Why the write of ``target`` is a candidate, in the words the fix site shows."""
    fam, fams, desc = scan.fam, origin.fams, origin.desc
    if rebased:
        return (f"'{target}' ({desc if 'param' in fams else 'the output of ' + desc}) was already used "
                f"by an operation that saved it for backward; {op_desc or 'this call'} then overwrites it "
                f"in place, which is why the message calls it the output of {fam}.")
    if "param" in fams and scan.seed is None:
        return f"The argument '{target}' is modified in place here; the caller may still need it for backward."
    if scan.why:
        return scan.why
    # an int: a line of this file; a str: "file:line" of the caller's file it was handed in from
    origin_at = (origin.line if isinstance(origin.line, str) else f"line {origin.line}") if origin.line \
        else "an earlier line"
    if fam and fams & KNOWN_FAMILIES and fam not in fams and not (fam in op_fams and used_before):
        # what made this value is not what the message names: a weaker candidate, said so
        return (f"'{target}' (the output of {desc}, {origin_at}) is modified in place here; the "
                f"message names the output of {fam}, which this value is not, so it is a weaker "
                f"candidate (it matters only if an operation saved it for backward).")
    return (f"'{target}' (the output of {desc}, {origin_at}) is modified in place "
            f"here, but autograd saved it for backward.")


def _is_view_chain(node: ast.AST) -> bool:
    """x, x[...], x.view(...), x.T... : an expression that aliases its base tensor."""
    while True:
        if isinstance(node, ast.Name):
            return True
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT", "data", "real", "imag"):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in VIEW_METHODS:
            node = node.func.value
        else:
            return False


def _tensorish(value: ast.AST) -> bool:
    """Might value be a tensor produced by an operation (not a number, string, container)?"""
    if isinstance(value, (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp,
                          ast.DictComp, ast.SetComp, ast.GeneratorExp, ast.Lambda, ast.JoinedStr,
                          ast.Compare, ast.BoolOp)):
        return False
    if isinstance(value, ast.Call):
        name = last_name(value.func)
        if name in ("item", "tolist", "float", "int", "len", "range", "enumerate", "zip", "list",
                    "dict", "tuple", "str", "numpy", "size", "dim", "numel", "isinstance"):
            return False
        if name[:1].isupper() and name not in ("T",):
            return False          # constructing a module/object
    return isinstance(value, (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Attribute, ast.IfExp, ast.Name))


def _reads_namespace(sf: SourceFile, value: ast.AST) -> bool:
    """Is value an attribute of a command-line namespace (`lr = args.lr`): a number or a string?"""
    if not (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)):
        return False
    names = getattr(sf, "_parse_args_names", None)
    if names is None:
        names = set()
        for n in ast.walk(sf.tree) if sf.tree is not None else ():
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) \
                    and last_name(n.value.func) in ("parse_args", "parse_known_args"):
                for t in n.targets:
                    names |= {e.id for e in ast.walk(t) if isinstance(e, ast.Name)}
        sf._parse_args_names = names
    return value.value.id in names


def _is_simple_stmt(st: ast.stmt) -> bool:
    return not isinstance(st, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try))


def _is_optimizer_step(call: ast.Call) -> bool:
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "step"):
        return False
    name = last_name(func.value) if isinstance(func.value, (ast.Name, ast.Attribute)) else ""
    if not name or STEP_SKIP_RX.search(name):
        return False
    if name == "scaler" or name.endswith("scaler"):
        return bool(call.args)
    return bool(STEP_OPT_RX.search(name))


def _module_like(func: ast.AST) -> bool:
    """A called object that may be a module: ``act``, ``self.act``, ``self.heads["x"]``, ``self.layers[0]``."""
    while isinstance(func, ast.Subscript):
        func = func.value
    return isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                          and func.value.id == "self")




def _reads_grad_attr(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in ast.walk(node))


def own_nodes_sorted(fn: ast.AST) -> List[ast.AST]:
    return sorted((n for n in own_nodes(fn) if hasattr(n, "lineno")), key=lambda n: (n.lineno, n.col_offset))


def _buffer_attrs(cls: ast.ClassDef) -> Set[str]:
    """Attributes of a class that hold tensors needing no gradient: registered buffers, factory tensors."""
    out: Set[str] = set()
    for n in ast.walk(cls):
        if isinstance(n, ast.Call) and last_name(n.func) == "register_buffer" and n.args:
            name = const_str(n.args[0])
            if name:
                out.add(name)
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and \
                last_name(n.value.func) in TENSOR_FACTORIES and dotted(n.value.func).startswith("torch."):
            rg = keyword(n.value, "requires_grad")
            if rg is not None and is_true(rg.value):
                continue
            for t in n.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    out.add(t.attr)
    return out


def _self_attr(node: ast.AST) -> str:
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return ""


def _buffer_write(n: ast.AST, buffers: Set[str]) -> Optional[Tuple[str, int, str]]:
    """(kind, col, attr) when n writes one of buffers in place."""
    if isinstance(n, ast.Call):
        out = keyword(n, "out")
        if out is not None and _self_attr(out.value) in buffers:
            return "inplace-out", out.col_offset, _self_attr(out.value)
        func = n.func
        if isinstance(func, ast.Attribute) and func.attr.endswith("_") and not func.attr.startswith("_") \
                and func.attr not in NOT_INPLACE_METHODS and _self_attr(func.value) in buffers \
                and _is_view_chain_attr(func.value):
            return "inplace-method", n.col_offset, _self_attr(func.value)
    elif isinstance(n, ast.AugAssign) and _self_attr(n.target) in buffers:
        return "inplace-augassign", n.target.col_offset, _self_attr(n.target)
    elif isinstance(n, ast.Assign):
        for t in n.targets:
            if isinstance(t, ast.Subscript) and _self_attr(t) in buffers:
                return "inplace-subscript", t.col_offset, _self_attr(t)
    return None


def _is_view_chain_attr(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) or _is_view_chain(node)


def _init_argument(init: ast.AST, call: ast.Call, param: str) -> Optional[ast.AST]:
    """The argument ``Cls(...)`` passes for ``param`` of ``Cls.__init__`` (self is not passed)."""
    for kw in call.keywords:
        if kw.arg == param:
            return kw.value
    names = [a.arg for a in init.args.posonlyargs + init.args.args][1:]  # type: ignore[attr-defined]
    if param in names:
        i = names.index(param)
        if i < len(call.args) and not isinstance(call.args[i], ast.Starred):
            return call.args[i]
    return None


def _line_in(sf: SourceFile, other: SourceFile, line):
    """A line of ``sf`` as named from ``other``: "file:line" when that is another file."""
    return f"{sf.rel}:{line}" if isinstance(line, int) and line and other.rel != sf.rel else line
