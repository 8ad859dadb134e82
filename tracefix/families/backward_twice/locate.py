"""backward-twice: the value that carries one backward's graph into another.

The crash line is the second ``backward()``; the fix is where its loss reaches a graph that an
earlier ``backward()`` freed.  Names are followed back from the loss through the assignments of
the loop that holds the crash:

* a value carried over from the previous iteration (``logits, hidden = model(x, hidden)``: the
  recurrent state of truncated BPTT) is detached where it is read (``detach-carried``);
* a value computed once in this iteration and read by an earlier ``backward()``'s loss too (a GAN's
  ``fake`` scored by the discriminator step, then by the generator step) is detached in that
  earlier loss (``detach-shared``), so the second backward is the only one through it;
* a graph computed once before the loop (``emb = encoder(x)`` outside it) is named, unpatched.
* where the loop and its backward() are a framework's (Lightning's ``Trainer.fit``), a method that
  reads ``self.X`` into a module call and assigns the output back (``out, self.hidden = self.gru(x,
  self.hidden)``) carries the state: it is detached where it is read (``detach-carried-attr``).
"""
from __future__ import annotations

import ast
from typing import Iterator, List, Optional, Set, Tuple

from tracefix import vocab
from tracefix.pysource import SourceFile, last_name
from tracefix.record import replace

CARRIED = 0.9
SHARED = 0.9
BEFORE_LOOP = 0.6
MAX_DEPTH = 12       # assignments followed back from one loss
RECURRENT = {"LSTM": 2, "GRU": 1, "RNN": 1, "LSTMCell": 2, "GRUCell": 1, "RNNCell": 1}


def run(ctx) -> None:
    if not ctx.mapped:
        return
    crash = ctx.mapped[0]
    sf = ctx.project.source(crash.rel_path)
    stmt = sf.stmt_at(crash.line) if sf is not None and sf.tree is not None else None
    loss = backward_receiver(stmt) if stmt is not None else None
    loop = _loop_of(sf, stmt) if loss is not None else None
    if loop is None:
        if stmt is not None and loss is None:   # the backward() is a library's: Lightning's closure, a Trainer
            _carried_attributes(ctx)
        return
    body = list(_statements(loop.body))
    _carried(ctx, sf, loop, body, stmt, loss)
    _shared(ctx, sf, body, stmt, loss)


def backward_receiver(stmt: ast.AST) -> Optional[str]:
    """The loss name of ``loss.backward()``, ``scaler.scale(loss).backward()``,
    ``accelerator.backward(loss)``, ``torch.autograd.backward(loss)`` on ``stmt``."""
    for n in ast.walk(stmt):
        if not isinstance(n, ast.Call) or last_name(n.func) != "backward":
            continue
        target = n.func.value if isinstance(n.func, ast.Attribute) and not n.args else (n.args[0] if n.args else None)
        if isinstance(target, ast.Call) and last_name(target.func) == "scale" and target.args:
            target = target.args[0]
        if isinstance(target, ast.BinOp):          # (loss / accum).backward()
            target = target.left
        if isinstance(target, ast.Name):
            return target.id
    return None


def _loop_of(sf: SourceFile, stmt: ast.AST) -> Optional[ast.AST]:
    return next((a for a in sf.ancestors(stmt) if isinstance(a, (ast.For, ast.While, ast.AsyncFor))), None)


def _statements(body) -> Iterator[ast.stmt]:
    """The statements of a loop body, into if/with/try blocks but not into nested loops or defs."""
    for st in body:
        yield st
        if isinstance(st, (ast.If, ast.With, ast.AsyncWith, ast.Try)):
            for part in ("body", "orelse", "finalbody"):
                yield from _statements(getattr(st, part, []) or [])
            for h in getattr(st, "handlers", []):
                yield from _statements(h.body)


def _targets(st: ast.stmt) -> Set[str]:
    out: Set[str] = set()
    targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, (ast.AugAssign, ast.AnnAssign)) else []
    for t in targets:
        for n in ast.walk(t):
            if isinstance(n, ast.Name):
                out.add(n.id)
    return out


