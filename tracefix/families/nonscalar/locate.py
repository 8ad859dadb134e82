"""nonscalar-backward: backward() / autograd.grad() on a tensor that is not a scalar.

Fix sites, best first: a criterion built with reduction='none' whose per-sample values nothing else
uses; a loss function (compute_loss, training_step...) that returns an unreduced value; the
assignment of a loss that is later used as a number; the receiver of backward() itself.
"""
from __future__ import annotations

import ast
from typing import List, Optional, Tuple

from tracefix.locator.base import FIXED_SINCE
from tracefix.locator.tracing import (FUNC_TYPES, MAX_DEPTH, ValueTracer, ACCEL_NAMES, classify_backward, contains,
                                      func_name, is_param, returns, src, unwrap_chain, value_col)
from tracefix.pysource import SourceFile, const_str, dotted, keyword, last_name
from tracefix.record import replace
from tracefix.vocab import LOSS_FN_NAMES

FUNCTIONAL_LOSSES = {"cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "nll_loss",
                     "kl_div", "poisson_nll_loss", "gaussian_nll_loss", "ctc_loss", "mse_loss", "l1_loss",
                     "smooth_l1_loss", "huber_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
                     "multi_margin_loss", "multilabel_margin_loss", "margin_ranking_loss", "hinge_embedding_loss",
                     "cosine_embedding_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss"}
REDUCED_MODES = {"mean", "sum", "batchmean"}
SCALAR_KEEP_METHODS = {"float", "double", "half", "bfloat16", "to", "cuda", "cpu", "clone", "contiguous",
                       "squeeze", "type"}


def run(ctx) -> None:
    _Nonscalar(ctx).run()


