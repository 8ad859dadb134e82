"""inplace-modification: a tensor autograd saved was modified in place before backward().

With ``output k of XBackward0`` in the message: the values produced by ops of that family (or by
modules whose forward ends in one) that are then written in place (augmented assignment, ``x.op_()``,
``x[i] = v``, ``inplace=True``, ``out=``); with an anomaly-mode forward trace, the write that follows the
traced line.  Without a node (a leaf/parameter): an optimizer step or a no_grad update between two
backward() calls.
"""
from __future__ import annotations

import ast
import re
from typing import Dict, Optional, Set, Tuple

from tracefix.locator.ops import BINOP_FAMILY, KNOWN_FAMILIES, op_family
from tracefix.locator.tracing import (FUNC_TYPES, MAX_DEPTH, Tracer, bound_names, classify_backward, is_true,
                                      method, param_names, returns, src, unwrap_call, unwrap_chain, walk_stmt)
from tracefix.pysource import SourceFile, base_name, dotted, keyword, last_name

STEP_SKIP_RX = re.compile(r"sched|lr_?|warmup|trainer|env|progress|pbar|bar", re.I)
STEP_OPT_RX = re.compile(r"opt|sgd|adam|solver|scaler", re.I)
NON_INPLACE_METHODS = {"requires_grad_", "share_memory_", "retain_grad_", "record_stream_",
                       "pin_memory_", "apply_"}
VIEW_METHODS = {"view", "view_as", "reshape", "transpose", "t", "T", "permute", "expand",
                "expand_as", "narrow", "select", "unsqueeze", "squeeze", "flatten", "unflatten",
                "chunk", "split", "unbind", "diagonal", "as_strided", "movedim", "mT", "data",
                "detach", "contiguous", "swapaxes", "unfold", "real", "imag"}


def run(ctx) -> None:
    _Inplace(ctx).run()


