"""no-grad-fn: why the value ``backward()`` got was never recorded by autograd.

From the backward call's receiver the loss is sliced back through the statements that compute it
(assignments in its scope, and the returns of the project functions and modules they call, two
levels deep).  On that path: a ``with torch.no_grad()`` / ``inference_mode()`` /
``set_grad_enabled(False)`` block, a function decorated with one of them, a ``.detach()`` or
``.data``, a ``checkpoint(..., use_reentrant=True)``.  A traceback frame that runs under such a
scope (the whole step) counts too.  With none found, parameters frozen by ``requires_grad =
False`` are named (no patch).
"""
from __future__ import annotations

import ast
from typing import List, Optional, Set, Tuple

from tracefix.locator.tracing import ValueTracer, classify_backward, returns
from tracefix.paths import is_library_path
from tracefix.pysource import SourceFile, keyword, last_name
from tracefix.vocab import NO_GRAD_HOOKS

BLOCK = 0.9           # the loss is computed inside a no_grad block
DECORATOR = 0.9       # ... by a function decorated with @torch.no_grad()
DETACH = 0.85         # a .detach() / .data on the loss path
REENTRANT = 0.8       # checkpoint(use_reentrant=True) on the loss path
FROZEN = 0.5          # every parameter frozen: named only
MAX_CHAIN = 40
DISABLING = ("no_grad", "inference_mode")


def disables_grad(node: ast.AST) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)`` (also bare)."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        return last_name(node) in DISABLING
    if not isinstance(node, ast.Call):
        return False
    name = last_name(node.func)
    if name in DISABLING:
        mode = node.args[0] if node.args else (keyword(node, "mode").value if keyword(node, "mode") else None)
        return not (isinstance(mode, ast.Constant) and mode.value is False)
    if name == "set_grad_enabled" and node.args:
        return isinstance(node.args[0], ast.Constant) and node.args[0].value is False
    return False


def disabling_with(sf: SourceFile, node: ast.AST) -> Optional[ast.With]:
    """The innermost ``with`` around ``node`` (in its function) that turns gradients off."""
    for up in sf.ancestors(node):
        if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return None
        if isinstance(up, ast.With) and any(disables_grad(i.context_expr) for i in up.items):
            return up
    return None


def disabling_decorator(fn: ast.AST) -> Optional[ast.AST]:
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return next((d for d in fn.decorator_list if disables_grad(d)), None)


def run(ctx) -> None:
    found = ctx.statement()
    if found is None:
        return
    crash, sf, stmt = found
    receiver = next((c[1] for c in map(classify_backward, (n for n in ast.walk(stmt) if isinstance(n, ast.Call)))
                     if c is not None), None)
    tracer = ValueTracer(ctx)
    found = _Finder(ctx, tracer)
    if receiver is None:
        frames = ctx.diag.traceback.frames
        if frames and is_library_path(frames[-1].path):
            _framework_step(ctx, found)     # the backward() is the framework's (Lightning, a Trainer)
        return
    for m in ctx.mapped:                       # the step itself runs with gradients off
        msf = ctx.project.source(m.rel_path)
        mstmt = msf.stmt_at(m.line) if msf is not None and msf.tree is not None else None
        if mstmt is not None:
            found.scope_of_step(msf, mstmt)
    chain = found.chain(sf, sf.scope_of(stmt), receiver, crash.line, 0)
    for csf, cstmt in chain:
        found.statement(csf, cstmt, {id(s) for _f, s in chain})
    if not ctx.sites:
        found.frozen()


def _framework_step(ctx, found: "_Finder") -> None:
    """The loss a framework backpropagates comes from the project's training_step/compute_loss:
    follow each one's returned values, as for a backward() of the project's own."""
    for sf, fn in ctx.loss_functions():
        deco = disabling_decorator(fn)
        if deco is not None:
            found._decorator(sf, fn, deco, f"`{fn.name}`, whose returned loss the framework backpropagates, is "
                             f"decorated with `@{sf.segment(deco)}`: nothing it computes is recorded.")
        for r in returns(fn)[:3]:
            if r.value is None or isinstance(r.value, ast.Constant):
                continue
            chain = [(sf, r)] + found.chain(sf, fn, r.value, r.lineno, 0)
            for csf, cstmt in chain:
                found.statement(csf, cstmt, {id(s) for _f, s in chain})