def _detached_names(node: ast.AST) -> Set[int]:
    """Names already read detached: ``x.detach()``, ``tuple(h.detach() for h in x)``."""
    out: Set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "detach":
            out.update(id(m) for m in ast.walk(n.func.value) if isinstance(m, ast.Name))
        if isinstance(n, (ast.GeneratorExp, ast.ListComp)) and "detach" in {
                getattr(c.func, "attr", "") for c in ast.walk(n.elt) if isinstance(c, ast.Call)}:
            out.update(id(m) for g in n.generators for m in ast.walk(g.iter) if isinstance(m, ast.Name))
    return out


def _reads(st: ast.stmt) -> List[ast.Name]:
    """The names a statement's value reads, less those it reads detached."""
    value = getattr(st, "value", None)
    skip = _detached_names(value) if value is not None else set()
    found = [n for n in ast.walk(value) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
             and id(n) not in skip] if value else []
    if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name):
        found.append(ast.Name(id=st.target.id, ctx=ast.Load(), lineno=st.lineno, col_offset=st.col_offset))
    return found


def chain(body: List[ast.stmt], name: str, before: int) -> List[ast.stmt]:
    """The assignments in ``body`` (before line ``before``) that the value of ``name`` was made from."""
    out: List[ast.stmt] = []
    todo = [(name, before)]
    while todo and len(out) < MAX_DEPTH:
        nm, line = todo.pop()
        defs = [st for st in body if st.lineno < line and nm in _targets(st)]
        if not defs:
            continue
        st = defs[-1]
        if st in out:
            continue
        out.append(st)
        todo.extend((r.id, st.lineno + (1 if r.id in _targets(st) and isinstance(st, ast.AugAssign) else 0))
                    for r in _reads(st) if r.id != nm or isinstance(st, ast.AugAssign))
    return out


def _carried(ctx, sf: SourceFile, loop: ast.AST, body: List[ast.stmt], crash: ast.stmt, loss: str) -> None:
    """Values read by the loss's chain before this iteration assigns them, and assigned again in
    the loop: the previous iteration's graph rides along."""
    for st in chain(body, loss, crash.lineno):
        for r in _reads(st):
            if r.id == loss or any(d.lineno < st.lineno and r.id in _targets(d) for d in body):
                continue
            if not any(r.id in _targets(d) for d in body if d.lineno >= st.lineno):
                before = _defined_before(sf, loop, r.id)
                if before is not None and _graph_value(before.value):
                    ctx.add(sf, before.lineno, before.col_offset, "graph-before-loop",
                            f"`{r.id}` is computed once, before the loop, and every iteration's backward() goes "
                            f"through it: the first one frees its graph. Compute it inside the loop.", BEFORE_LOOP)
                continue
            if isinstance(st, ast.AugAssign):
                continue            # a running total: not a recurrent state
            kind, write = _detached(ctx, sf, loop, r.id)
            ctx.add(sf, r.lineno, r.col_offset, kind,
                    f"`{r.id}` is carried over from the previous iteration with that iteration's graph, which its "
                    f"backward() freed; detach it where it is read: {write}.", CARRIED)
            ctx.sites[-1] = _with_write(ctx.sites[-1], write)


def _carried_attributes(ctx) -> None:
    """A method that reads ``self.X`` into a module call and assigns that call's output back to
    ``self.X`` (``out, self.hidden = self.gru(x, self.hidden)``): the state rides from one
    framework step to the next with the previous step's graph."""
    for _rel, sf in ctx.sources(ctx.search_files(("self.",))):
        if sf.tree is None:
            continue
        for fn in sf.functions():
            for st in ast.walk(fn):
                if not isinstance(st, ast.Assign) or not _model_output(sf, st.value):
                    continue
                assigned = {t.attr for tg in st.targets for t in ast.walk(tg) if _self_attr(t)}
                detached = {id(a) for c in ast.walk(st.value) if isinstance(c, ast.Call) and last_name(c.func) == "detach"
                            and isinstance(c.func, ast.Attribute) for a in ast.walk(c.func.value)}
                for r in ast.walk(st.value):
                    if _self_attr(r) and r.attr in assigned and id(r) not in detached:
                        kind, write = _attribute_detached(sf, fn, st.value, r.attr)
                        ctx.add(sf, r.lineno, r.col_offset, kind,
                                f"`self.{r.attr}` is read by {last_name(st.value.func)}() and assigned its output "
                                f"again in {fn.name}(): each step carries the previous step's graph, which that "
                                f"step's backward() freed; detach it where it is read: {write}.", CARRIED)
                        ctx.sites[-1] = _with_write(ctx.sites[-1], write)