class _Nonscalar(ValueTracer):   # (call_sites: the other callers of a loss function)
    def run(self) -> None:
        info = None
        fi = 0
        if self.ctx.mapped:
            m = self.ctx.mapped[0]
            sf = self.project.source(m.rel_path)
            if sf is not None:
                info = self._backward_call(sf, m.line)
        if info is None:
            if not self.ctx.diag.traceback.frames:
                self._searched_backwards()
            self._per_sample_returns()
            return
        self._backward(sf, info, fi)

    def _searched_backwards(self) -> None:
        """A bare message: every backward() in the project whose loss provably comes from a
        reduction='none' criterion or an unreduced loss function (only those: a backward() of
        unknown provenance is no evidence)."""
        for _rel, sf in self.ctx.sources(self.ctx.project_files((".backward(",))):
            if sf.tree is None:
                continue
            lines = sorted({n.lineno for n in ast.walk(sf.tree) if isinstance(n, ast.Call)
                            and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"})
            for line in lines[:20]:
                info = self._backward_call(sf, line)
                if info is not None and info[0] != "autograd-grad":
                    self._backward(sf, info, -1, evidence_only=True)

    def _backward(self, sf: SourceFile, info, fi: int, evidence_only: bool = False) -> None:
        """The fix sites for one backward() call (the crash line's, or with ``evidence_only`` one
        found by searching: then only a criterion or a loss function that is provably per-sample)."""
        kind, call, recv = info
        scope = sf.scope_of(call)
        crash_line = call.lineno
        if self._already_scalar(sf, scope, kind, call, recv, fi):
            return
        if kind == "autograd-grad":
            self.ctx.add(sf, call.lineno, call.col_offset, "autograd-grad",
                      "torch.autograd.grad is given a non-scalar output without grad_outputs.", 0.9)
            if isinstance(recv, ast.Name):
                a = self.last_assign(sf, scope, recv.id, crash_line)
                if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None:
                    self.ctx.add(sf, a.lineno, value_col(sf, a), "loss-assignment",
                              f"'{recv.id}' is assigned a non-scalar value here.", 0.4)
            return
        recv_reason = (f"backward() is called on '{src(sf, recv)}', which is not a scalar; reduce it "
                       f"(e.g. .mean()) or pass a gradient.")
        crit = self._crit_origin(sf, scope, recv, crash_line, recv, frame_i=fi)
        # The name behind the receiver: `loss`, `(loss / accum)`, `losses["total"]` (key "total").
        base, key = self._receiver_base(sf, scope, recv, crash_line)
        assign = None
        if base is not None:
            a = self.last_assign(sf, scope, base.id, crash_line)
            if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None and \
                    not (isinstance(a, ast.Assign) and not isinstance(a.targets[0], ast.Name)):
                assign = a
        stmt = sf.stmt_at(crash_line) or call
        # A read of the loss as a number (or its return to a caller) that backward() alone never
        # serves: reducing only at the receiver moves the error there.
        if base is None:
            local = None
        elif key is not None:
            local = self.key_number_read(sf, scope, base.id, key, stmt)
        else:
            local = self.number_read(sf, scope, base.id, stmt)
        scalar = local is not None
        loss_returns = self._loss_fn_returns(sf, scope, assign) if crit is None and assign is not None else []
        unpacked = self._unpacked_need(sf, scope, base, crash_line) if key is None else None
        if evidence_only and crit is None and not loss_returns:
            return
        # what the receiver's own fix leaves, and (below) what the assignment's fix leaves
        recv_left = self._left(sf, local, "at backward() alone") if local is not None else ""
        own_call = assign.value if assign is not None else None
        if loss_returns:
            unreduced, reds = [], []
            for rsf, ret in loss_returns:
                red = self._reduced_origin(rsf, rsf.scope_of(ret), ret.value, ret.lineno + 1)
                if red is not None:
                    reds.append(red)
                else:
                    unreduced.append((rsf, ret))
            # Reduced on some branches only (`if self.reduction == "mean": return loss.mean()`): the
            # per-sample branch is on purpose, not a file fixed since the log.
            for red in reds if not unreduced else ():
                self._note_reduced(red)
            loss_returns = unreduced or loss_returns
            every = self._every_value_read(sf, scope, base.id, stmt) if key is not None else None
            for rsf, ret in loss_returns:
                self.ctx.add(rsf, ret.lineno, ret.value.col_offset, "per-sample-return",
                          f"{func_name(rsf, ret)} returns a loss that is not reduced to a scalar; "
                          f"backward() is called on it at {sf.rel}:{call.lineno}.", 0.9)
                if every is not None:
                    self._other_entries(rsf, ret, key, sf, every)
            other = self._callers_need(loss_returns, own_call) or unpacked
            recv_left = recv_left or (self._left(other[0], other[1], "at backward() alone", other[2]) if other else "")
            other = self._left(other[0], other[1], "only at this assignment", other[2]) if other else ""
            if key is None:
                self._add_left(sf, assign.lineno, value_col(sf, assign), "loss-assignment",
                               f"'{base.id}' is assigned the unreduced loss here.", 0.6, other)
            self._add_left(sf, call.lineno, recv.col_offset, "backward-receiver", recv_reason, 0.5, recv_left)
        elif crit is not None:
            csf, kw = crit
            self.ctx.add(csf, kw.lineno, kw.col_offset, "criterion-reduction",
                      "The loss comes from a criterion built with reduction='none', so it holds one value "
                      "per sample; nothing else uses the per-sample values.", 0.9)
            other = self._criterion_need(csf, kw, own_call) or unpacked
            recv_left = recv_left or (self._left(other[0], other[1], "at backward() alone", other[2]) if other else "")
            other = self._left(other[0], other[1], "only at this assignment", other[2]) if other else ""
            if assign is not None and key is None:
                self._add_left(sf, assign.lineno, value_col(sf, assign), "loss-assignment",
                               f"'{base.id}' is assigned the per-sample loss here.", 0.6, other)
            self._add_left(sf, call.lineno, recv.col_offset, "backward-receiver", recv_reason, 0.5, recv_left)
        elif unpacked is not None:
            # No producer found, but another call's result is read as a number: no reduction at
            # this call site covers it, so every site here is marked insufficient.
            self._add_left(sf, call.lineno, recv.col_offset, "backward-receiver", recv_reason, 0.9,
                           recv_left or self._left(unpacked[0], unpacked[1], "at backward() alone", unpacked[2]))
            if assign is not None:
                self._add_left(sf, assign.lineno, value_col(sf, assign), "loss-assignment",
                               f"'{base.id}' is assigned a non-scalar value here.", 0.6,
                               self._left(unpacked[0], unpacked[1], "only at this assignment", unpacked[2]))
        elif scalar and assign is not None and key is None:
            self.ctx.add(sf, assign.lineno, value_col(sf, assign), "loss-assignment",
                      f"'{base.id}' is used as a scalar elsewhere (e.g. .item() or printing) but is assigned "
                      f"a non-scalar value here.", 0.9)
            self._add_left(sf, call.lineno, recv.col_offset, "backward-receiver", recv_reason, 0.6, recv_left)
        else:
            self._add_left(sf, call.lineno, recv.col_offset, "backward-receiver", recv_reason, 0.9, recv_left)
            if assign is not None and key is None:
                self.ctx.add(sf, assign.lineno, value_col(sf, assign), "loss-assignment",
                          f"'{base.id}' is assigned a non-scalar value here.", 0.6)
        if self.ctx.diag.field("dtype"):
            self.ctx.notes.append(f"The output is complex ({self.ctx.diag.field('dtype')}); backward() needs a real "
                              f"scalar, e.g. .abs().mean() or .real.")

    def _receiver_base(self, sf: SourceFile, scope: ast.AST, recv: ast.AST, line: int
                       ) -> Tuple[Optional[ast.Name], Optional[str]]:
        """The variable behind backward()'s receiver and the dict key read from it: ``loss`` ->
        (loss, None); ``loss / accum`` or ``2 * loss`` -> (loss, None); ``losses["total"]`` ->
        (losses, "total"); (None, None) for anything else."""
        if isinstance(recv, ast.BinOp) and isinstance(recv.op, (ast.Div, ast.Mult)):
            for tensor, number in ((recv.left, recv.right), (recv.right, recv.left)):
                if isinstance(recv.op, ast.Div) and tensor is recv.right:
                    continue
                if isinstance(tensor, ast.Name) and self._scale(sf, scope, number, line):
                    return tensor, None
            return None, None
        if isinstance(recv, ast.Name):
            return recv, None
        if isinstance(recv, ast.Subscript) and isinstance(recv.value, ast.Name) and const_str(recv.slice):
            return recv.value, const_str(recv.slice)
        return None, None

    def _scale(self, sf: SourceFile, scope: ast.AST, node: ast.AST, line: int) -> bool:
        """A number a loss is scaled by: a literal or a name holding one, a config value
        (``args.accum_steps``), ``len(...)``."""
        if self.is_number(sf, scope, node, line):
            return True
        if isinstance(node, ast.Attribute):
            return isinstance(unwrap_chain(node.value), (ast.Name, ast.Attribute))
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("len", "float", "int")

    def _left(self, sf: SourceFile, node: ast.AST, fix: str, called: str = "") -> str:
        """Why reducing ``fix`` (where: "at backward() alone", "only at this assignment") leaves the
        read ``node`` a tensor of many elements; ``called``: the read is of another call's result."""
        code = " ".join((sf.line_text(node.lineno) or "").split())
        if len(code) > 60:
            code = code[:57] + "..."
        where = f"{sf.rel}:{node.lineno} ({code})"
        if called:
            return (f"{called} is also called at {where}, whose result is read as a number; reducing {fix} "
                    f"leaves that a tensor of many elements")
        if isinstance(sf.parent(node), (ast.Return, ast.Yield)):
            return f"the loss is returned at {where}; reducing {fix} leaves the callers a tensor of many elements"
        return f"the loss is also read as a number at {where}; reducing {fix} leaves it a tensor of many elements there"

    def _add_left(self, sf: SourceFile, line: int, col: int, kind: str, reason: str, score: float,
                  left: str) -> None:
        """Add a site whose fix leaves a use of the loss (``left``, "" for none): it is marked, and
        it ranks below the sites whose fix covers that use (its patches are insufficient)."""
        self.ctx.add(sf, line, col, kind, reason + (f" Fixing only here is not enough: {left}." if left else ""),
                     min(score, 0.4) if left else score)
        if left:
            self.ctx.sites[-1] = replace(self.ctx.sites[-1], uncovered=left)

    def _callers_need(self, loss_returns, own_call: Optional[ast.AST]):
        """Another call of the loss function whose result is read as a number (the evaluation pass
        after the first epoch): (its file, the read, the function's name), or None."""
        for rsf, ret in loss_returns:
            fn = rsf.scope_of(ret)
            for osf, c in self.call_sites(rsf, fn):
                if c is own_call:
                    continue
                need = self.result_need(osf, c)
                if need is not None:
                    return osf, need, func_name(rsf, ret)
        return None

    def _criterion_need(self, csf: SourceFile, kw: ast.keyword, own_call: Optional[ast.AST]):
        """Another call of the criterion built at ``kw`` whose result is read as a number, as
        :meth:`_callers_need`."""
        for hsf, holder in self._criterion_holders(csf, csf.parent(kw)):
            for osf, c in self.object_calls(hsf, hsf.scope_of(holder), holder.targets[0]):
                if c is own_call:
                    continue
                need = self.result_need(osf, c)
                if need is not None:
                    return osf, need, f"the criterion built at {csf.rel}:{kw.lineno}"
        return None

    def _criterion_holders(self, csf: SourceFile, ctor: ast.AST, depth: int = 0) -> List[Tuple[SourceFile, ast.Assign]]:
        """The assignments that bind the criterion built by ``ctor``: its own
        (``criterion = nn.MSELoss(...)``), or where a helper returning it is called
        (``criterion = similarity_criterion()`` in train() and in test())."""
        holder = csf.parent(ctor)
        while isinstance(holder, ast.Attribute) or (isinstance(holder, ast.Call) and isinstance(holder.func, ast.Attribute)
                                                     and holder.func.value is not None and holder is not ctor
                                                     and contains(holder.func.value, ctor)):
            holder = csf.parent(holder)          # nn.MSELoss(reduction="none").to(device)
        if isinstance(holder, ast.Assign) and len(holder.targets) == 1:
            return [(csf, holder)]
        if isinstance(holder, ast.Return) and depth < 2:
            return [h for osf, c in self.call_sites(csf, csf.scope_of(holder))
                    for h in self._criterion_holders(osf, c, depth + 1)]
        return []

    def _factory_crit(self, sf: SourceFile, call: ast.Call, depth: int) -> Optional[Tuple[SourceFile, ast.keyword]]:
        """A criterion made by a project helper (``criterion = losses.similarity_criterion()``)
        that returns one built with reduction='none'."""
        if depth > MAX_DEPTH:
            return None
        for fsf, fn in self.callees(sf, sf.scope_of(call), call, call.lineno, wide=True):
            for ret in returns(fn):
                value = unwrap_chain(ret.value) if ret.value is not None else None
                if not isinstance(value, ast.Call):
                    continue
                kw = keyword(value, "reduction")
                if kw is not None and const_str(kw.value) == "none":
                    return fsf, kw
        return None

    def _crit_origin(self, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int,
                     consumer: ast.AST, depth: int = 0, frame_i: int = -1
                     ) -> Optional[Tuple[SourceFile, ast.keyword]]:
        """Where expr comes straight from a criterion with reduction='none' (and is used nowhere else)."""
        if depth > MAX_DEPTH or expr is None:
            return None
        if isinstance(expr, ast.Call):
            kw = keyword(expr, "reduction")
            if kw is not None:
                return (sf, kw) if const_str(kw.value) == "none" else None
            ctor = self.ctor_value(sf, scope, expr.func, line) if isinstance(expr.func, (ast.Name, ast.Attribute)) else None
            if ctor is None and isinstance(expr.func, ast.Name) and frame_i >= 0 and is_param(scope, expr.func.id):
                ctor = self._ctor_from_caller(scope, expr.func.id, frame_i)   # train(model, criterion, ...)
            if ctor is not None and isinstance(unwrap_chain(ctor[1]), ast.Call):
                kw = keyword(unwrap_chain(ctor[1]), "reduction")  # type: ignore[arg-type]
                if kw is not None and const_str(kw.value) == "none":
                    return ctor[0], kw
                if kw is None:
                    found = self._factory_crit(ctor[0], unwrap_chain(ctor[1]), depth)  # type: ignore[arg-type]
                    if found is not None:
                        return found
            for csf, fn in self.callees(sf, scope, expr, line, wide=True):
                for ret in returns(fn):
                    found = self._crit_origin(csf, fn, ret.value, ret.lineno + 1, ret.value, depth + 1)
                    if found is not None:
                        return found
            return None
        if isinstance(expr, ast.Name):
            a = self._value_assign(sf, scope, expr.id, line)
            if a is None:
                if frame_i >= 0 and isinstance(scope, FUNC_TYPES) and is_param(scope, expr.id):
                    return self._crit_from_caller(scope, expr.id, frame_i, depth)
                return None
            if isinstance(a, ast.AugAssign):
                return self._accumulated_crit(sf, scope, expr.id, a, consumer, depth, frame_i)
            if not isinstance(a, (ast.Assign, ast.AnnAssign)) or a.value is None:
                return None
            pos = _unpacked_position(a, expr.id)
            if pos is None and isinstance(a, ast.Assign) and \
                    not (len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)):
                return None
            if not self.only_consumed(sf, scope, expr.id, a, consumer):
                return None
            if pos is not None:
                # `logits, loss = model(x, y)`: the element at that position of what the callee returns
                if not isinstance(a.value, ast.Call):
                    return None
                for csf, fn in self.callees(sf, scope, a.value, a.lineno, wide=True):
                    for ret in returns(fn):
                        elt = _tuple_element(ret.value, *pos)
                        found = self._crit_origin(csf, fn, elt, ret.lineno + 1, elt, depth + 1) if elt else None
                        if found is not None:
                            return found
                return None
            return self._crit_origin(sf, scope, a.value, a.lineno, a.value, depth + 1, frame_i)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            # `outputs = model(**batch); loss = outputs.loss`: the loss= the model's forward returns
            a = self._value_assign(sf, scope, expr.value.id, line)
            if not (isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)
                    and isinstance(a.value, ast.Call)):
                return None
            for csf, fn in self.callees(sf, scope, a.value, a.lineno, wide=True):
                for ret in returns(fn):
                    part = _returned_field(ret.value, expr.attr)
                    found = self._crit_origin(csf, fn, part, ret.lineno + 1, part, depth + 1) if part else None
                    if found is not None:
                        return found
            return None
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Div, ast.Mult)):
            # `criterion(out, y) / accum_steps`: scaling by a number keeps one value per sample
            for tensor, number in ((expr.left, expr.right), (expr.right, expr.left)):
                if isinstance(expr.op, ast.Div) and tensor is expr.right:
                    continue
                if self._scale(sf, scope, number, line):
                    return self._crit_origin(sf, scope, tensor, line, tensor if isinstance(tensor, ast.Name)
                                             else consumer, depth + 1, frame_i)
        return None

    def _accumulated_crit(self, sf: SourceFile, scope: ast.AST, name: str, last: ast.AugAssign,
                          consumer: ast.AST, depth: int, frame_i: int
                          ) -> Optional[Tuple[SourceFile, ast.keyword]]:
        """``loss = 0`` then ``loss += criterion(out[:, t], y[:, t])`` per step: the criterion, when
        every term added is per-sample from one with reduction='none' and the start is a number."""
        steps = [a for a in self.assignments(sf, scope, name) if a.lineno <= last.lineno]
        init = next((a for a in reversed(steps) if not isinstance(a, ast.AugAssign)), None)
        if not isinstance(init, ast.Assign) or not self.is_number(sf, scope, init.targets[0], init.lineno + 1):
            return None
        terms = [a for a in steps if isinstance(a, ast.AugAssign) and a.lineno > init.lineno]
        if not terms or any(not isinstance(t.op, (ast.Add, ast.Sub)) for t in terms):
            return None
        if not self.only_consumed(sf, scope, name, last, consumer):
            return None
        found = None
        for t in terms:
            crit = self._crit_origin(sf, scope, t.value, t.lineno, t.value, depth + 1, frame_i)
            if crit is None:
                return None
            found = found or crit
        return found

    def _every_value_read(self, sf: SourceFile, scope: ast.AST, name: str, skip: ast.AST) -> Optional[ast.AST]:
        """A read of every value of the dict ``name`` as a number (``{k: v.item() for k, v in
        losses.items()}``), or None."""
        # no entry is spelt with this key, so only the loops over .items()/.values() can match
        return self.key_number_read(sf, scope, name, "\0every value", skip)

    def _other_entries(self, rsf: SourceFile, ret: ast.Return, key: str, sf: SourceFile, every: ast.AST) -> None:
        """The returned dict's other entries are read as numbers too (``every``): reducing only
        ``key`` leaves an unreduced one failing there. Mark the return's site so, and name the
        criterion with reduction='none' behind such an entry, whose fix covers them all."""
        if not isinstance(ret.value, ast.Dict):
            return
        scope, left = rsf.scope_of(ret), []
        for k, v in zip(ret.value.keys, ret.value.values):
            name = const_str(k) if k is not None else None
            if name is None or name == key or self._reduced_origin(rsf, scope, v, ret.lineno + 1) is not None:
                continue
            # (its other uses, e.g. the weighted total, become scalars with it: no only-consumed test)
            a = self._value_assign(rsf, scope, v.id, ret.lineno + 1) if isinstance(v, ast.Name) else None
            made = a.value if isinstance(a, ast.Assign) and len(a.targets) == 1 else v
            crit = self._crit_origin(rsf, scope, made, ret.lineno + 1, made)
            if crit is not None or self._fed_by_unreduced_criterion(rsf, scope, v, ret.lineno + 1):
                left.append(name)      # provably per-sample (an unknown helper's value is not counted)
            if crit is not None:
                csf, kw = crit
                self.ctx.add(csf, kw.lineno, kw.col_offset, "criterion-reduction",
                             f"The loss '{name}' of {func_name(rsf, ret)}'s dict comes from a criterion built "
                             f"with reduction='none', and {sf.rel}:{every.lineno} reads every entry as a number; "
                             f"reducing here makes '{name}' and '{key}' scalars.", 0.9)
        if left:
            i = max(i for i, site in enumerate(self.ctx.sites) if site.kind == "per-sample-return"
                    and site.path == rsf.rel and site.line == ret.lineno)
            why = (f"every entry of the dict is read as a number at {sf.rel}:{every.lineno} "
                   f"({' '.join((sf.line_text(every.lineno) or '').split())[:60]}), and "
                   f"{', '.join(repr(n) for n in left)} is not reduced either")
            site = self.ctx.sites[i]
            self.ctx.sites[i] = replace(site, score=min(site.score, 0.4), uncovered=why,
                                        reason=site.reason + f" Fixing only '{key}' is not enough: {why}.")

    def _value_assign(self, sf: SourceFile, scope: ast.AST, name: str, line: int) -> Optional[ast.AST]:
        """The last assignment of ``name`` before ``line`` that can hold a loss: ``loss = None`` (the
        branch without targets, in a model's forward) never reaches backward()."""
        a = self.last_assign(sf, scope, name, line)
        while isinstance(a, ast.Assign) and isinstance(a.value, ast.Constant) and a.value.value is None:
            a = self.last_assign(sf, scope, name, a.lineno)
        return a

    def _unpacked_need(self, sf: SourceFile, scope: ast.AST, name: Optional[ast.Name], line: int):
        """The loss was unpacked from a call's result (``logits, loss = model(x, y)``, maybe then
        scaled: ``loss = loss / accum``): another call of the same model or function whose element
        at that position is read as a number (estimate_loss()'s ``loss.item()``), as
        :meth:`_callers_need`; or None."""
        a = None
        for _ in range(MAX_DEPTH):
            if name is None:
                return None
            a = self._value_assign(sf, scope, name.id, line)
            if not isinstance(a, ast.Assign):
                return None
            if _unpacked_position(a, name.id) is not None:
                break
            if not (len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)):
                return None
            name, _key = self._receiver_base(sf, scope, a.value, a.lineno)
            line = a.lineno
        else:
            return None
        pos = _unpacked_position(a, name.id)
        own = a.value
        if pos is None or not isinstance(own, ast.Call):
            return None
        func = own.func
        calls: List[Tuple[SourceFile, ast.Call]] = []
        if isinstance(func, ast.Name) and (is_param(scope, func.id) or self.assignments(sf, scope, func.id)):
            calls = self.object_calls(sf, scope, func)
        elif isinstance(func, ast.Name) or \
                isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            calls = self.object_calls(sf, sf.tree if isinstance(func, ast.Name) else scope, func)
        for csf, fn in self.callees(sf, scope, own, a.lineno, wide=True):
            if getattr(fn, "name", "") not in ("forward", "__call__"):
                calls += self.call_sites(csf, fn)
        for osf, c in calls:
            if c is own:
                continue
            need = self.result_need(osf, c, pos[0])
            if need is not None:
                return osf, need, src(sf, func)
        return None

    def _ctor_from_caller(self, fn: ast.AST, param: str, frame_i: int):
        """What the caller passed for the crash function's parameter ``param`` was built from."""
        found = self.caller_argument(fn, param, frame_i)
        if found is None:
            return None
        osf, call, arg, line = found
        if isinstance(arg, (ast.Name, ast.Attribute)):
            return self.ctor_value(osf, osf.scope_of(call), arg, line)
        return (osf, arg) if isinstance(arg, ast.Call) else None

    def _crit_from_caller(self, fn: ast.AST, param: str, frame_i: int, depth: int):
        """Follow a parameter of the crash function to the argument its caller passed."""
        found = self.caller_argument(fn, param, frame_i)
        if found is None:
            return None
        osf, call, arg, line = found
        return self._crit_origin(osf, osf.scope_of(call), arg, line, arg, depth + 1, frame_i + 1)

    def _backward_call(self, sf: SourceFile, line: int):
        """(kind, call, receiver) for the backward/autograd.grad call on the statement at line."""
        stmt = sf.stmt_at(line)
        if stmt is None:
            return None
        found = []
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Call):
                continue
            info = classify_backward(node)
            if info is not None:
                found.append((0 if node.lineno == line else 1, node.lineno, node.col_offset, info, node))
        if not found:
            return None
        found.sort(key=lambda t: t[:3])
        kind, recv = found[0][3]
        return kind, found[0][4], recv

    def _already_scalar(self, sf: SourceFile, scope: ast.AST, kind: str, call: ast.Call, recv: ast.AST,
                        frame_i: int) -> bool:
        """The backward call on the crash line already gets a scalar (or a gradient): note it, True."""
        given = _given_gradient(call, kind)
        if given is not None:
            what = "grad_outputs= to torch.autograd.grad" if kind == "autograd-grad" else "a gradient to backward()"
            self.ctx.notes.append(f"{sf.rel}:{given.lineno} already passes {what}; {FIXED_SINCE}.")
            return True
        red = self._reduced_origin(sf, scope, recv, call.lineno, frame_i=frame_i)
        if red is not None:
            self._note_reduced(red)
            return True
        return False

    def _note_reduced(self, red: Tuple[SourceFile, ast.AST]) -> None:
        rsf, node = red
        self.ctx.notes.append(f"{rsf.rel}:{node.lineno} already reduces the loss to a scalar; {FIXED_SINCE}.")

    def _reduced_origin(self, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int, depth: int = 0,
                        frame_i: int = -1) -> Optional[Tuple[SourceFile, ast.AST]]:
        """Where expr is certainly reduced to a scalar (.mean()/.sum(), a criterion with a mean/sum
        reduction), following names, project functions and the crash function's caller; else None."""
        if depth > MAX_DEPTH or expr is None:
            return None
        if isinstance(expr, ast.IfExp):
            a = self._reduced_origin(sf, scope, expr.body, line, depth + 1, frame_i)
            b = self._reduced_origin(sf, scope, expr.orelse, line, depth + 1, frame_i)
            return a if a is not None and b is not None else None
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            return self._reduced_origin(sf, scope, expr.operand, line, depth + 1, frame_i)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
            sides = []
            for side in (expr.left, expr.right):
                if self.is_number(sf, scope, side, line):
                    continue
                r = self._reduced_origin(sf, scope, side, line, depth + 1, frame_i)
                if r is None:
                    return None
                sides.append(r)
            return sides[0] if sides else None
        if isinstance(expr, ast.Name):
            a = self.last_assign(sf, scope, expr.id, line)
            if a is None:
                if frame_i >= 0 and isinstance(scope, FUNC_TYPES) and is_param(scope, expr.id):
                    return self._reduced_from_caller(scope, expr.id, frame_i, depth)
                return None
            if isinstance(a, ast.AugAssign) and isinstance(a.op, (ast.Add, ast.Sub)):
                r = self._reduced_origin(sf, scope, a.value, a.lineno, depth + 1)
                if r is None:
                    return None
                prev = ast.Name(id=expr.id, ctx=ast.Load())
                if self.is_number(sf, scope, prev, a.lineno) or \
                        self._reduced_origin(sf, scope, prev, a.lineno, depth + 1) is not None:
                    return r
                return None
            if not isinstance(a, (ast.Assign, ast.AnnAssign)) or a.value is None:
                return None
            if isinstance(a, ast.Assign) and not (len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)):
                return None
            return self._reduced_origin(sf, scope, a.value, a.lineno, depth + 1)
        if not isinstance(expr, ast.Call):
            return None
        func = expr.func
        name = last_name(func)
        if isinstance(func, ast.Attribute):
            if name in ("mean", "sum") and not expr.args and _no_dim(expr):
                return sf, expr
            if name in SCALAR_KEEP_METHODS and not (name == "squeeze" and expr.args):
                return self._reduced_origin(sf, scope, func.value, line, depth + 1, frame_i)
        full = self.full_name(sf, func)
        if full in ("torch.mean", "torch.sum") and len(expr.args) == 1 and _no_dim(expr):
            return sf, expr
        if full.startswith("torch.nn.functional."):
            fname = full.rsplit(".", 1)[-1]
            if fname in FUNCTIONAL_LOSSES or fname.endswith("_loss"):
                return (sf, expr) if _reduces(expr) else None
            return None
        if isinstance(func, (ast.Name, ast.Attribute)) and not full.startswith("torch."):
            ctor = self.ctor_value(sf, scope, func, line)
            if ctor is not None:
                csf, value = ctor
                value = unwrap_chain(value)
                if isinstance(value, ast.Call) and self.resolve_class(csf, value.func) is None:
                    cname = self.full_name(csf, value.func)
                    if cname.startswith("torch.nn.") and cname.endswith("Loss"):
                        return (csf, value) if _reduces(value) else None
        callees = self.callees(sf, scope, expr, line, wide=True)
        if not callees:
            return None
        found = None
        for csf, fn in callees:
            rets = [r for r in returns(fn) if not isinstance(r.value, ast.Constant)]
            if not rets:
                return None
            for ret in rets:
                r = self._reduced_origin(csf, fn, ret.value, ret.lineno + 1, depth + 1)
                if r is None:
                    return None
                found = found or r
        return found

    def _reduced_from_caller(self, fn: ast.AST, param: str, frame_i: int, depth: int):
        found = self.caller_argument(fn, param, frame_i)
        if found is None:
            return None
        osf, call, arg, line = found
        return self._reduced_origin(osf, osf.scope_of(call), arg, line, depth + 1, frame_i + 1)

    def _loss_fn_returns(self, sf: SourceFile, scope: ast.AST, assign: ast.AST
                         ) -> List[Tuple[SourceFile, ast.Return]]:
        """Returns of a compute_loss/training_step-like project function the loss was assigned from."""
        value = getattr(assign, "value", None)
        if not isinstance(value, ast.Call):
            return []
        out: List[Tuple[SourceFile, ast.Return]] = []
        for csf, fn in self.callees(sf, scope, value, assign.lineno, wide=True):
            rets = [r for r in returns(fn) if not isinstance(r.value, ast.Constant)]
            if getattr(fn, "name", "") not in LOSS_FN_NAMES:
                # Any other project function or loss module counts when the code shows it returns
                # per-sample values: a criterion built with reduction='none' feeds what it returns.
                rets = [r for r in rets if self._fed_by_unreduced_criterion(csf, fn, r.value, r.lineno + 1)]
            out.extend((csf, r) for r in rets)
        return out

    def _fed_by_unreduced_criterion(self, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int,
                                    depth: int = 0) -> bool:
        """Does a reduction='none' criterion call, or a reduction over some dimensions only
        (``.sum(dim=1)``: one value per sample), feed expr (through names, arithmetic, indexing)?"""
        if depth > MAX_DEPTH or expr is None:
            return False
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                kw = keyword(node, "reduction")
                if kw is not None and const_str(kw.value) == "none" or self._partial_reduction(sf, node):
                    return True
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                a = self.last_assign(sf, scope, node.id, line)
                if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None and \
                        self._fed_by_unreduced_criterion(sf, scope, a.value, a.lineno, depth + 1):
                    return True
        return False

    def _partial_reduction(self, sf: SourceFile, call: ast.Call) -> bool:
        """``x.sum(dim=1)``, ``x.mean(1)``, ``torch.sum(x, dim=1)``: reduced over some dimensions
        only (with keepdim or not), so one value per sample is left."""
        name = last_name(call.func)
        if name not in ("sum", "mean"):
            return False
        full = self.full_name(sf, call.func)
        if isinstance(call.func, ast.Name) and full not in ("torch.sum", "torch.mean"):
            return False           # the builtin sum() of a generator of scalars
        n_pos = 1 if full in ("torch.sum", "torch.mean") else 0
        return len(call.args) > n_pos or not _no_dim(call)

    def _per_sample_returns(self) -> None:
        """The crash is inside a library (Lightning, a Trainer): look at training_step/compute_loss."""
        if self.ctx.mapped:
            m = self.ctx.mapped[0]
            self.ctx.notes.append(f"The crash happened inside a library, called from {m.rel_path}:{m.line}; the "
                                  f"project's training_step/compute_loss functions were searched.")
        found: List[Tuple[float, SourceFile, ast.Return, Optional[Tuple[SourceFile, ast.keyword]]]] = []
        for sf, fn in self.ctx.loss_functions():
            rets = [r for r in returns(fn) if not isinstance(r.value, ast.Constant)]
            reds = [self._reduced_origin(sf, fn, r.value, r.lineno + 1) for r in rets]
            for red in reds if all(reds) else ():   # some branch unreduced: on purpose, see _backward
                self._note_reduced(red)
            for ret, red in zip(rets, reds):
                if red is not None:
                    continue
                value = ret.value
                crit = self._crit_origin(sf, fn, value, ret.lineno + 1, value)
                if crit is None and isinstance(value, ast.IfExp):
                    crit = self._crit_origin(sf, fn, value.orelse, ret.lineno + 1, value.orelse)
                found.append((0.9 if crit else 0.5, sf, ret, crit))
        for score, sf, ret, crit in found:
            bound = self._branches_loss(sf, ret)
            if bound is not None:
                self.ctx.add(sf, bound.lineno, value_col(sf, bound), "loss-assignment",
                          f"{func_name(sf, ret)} returns '{src(sf, bound.targets[0])}' from both branches of its "
                          f"return (with and without the outputs); reducing it here covers both.", score + 0.05)
            self.ctx.add(sf, ret.lineno, ret.value.col_offset, "per-sample-return",
                      f"{func_name(sf, ret)} returns a loss that is not reduced to a scalar; the library "
                      f"calls backward() on it.", score)
            if crit is not None:
                csf, kw = crit
                self.ctx.add(csf, kw.lineno, kw.col_offset, "criterion-reduction",
                          "The returned loss comes from a criterion built with reduction='none'.", score - 0.2)

    def _branches_loss(self, sf: SourceFile, ret: ast.Return) -> Optional[ast.Assign]:
        """The assignment of the loss that a conditional return hands back on both branches, as
        Hugging Face's ``return (loss, outputs) if return_outputs else loss`` does (the tuple
        branch cannot be reduced as a whole; the assignment covers both); else None."""
        value = ret.value
        if not isinstance(value, ast.IfExp):
            return None
        names = {_branch_name(value.body), _branch_name(value.orelse)}
        if len(names) != 1 or None in names:
            return None
        fn = sf.scope_of(ret)
        a = self.last_assign(sf, fn, names.pop(), ret.lineno)
        if isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name) \
                and contains(fn, a):
            return a
        return None