class _Finder:
    def __init__(self, ctx, tracer: ValueTracer) -> None:
        self.ctx, self.tracer = ctx, tracer
        self.seen: Set[Tuple[str, int]] = set()

    def add(self, sf: SourceFile, node: ast.AST, kind: str, reason: str, score: float) -> None:
        if (sf.rel, node.lineno) not in self.seen:
            self.seen.add((sf.rel, node.lineno))
            self.ctx.add(sf, node.lineno, node.col_offset, kind, reason, score)

    def scope_of_step(self, sf: SourceFile, stmt: ast.AST) -> None:
        w = disabling_with(sf, stmt)
        if w is not None:
            self.add(sf, w, "nograd-block-mixed", f"the training step at {sf.rel}:{stmt.lineno} runs inside "
                     f"`{sf.segment(w.items[0].context_expr)}`: nothing in it is recorded for backward().", BLOCK)
        fn = sf.scope_of(stmt)
        deco = disabling_decorator(fn)
        if deco is not None:
            self._decorator(sf, fn, deco, f"`{fn.name}` (on the traceback) is decorated with "
                            f"`@{sf.segment(deco)}`: nothing it computes is recorded for backward().")

    def chain(self, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int, depth: int
              ) -> List[Tuple[SourceFile, ast.stmt]]:
        """The statements that compute ``expr`` (read at ``line``), in ``scope`` and two levels of callees."""
        out: List[Tuple[SourceFile, ast.stmt]] = []
        todo = [(n.id, line) for n in ast.walk(expr) if isinstance(n, ast.Name)]
        done: Set[str] = set()
        self._calls(sf, scope, expr, line, depth, out)
        while todo and len(out) < MAX_CHAIN:
            name, read_at = todo.pop()
            if name in done:
                continue
            done.add(name)
            a = self.tracer.last_assign(sf, scope, name, read_at)
            if a is None or any(s is a for _f, s in out):
                continue
            out.append((sf, a))
            value = getattr(a, "value", None)
            if value is not None:
                todo += [(n.id, a.lineno) for n in ast.walk(value) if isinstance(n, ast.Name)]
                self._calls(sf, sf.scope_of(a), value, a.lineno, depth, out)
        return out

    def _calls(self, sf, scope, expr, line, depth, out) -> None:
        """Into the project functions and modules ``expr`` calls: their returns' chains."""
        if depth >= 2:
            return
        for call in (n for n in ast.walk(expr) if isinstance(n, ast.Call)):
            for fsf, fn in self._callees(sf, scope, call, line):
                deco = disabling_decorator(fn)
                if deco is not None:
                    self._decorator(fsf, fn, deco, f"`{fn.name}`, called at {sf.rel}:{call.lineno} to compute the "
                                    f"loss, is decorated with `@{fsf.segment(deco)}`: nothing it returns is recorded "
                                    "for backward().")
                for r in returns(fn)[:3]:
                    if r.value is not None:
                        out.append((fsf, r))
                        out += self.chain(fsf, fn, r.value, r.lineno, depth + 1)

    def _callees(self, sf, scope, call, line) -> List[Tuple[SourceFile, ast.AST]]:
        found = self.tracer.resolve_def(sf, call.func) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
        if found is not None and isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
            return [found]
        return [(f, m) for f, m in self.tracer.module_call(sf, scope, call.func, line)]

    def statement(self, sf: SourceFile, stmt: ast.stmt, chain_ids: Set[int]) -> None:
        w = disabling_with(sf, stmt)
        if w is not None:
            inside = [s for s in w.body]
            mixed = [s for s in inside if id(s) not in chain_ids]
            kind = "nograd-block-mixed" if mixed else "nograd-block"
            also = (f"; the block also runs {sf.rel}:{mixed[0].lineno}, which is not on the loss's path and would "
                    "then run with gradients on") if mixed else ""
            on_path = [s for s in inside if id(s) in chain_ids] or [stmt]
            said = ", ".join(f"`{sf.brief(s)}`" for s in on_path[:3]) + (", ..." if len(on_path) > 3 else "")
            self.add(sf, w, kind, f"{said} ({sf.rel}:{on_path[0].lineno}), on the loss's path, "
                     f"{'runs' if len(on_path) == 1 else 'run'} inside `with {sf.segment(w.items[0].context_expr)}:`, "
                     f"so autograd records nothing{also}.", BLOCK)
        value = getattr(stmt, "value", None)
        if value is None:
            return
        for node in ast.walk(value):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "detach", "detach_") and not node.args:
                self.add(sf, node.func, "detach-in-loss",
                         f"`{sf.segment(node)}` cuts the loss off from the parameters (it is on the loss's path).",
                         DETACH)
            elif isinstance(node, ast.Attribute) and node.attr == "data" and isinstance(node.ctx, ast.Load):
                self.add(sf, node, "detach-in-loss",
                         f"`{sf.segment(node)}` reads the values without their history (it is on the loss's path).",
                         DETACH)
            elif isinstance(node, ast.Call) and last_name(node.func) == "checkpoint":
                kw = keyword(node, "use_reentrant")
                if kw is not None and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                    self.add(sf, kw.value, "reentrant-checkpoint",
                             "checkpoint(use_reentrant=True) records nothing when none of its inputs requires grad "
                             "(frozen embeddings, a detached input); use_reentrant=False records through the "
                             "parameters.", REENTRANT)

    def _decorator(self, sf: SourceFile, fn: ast.AST, deco: ast.AST, reason: str) -> None:
        others = self.tracer.call_sites(sf, fn)
        bare = [f"{csf.rel}:{call.lineno}" for csf, call in others
                if disabling_with(csf, call) is None and disabling_decorator(csf.scope_of(call)) is None
                and getattr(csf.scope_of(call), "name", "") not in NO_GRAD_HOOKS]
        if len(bare) > 1:
            kind = "nograd-decorator-shared"
            reason += (f" It is also called outside no_grad ({', '.join(bare[1:3])}): those calls would then "
                       "record a graph too (the same values, more memory).")
        else:
            kind = "nograd-decorator"
        self.add(sf, deco, kind, reason, DECORATOR)

    def frozen(self) -> None:
        """No cut found: every parameter frozen (``p.requires_grad = False`` in a loop)?"""
        for _rel, sf in self.ctx.sources(self.ctx.search_files(("requires_grad",))):
            for node in (n for n in ast.walk(sf.tree) if sf.tree is not None and isinstance(n, ast.For)):
                for st in ast.walk(node):
                    if _freezes(st) and "parameters" in (sf.segment(node.iter) or ""):
                        self.add(sf, st, "frozen-params",
                                 f"`{sf.brief(st)}` freezes the parameters that `{sf.segment(node.iter)}` yields: "
                                 "if they are all of them, nothing the loss depends on requires grad.", FROZEN)
                        return


def _freezes(st: ast.AST) -> bool:
    if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Attribute):
        return st.targets[0].attr == "requires_grad" and isinstance(st.value, ast.Constant) and st.value.value is False
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and last_name(st.value.func) == "requires_grad_":
        a = st.value.args
        return bool(a) and isinstance(a[0], ast.Constant) and a[0].value is False
    return False