def _self_attr(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
        and isinstance(node.ctx, (ast.Load, ast.Store))


def _attribute_detached(sf: SourceFile, fn: ast.AST, call: ast.Call, attr: str) -> Tuple[str, str]:
    """``self.X.detach()`` for a GRU's/RNN's state, a tuple of detached parts for an LSTM's (h, c),
    decided by the ``nn.*`` module the class builds as the called attribute."""
    name = f"self.{attr}"
    callee = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    built = [last_name(n.value.func) for n in ast.walk(sf.tree) if isinstance(n, ast.Assign)
             and isinstance(n.value, ast.Call) and any(_self_attr(t) and t.attr == callee for t in n.targets)]
    parts = {RECURRENT.get(b) for b in built}
    kind = "detach-carried-attr" if parts in ({1}, {2}) else "detach-carried-attr-unsure"
    write = f"tuple(h.detach() for h in {name})" if parts == {2} else f"{name}.detach()"
    # a state that starts as None (the module makes the first one) stays None on the first step
    starts_none = any(isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is None
                      and any(_self_attr(t) and t.attr == attr for t in n.targets) for n in ast.walk(sf.tree))
    return kind, (f"None if {name} is None else {write}" if starts_none else write)


def _detached(ctx, sf: SourceFile, loop: ast.AST, name: str) -> Tuple[str, str]:
    """How to detach the carried state ``name``: a tensor, or an LSTM's (h, c) pair."""
    helper = _detach_helper(ctx, sf)
    if helper is not None:      # the project's own (repackage_hidden in pytorch/examples)
        return "detach-carried", f"{helper}({name})"
    parts = _state_parts(ctx, sf, loop, name)
    if parts == 1:
        return "detach-carried", f"{name}.detach()"
    if parts == 2:
        return "detach-carried", f"tuple(h.detach() for h in {name})"
    return "detach-carried-unsure", f"{name}.detach()"


def _detach_helper(ctx, sf: SourceFile) -> Optional[str]:
    """A module-level function of the crash file that returns its one argument detached (each
    part of a tuple too): ``def repackage_hidden(h): ... return h.detach() ... return tuple(...)``."""
    for node in sf.tree.body:
        if not isinstance(node, ast.FunctionDef) or len(node.args.args) != 1:
            continue
        arg = node.args.args[0].arg
        rets = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None]
        detaches = any(isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "detach"
                       and isinstance(v.func.value, ast.Name) and v.func.value.id == arg for v in rets)
        recurses = any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == node.name
                       for v in rets for c in ast.walk(v))
        if detaches and (recurses or len(rets) == 1):
            return node.name
    return None


def _state_parts(ctx, sf: SourceFile, loop: ast.AST, name: str) -> Optional[int]:
    """1 for a tensor, 2 for a pair, None when the code does not say."""
    init = _defined_before(sf, loop, name)
    value = init.value if init is not None else None
    if isinstance(value, ast.Tuple):
        return len(value.elts)
    if isinstance(value, ast.Call):
        fn = last_name(value.func)
        if fn in vocab.TENSOR_FACTORIES:
            return 1
        for rel in ctx.search_files((fn,)):
            other = ctx.project.source(rel)
            for node in ast.walk(other.tree) if other is not None and other.tree is not None else ():
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn:
                    rets = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None]
                    if rets and all(isinstance(v, ast.Tuple) and len(v.elts) == 2 for v in rets):
                        return 2
                    if rets and all(isinstance(v, ast.Call) and last_name(v.func) in vocab.TENSOR_FACTORIES for v in rets):
                        return 1
    if value is None:        # started as None, say: the recurrent module decides
        kinds = {RECURRENT[last_name(n.func)] for rel in ctx.crash_closure() for n in _calls(ctx, rel)
                 if last_name(n.func) in RECURRENT}
        return kinds.pop() if len(kinds) == 1 else None
    return None


def _calls(ctx, rel: str):
    src = ctx.project.source(rel)
    return [n for n in ast.walk(src.tree) if isinstance(n, ast.Call)] if src is not None and src.tree is not None else []