def _branch_name(node: ast.AST) -> Optional[str]:
    """The name a branch of a conditional return gives as its loss: ``loss``, or the first element
    of ``(loss, outputs)``."""
    if isinstance(node, ast.Tuple) and node.elts:
        node = node.elts[0]
    return node.id if isinstance(node, ast.Name) else None


def _unpacked_position(assign: ast.AST, name: str) -> Optional[Tuple[int, int]]:
    """(position, count) of ``name`` in a tuple target (``logits, loss = ...``), else None."""
    if not (isinstance(assign, ast.Assign) and len(assign.targets) == 1):
        return None
    target = assign.targets[0]
    if not isinstance(target, (ast.Tuple, ast.List)) or any(isinstance(e, ast.Starred) for e in target.elts):
        return None
    for i, e in enumerate(target.elts):
        if isinstance(e, ast.Name) and e.id == name:
            return i, len(target.elts)
    return None


def _tuple_element(value: Optional[ast.AST], index: int, count: int) -> Optional[ast.AST]:
    """The ``index``-th element of a returned tuple literal of ``count`` elements."""
    if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == count and \
            not any(isinstance(e, ast.Starred) for e in value.elts):
        return value.elts[index]
    return None


def _returned_field(value: Optional[ast.AST], attr: str) -> Optional[ast.AST]:
    """What a returned output object holds as ``attr``: ``Output(loss=loss, ...)`` or
    ``{"loss": loss, ...}``."""
    if isinstance(value, ast.Call):
        kw = keyword(value, attr)
        return kw.value if kw is not None else None
    if isinstance(value, ast.Dict):
        for k, v in zip(value.keys, value.values):
            if k is not None and const_str(k) == attr:
                return v
    return None