class _Inplace(Tracer):
    def run(self) -> None:
        node = self._node_name()
        if not node:
            self._step_between()
            return
        fam = op_family(node)
        if self.ctx.anomaly_mapped and self._inplace_from_anomaly(fam):
            return
        files = self.ctx.search_files()
        seen: Set[str] = set()
        for rel in files:
            if rel in seen:
                continue
            seen.add(rel)
            if self.ctx.over_budget():
                break
            sf = self.project.source(rel)
            if sf is None:
                continue
            for scope in sf.scopes():
                self._scan_inplace(sf, scope, fam)

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
        if not isinstance(expr, ast.Call):
            return set()
        func = expr.func
        name = last_name(func)
        fams: Set[str] = set()
        if isinstance(func, ast.Attribute) and name in VIEW_METHODS:
            return {"view"}
        module_like = isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and
                                                      isinstance(func.value, ast.Name) and func.value.id == "self")
        if module_like:
            ctor = self.ctor_value(sf, scope, func, line)
            if ctor is not None:
                fams |= self._module_families(ctor[0], ctor[1], depth + 1)
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
                return self._module_families(sf, last, depth + 1)
            return set()
        if name in ("Identity", "ModuleList", "ModuleDict"):
            return set()
        cls = self.class_of_value(sf, value)
        if cls is not None:
            csf, cdef = cls
            fwd = method(cdef, "forward") or method(cdef, "__call__")
            fams: Set[str] = set()
            if fwd is not None:
                for ret in returns(fwd):
                    fams |= self._expr_families(csf, fwd, ret.value, ret.lineno + 1, depth + 1)
            return fams
        if name and name[0].isupper():
            return {op_family(name)}
        return set()

    def _inplace_module(self, sf: SourceFile, scope: ast.AST, call: ast.Call, line: int
                        ) -> Optional[Tuple[SourceFile, ast.keyword]]:
        """The inplace=True keyword of a module (or functional call) that call applies in place."""
        kw = keyword(call, "inplace")
        if kw is not None:
            return (sf, kw) if is_true(kw.value) else None
        func = call.func
        if isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                          and func.value.id == "self"):
            ctor = self.ctor_value(sf, scope, func, line)
            if ctor is not None:
                value = unwrap_chain(ctor[1])
                if isinstance(value, ast.Call):
                    if last_name(value.func) == "Sequential" and value.args:
                        value = unwrap_chain(value.args[0])
                    if isinstance(value, ast.Call):
                        kw = keyword(value, "inplace")
                        if kw is not None and is_true(kw.value):
                            return ctor[0], kw
        return None

    def _scan_inplace(self, sf: SourceFile, scope: ast.AST, fam: str,
                      seed: Optional[Dict[str, Tuple[Set[str], int]]] = None, start: int = 0,
                      score_match: float = 0.8, why: str = "") -> int:
        """Track values produced by ops in scope and report in-place modifications of them."""
        tracked: Dict[str, Tuple[Set[str], int]] = dict(seed or {})
        seed_origins = list((seed or {}).values())
        if seed is None and isinstance(scope, FUNC_TYPES) and scope.name == "forward":
            for a in param_names(scope):
                if a not in ("self", "cls"):
                    tracked[a] = ({"param"}, scope.lineno)
        stmts = sorted((n for n in sf.own(scope) if isinstance(n, ast.stmt)
                        and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                        and _is_simple_stmt(n) and n.lineno > start),
                       key=lambda n: (n.lineno, n.col_offset))
        hits_per_origin: Dict[int, int] = {}
        count = 0

        def report(origin: Tuple[Set[str], int], line: int, col: int, kind: str, target: str,
                   where: Optional[Tuple[SourceFile, ast.keyword]] = None) -> None:
            nonlocal count
            fams, origin_line = origin
            if seed is not None:
                if not any(origin is o for o in seed_origins):
                    return          # targeted run: only the value the anomaly trace names
                score = score_match
            elif "param" in fams:
                if kind == "inplace-subscript":
                    return
                score = 0.25
            elif fam and fam in fams:
                score = score_match
            elif fams & KNOWN_FAMILIES:
                score = 0.3 if fam in KNOWN_FAMILIES else 0.5
            elif "?mod" in fams or fam not in KNOWN_FAMILIES:
                score = 0.2        # produced by something we could not resolve
            else:
                return             # not recognisably a tensor op: a dict, a list, a path...
            n = hits_per_origin.get(origin_line, 0)
            hits_per_origin[origin_line] = n + 1
            score -= 0.05 * n
            produced = ", ".join(sorted(f for f in fams if f != "param")) or "an earlier operation"
            reason = why or (f"'{target}' (the output of {produced}, line {origin_line}) is modified in place "
                             f"here, but autograd saved it for backward.")
            if "param" in fams and seed is None:
                reason = f"The argument '{target}' is modified in place here; the caller may still need it for backward."
            if where is not None:
                wsf, kw = where
                self.ctx.add(wsf, kw.lineno, kw.col_offset, "inplace-kwarg", reason, score)
            else:
                self.ctx.add(sf, line, col, kind, reason, score)
            count += 1

        for st in stmts:
            # in-place operations in this statement
            for node in walk_stmt(st):
                if isinstance(node, ast.AugAssign):
                    b = base_name(node.target)
                    if b in tracked and isinstance(node.target, (ast.Name, ast.Subscript)):
                        report(tracked[b], node.lineno, node.target.col_offset, "inplace-augassign", b)
                elif isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Subscript) and base_name(t) in tracked:
                            report(tracked[base_name(t)], node.lineno, t.col_offset, "inplace-subscript", base_name(t))
                elif isinstance(node, ast.Call):
                    func = node.func
                    name = last_name(func)
                    if isinstance(func, ast.Attribute) and name.endswith("_") and not name.startswith("_") \
                            and name not in NON_INPLACE_METHODS:
                        b = base_name(func.value)
                        if b in tracked and _is_view_chain(func.value):
                            report(tracked[b], node.lineno, node.col_offset, "inplace-method", b)
                            continue
                    if name.endswith("_") and not name.startswith("_") and name not in NON_INPLACE_METHODS \
                            and node.args:
                        b = base_name(node.args[0])
                        if b in tracked and _is_view_chain(node.args[0]) and not (
                                isinstance(func, ast.Attribute) and base_name(func.value) in tracked):
                            report(tracked[b], node.lineno, node.col_offset, "inplace-method", b)
                            continue
                    out_kw = keyword(node, "out")
                    if out_kw is not None and base_name(out_kw.value) in tracked:
                        b = base_name(out_kw.value)
                        report(tracked[b], node.lineno, out_kw.col_offset, "inplace-out", b)
                        continue
                    if node.args and base_name(node.args[0]) in tracked and _is_view_chain(node.args[0]):
                        where = self._inplace_module(sf, scope, node, node.lineno)
                        if where is not None:
                            b = base_name(node.args[0])
                            report(tracked[b], node.lineno, where[1].col_offset, "inplace-kwarg", b,
                                   where if where[0] is not sf or where[1].lineno != node.lineno else None)
            # bindings made by this statement
            if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                value = st.value
                alias_of = base_name(value) if _is_view_chain(value) else ""
                if alias_of and alias_of in tracked:
                    origin = tracked[alias_of]
                else:
                    origin = None
                    if _tensorish(value):
                        fams = self._expr_families(sf, scope, value, st.lineno)
                        if not fams and isinstance(value, ast.Call) and (
                                isinstance(value.func, ast.Name) or dotted(value.func).startswith("self.")):
                            fams = {"?mod"}
                        origin = (fams or {"?"}, st.lineno)
                for t in targets:
                    names = [t] if isinstance(t, ast.Name) else (
                        [e for e in t.elts if isinstance(e, ast.Name)] if isinstance(t, (ast.Tuple, ast.List)) else [])
                    for nm in names:
                        if origin is not None:
                            tracked[nm.id] = origin
                        else:
                            tracked.pop(nm.id, None)
            elif isinstance(st, (ast.For, ast.With)):
                pass
        return count

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
                            self.ctx.add(where[0], where[1].lineno, where[1].col_offset, "inplace-kwarg", why, 0.95)
                names = bound_names(cur_stmt)
                if names:
                    seed = {n: ({fam or "?"}, cur_stmt.lineno) for n in names}
                    self._scan_inplace(cur_sf, scope, fam, seed=seed, start=cur_stmt.lineno,
                                       score_match=0.95, why=why)
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
            self.ctx.notes.append(f"The anomaly-mode trace points at {m.rel_path}:{m.line}, but no in-place "
                              f"change of that value was found; other candidates are listed.")
            return False
        return False

    def _step_between(self) -> None:
        """Leaf/parameter tensor modified: an optimizer step (or no_grad update) between two backwards."""
        files = self.ctx.search_files(("backward",))
        crash_scopes = set()
        for m in self.ctx.mapped[:1]:
            sf = self.project.source(m.rel_path)
            st = sf.stmt_at(m.line) if sf is not None else None
            if st is not None:
                crash_scopes.add((m.rel_path, id(sf.scope_of(st))))
        for rel in files:
            if self.ctx.over_budget():
                break
            sf = self.project.source(rel)
            if sf is None:
                continue
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