def _defined_before(sf: SourceFile, loop: ast.AST, name: str) -> Optional[ast.Assign]:
    scope = sf.scope_of(loop)
    found = None
    for node in sf.own(scope):
        if (isinstance(node, ast.Assign) and node.lineno < loop.lineno and name in _targets(node)
                and (found is None or node.lineno > found.lineno)):
            found = node
    return found


def _graph_value(value: ast.AST) -> bool:
    """A model's or an op's output (not a factory, a literal, data loading)."""
    if not isinstance(value, ast.Call):
        return False
    fn = last_name(value.func)
    return fn not in vocab.TENSOR_FACTORIES and not fn[:1].isupper() and fn not in (
        "load", "iter", "next", "range", "list", "len", "enumerate", "zip", "open", "to", "cuda", "cpu")


def _shared(ctx, sf: SourceFile, body: List[ast.stmt], crash: ast.stmt, loss: str) -> None:
    """An earlier backward() in this iteration whose loss reads a value the crashing loss reads too."""
    mine = chain(body, loss, crash.lineno)
    for st in body:
        if st.lineno >= crash.lineno:
            break
        first = backward_receiver(st)
        if first is None or first == loss or _retains(st):
            continue
        theirs = chain(body, first, st.lineno)
        # only graph values: a label or noise tensor from a factory is read by both and frees nothing
        shared = [d for d in theirs if d in mine and _model_output(sf, getattr(d, "value", None))]
        for d in shared:
            for name in _targets(d):
                for use in theirs:
                    if use is d or use.lineno <= d.lineno:
                        continue
                    for r in _reads(use):
                        if r.id != name:
                            continue
                        safe = _stepped_and_zeroed(body, st.lineno, crash.lineno)
                        ctx.add(sf, r.lineno, r.col_offset, "detach-shared" if safe else "detach-shared-unsure",
                                f"`{name}` feeds both `{first}` (backward() at line {st.lineno}) and `{loss}`: the "
                                f"first backward() frees the graph that made `{name}`. Detach it in `{first}`'s "
                                f"computation so that only `{loss}` backpropagates into what made it (a GAN's "
                                "discriminator step scores fake.detach()).", SHARED)
                        ctx.sites[-1] = _with_write(ctx.sites[-1], f"{name}.detach()")


def _model_output(sf: SourceFile, value: Optional[ast.AST]) -> bool:
    """Is ``value`` a module's output: ``netG(z)`` for a ``netG`` that is a module here (built by a
    class or ``nn.*`` call, or whose ``.parameters()`` an optimizer takes), ``self.encoder(x)``?"""
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
        return True
    if not isinstance(f, ast.Name):
        return False
    if f"{f.id}.parameters(" in sf.text:
        return True
    for node in ast.walk(sf.tree):
        if not isinstance(node, ast.Assign):
            continue
        for t in node.targets:
            pairs = (zip(t.elts, node.value.elts) if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple)
                     and len(t.elts) == len(node.value.elts) else [(t, node.value)])
            for tt, vv in pairs:
                if isinstance(tt, ast.Name) and tt.id == f.id and isinstance(vv, ast.Call):
                    name = last_name(vv.func)
                    if name[:1].isupper() or (isinstance(vv.func, ast.Attribute) and
                                              isinstance(vv.func.value, ast.Name) and vv.func.value.id == "nn"):
                        return True
    return False


def _retains(st: ast.stmt) -> bool:
    return any(isinstance(n, ast.keyword) and n.arg == "retain_graph" for n in ast.walk(st))


def _stepped_and_zeroed(body: List[ast.stmt], first: int, second: int) -> bool:
    """An optimizer step after the first backward, then zeroed gradients before the second: the
    first loss's gradients in the producer are discarded anyway, so detaching changes no update."""
    between = [st for st in body if first < st.lineno < second]
    names = [[last_name(n.func) for n in ast.walk(st) if isinstance(n, ast.Call)] for st in between]
    step = next((i for i, ns in enumerate(names) if "step" in ns), None)
    return step is not None and any("zero_grad" in ns for ns in names[step + 1:])


def _with_write(site, write: str):
    return replace(site, write=write)