def _no_dim(call: ast.Call) -> bool:
    """No dim= (or dim=None / axis=None) given to a reduction."""
    for name in ("dim", "axis"):
        kw = keyword(call, name)
        if kw is not None and not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
            return False
    return True


def _reduces(call: ast.Call) -> bool:
    """A torch loss call/constructor whose reduction is mean or sum (the default is mean)."""
    kw = keyword(call, "reduction")
    if kw is not None:
        return const_str(kw.value) in REDUCED_MODES
    reduce = keyword(call, "reduce")
    if reduce is not None and not (isinstance(reduce.value, ast.Constant) and reduce.value.value in (True, None)):
        return False
    return not any(isinstance(a, ast.Starred) for a in call.args) and \
        not any(k.arg is None for k in call.keywords)


def _given_gradient(call: ast.Call, kind: str) -> Optional[ast.AST]:
    """The gradient / grad_outputs argument already passed to a backward-like call, if any."""
    def real(node: Optional[ast.AST]) -> bool:
        return node is not None and not (isinstance(node, ast.Constant) and node.value is None) and \
            not isinstance(node, ast.Starred)
    if kind == "autograd-grad":
        kw = keyword(call, "grad_outputs")
        if kw is not None:
            return kw.value if real(kw.value) else None
        return call.args[2] if len(call.args) >= 3 and real(call.args[2]) else None
    for name in ("gradient", "grad_tensors"):
        kw = keyword(call, name)
        if kw is not None:
            return kw.value if real(kw.value) else None
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "backward":
        d = dotted(func.value)
        if d.endswith("autograd") or d == "torch":
            return call.args[1] if len(call.args) >= 2 and real(call.args[1]) else None
        if call.args and last_name(func.value) in ACCEL_NAMES:
            return None
        return call.args[0] if call.args and real(call.args[0]) else None
    return None
