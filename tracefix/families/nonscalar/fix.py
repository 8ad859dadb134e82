"""F1: backward() / autograd.grad() on a tensor that is not a scalar."""
from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.cstedit import (Source, add_arg, dotted, ensure_torch, expr, keyword, kwarg,
                                      method_call, method_name, parenthesize, positional)
from tracefix.records import FixSite

REDUCERS = {"mean", "sum", "item", "abs", "real", "norm", "nansum", "nanmean", "logsumexp"}

MEAN_WHY = ("mean keeps the gradient scale independent of the batch size; "
            ".sum() would make it grow with the batch")


def is_reduced(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Attribute) and node.attr.value == "real":
        return True
    if isinstance(node, cst.Call):
        name = dotted(node.func)
        if method_name(node) in REDUCERS and not name.startswith(("torch.", "F.")):
            return not _over_some_dims(node, 0)
        if name in {f"torch.{r}" for r in REDUCERS} and node.args:
            return not _over_some_dims(node, 1)
    return False


_DIM_FIRST = {"sum", "mean", "nansum", "nanmean", "logsumexp"}   # (norm's first argument is p)


def _over_some_dims(call: cst.Call, tensors: int) -> bool:
    """``x.sum(dim=1)``, ``x.mean(1)``, ``torch.sum(x, 1)``: one value per sample is left."""
    for name in ("dim", "axis"):
        kw = keyword(call, name)
        if kw is not None and not (isinstance(kw.value, cst.Name) and kw.value.value == "None"):
            return True
    last = (dotted(call.func) or method_name(call)).rsplit(".", 1)[-1]
    return last in _DIM_FIRST and len(positional(call)) > tensors


def _elements(node: cst.BaseExpression) -> List[cst.BaseExpression]:
    if isinstance(node, (cst.List, cst.Tuple)):
        return [e.value for e in node.elements]
    return [node]


def _reduce(node: cst.BaseExpression, how: str) -> cst.BaseExpression:
    """``node.how()`` (``.real`` is an attribute); lists/tuples get each element reduced."""
    if isinstance(node, (cst.List, cst.Tuple)):
        return node.with_changes(elements=[e.with_changes(value=_reduce(e.value, how)) if not is_reduced(e.value) else e
                                           for e in node.elements])
    if how == "real":
        return cst.Attribute(value=parenthesize(node), attr=cst.Name("real"))
    return method_call(node, how)


def _is_complex(ctx: Context) -> bool:
    return ctx.diag.field("dtype").startswith("torch.complex")


def _reduction_options(ctx: Context, src: Source, target: cst.BaseExpression, what: str,
                       rel: str) -> List[Option]:
    """Replace ``target`` by its reduction: mean (safe), sum (unsafe); complex: abs / real."""
    if isinstance(target, _NOT_TENSORS) or all(is_reduced(e) for e in _elements(target)):
        return []   # {"loss": ...}.mean() would not even run: the caller picks the loss element
    code = _shown(src.code(target))
    if _is_complex(ctx):
        dtype = ctx.diag.field("dtype")
        return [
            Option(f"Take the magnitude of the {dtype} {what} before backward: `{code}.abs()`",
                   "unsafe", f"the output is complex ({dtype}); minimising its magnitude is a choice only you "
                             "can confirm", {rel: src.replace(target, lambda n: _reduce(n, "abs"))}),
            Option(f"Backpropagate the real part of the {dtype} {what}: `{code}.real`", "unsafe",
                   f"the output is complex ({dtype}); the imaginary part is then ignored",
                   {rel: src.replace(target, lambda n: _reduce(n, "real"))}, alternative=True),
        ]
    if _stacked_losses(ctx, src, target):
        # torch.stack([loss_a, w * loss_b]): one entry per loss, not per sample; their sum is the
        # objective the list spells out, and the mean divides it by the number of losses
        return [
            Option(f"Reduce `{code}` to a scalar with .mean() before backward", "unsafe",
                   "it divides the total of the stacked losses by their number, which scales every gradient "
                   "down (a smaller effective learning rate)",
                   {rel: src.replace(target, lambda n: _reduce(n, "mean"))}, alternative=True),
            Option(f"Reduce `{code}` to a scalar with .sum() before backward (it stacks one loss per entry: "
                   "their sum is the total objective)", "safe", "",
                   {rel: src.replace(target, lambda n: _reduce(n, "sum"))}),
        ]
    mean = Option(f"Reduce `{code}` to a scalar with .mean() before backward ({MEAN_WHY})", "safe", "",
                  {rel: src.replace(target, lambda n: _reduce(n, "mean"))})
    total = Option(f"Reduce `{code}` to a scalar with .sum() before backward", "unsafe",
                   "gradients then grow with the batch size, so the learning rate may need retuning",
                   {rel: src.replace(target, lambda n: _reduce(n, "sum"))}, alternative=True)
    # tok * mask: the mean over every position also counts the ones the mask zeroes out, so the
    # loss is scaled by the share of kept positions, which changes from batch to batch
    mask = _mask_of(src, target)
    if mask is not None:
        m = src.code(mask).strip()
        _not_the_mean(mean, code, f"it also counts the positions '{m}' zeroes out, so the loss shrinks with the "
                                  "share of masked positions, which changes from batch to batch")
        masked = Option(f"Average `{code}` over the positions `{m}` keeps: `.sum() / {m}.sum()`", "safe", "",
                        {rel: src.replace(target, lambda n: _kept_mean(src, n, target, mask))})
        return [masked, total, mean]
    masked_at = _masked_elsewhere(ctx)
    if masked_at:
        _not_the_mean(mean, code, f"the loss is multiplied by a mask ({masked_at}): the mean also counts the "
                                  "masked-out positions; averaging over the kept ones is the patch there")
    weighted = _weighted_criterion(ctx)
    if weighted and mean.applicability == "safe":
        _not_the_mean(mean, code, weighted)
    return [mean, total]


def _shown(code: str, width: int = 60) -> str:
    """Code as one line for a summary: a loss spread over several lines in parentheses, shortened."""
    one = " ".join(code.split())
    return one if len(one) <= width else one[:width - 3] + "..."


def _not_the_mean(mean: Option, code: str, why: str) -> None:
    mean.summary = f"Reduce `{code}` to a scalar with .mean() before backward"
    mean.applicability, mean.reason, mean.alternative = "unsafe", why, True


def _read_after_backward(ctx: Context, how: str = "") -> str:
    """Why a loss reduced where it is made changes what the training step reads: the step's
    ``out["loss"]`` / ``outputs.loss`` (the backward() target at the crash site) is read again after
    backward() as per-sample values (``out["loss"].sum() / n``, ``.topk()``); "" when not, or when the
    target is a plain name (the loss-assignment sites answer for those)."""
    crash = ctx.diag.crash_site
    src = ctx.source(crash.path) if crash is not None else None
    call = src.find(crash.line, crash.col, cst.Call, lambda n: method_name(n) == "backward") \
        if src is not None else None
    target = _backward_target(call)[0] if call is not None else None
    if not isinstance(target, (cst.Subscript, cst.Attribute)):
        return ""
    want = _spelled(src, target)
    scope = src.scope_of(call)
    end = src.positions[call].end.line
    for n in src.in_statement_of(scope, type(target)):
        line = src.positions[n].start.line
        if line <= end or _spelled(src, n) != want or _scalar_serves(src, n, how):
            continue
        stmt_code = " ".join(src.code(src.small_statement_of(n) or n).split())
        if len(stmt_code) > 60:
            stmt_code = stmt_code[:57] + "..."
        return (f"'{want}' is read again as per-sample values at {crash.path}:{line} ({stmt_code}); "
                "reducing it where it is made changes that")
    return ""


def _spelled(src: Source, node: cst.CSTNode) -> str:
    """The code of ``node`` with one kind of quotes and no spaces: out['loss'] == out["loss"]."""
    return "".join(src.code(node).split()).replace("'", '"')


_CLASS_LOSSES = {"cross_entropy": 2, "CrossEntropyLoss": 0, "nll_loss": 2, "NLLLoss": 0}  # position of weight


def _weighted_criterion(ctx: Context) -> str:
    """Why ``.mean()`` of a criterion's per-sample losses is not its ``reduction='mean'``: it was
    given ``ignore_index`` (the mean then counts the ignored targets, as zeros) or class weights
    (``reduction='mean'`` divides by their sum); "" otherwise."""
    for other, _src, call in _sites_nodes(ctx, ("criterion-reduction",), cst.Call,
                                          lambda n: keyword(n, "reduction") is not None):
        name = dotted(call.func).rsplit(".", 1)[-1]
        if name not in _CLASS_LOSSES:
            continue
        where = f"{other.path}:{other.line}"
        if keyword(call, "ignore_index") is not None:
            return (f"the criterion at {where} takes ignore_index: reduction='mean' averages over the targets it "
                    "keeps, .mean() of its per-sample losses also counts the ignored ones (as zeros)")
        if keyword(call, "weight") is not None or len(positional(call)) > _CLASS_LOSSES[name]:
            return (f"the criterion at {where} takes class weights: reduction='mean' divides by the sum of the "
                    "weights, .mean() of its per-sample losses by their number")
    return ""


def _masked_elsewhere(ctx: Context) -> str:
    """``mask`` at path:line when another fix site's loss is ``x * mask``; ""."""
    for other, src, node in _sites_nodes(ctx, ("per-sample-return", "loss-assignment"),
                                         (cst.Return, cst.Assign, cst.AnnAssign), _has_value):
        value = _loss_element(node.value)
        mask = _mask_of(src, value) if value is not None else None
        if mask is not None:
            return f"'{src.code(mask).strip()}' at {other.path}:{other.line}"
    return ""


def _kept_mean(src: Source, node: cst.BaseExpression, target: cst.BaseExpression,
               mask: cst.BaseExpression) -> cst.BaseExpression:
    """``node.sum() / mask.sum().clamp(min=1)`` (no division by zero for an all-masked batch)."""
    den = method_call(method_call(mask, "sum"), "clamp", [kwarg("min", cst.Integer("1"))])
    out = cst.BinaryOperation(left=method_call(node, "sum"), operator=cst.Divide(), right=den)
    holder = src.parent(target)
    if isinstance(holder, (cst.Attribute, cst.Subscript, cst.BinaryOperation, cst.UnaryOperation)):
        out = parenthesize(out)   # (loss.sum() / mask.sum()).backward()
    return out


# displays that are no tensor: reducing them fails at once
_NOT_TENSORS = (cst.Dict, cst.DictComp, cst.Set, cst.SetComp, cst.SimpleString, cst.ConcatenatedString,
                cst.FormattedString, cst.Integer, cst.Float)
_MASK_WORDS = ("mask",)


def _mask_of(src: Source, target: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The mask in ``x * mask`` (directly, or the value a name was bound to just above), whose kept
    positions a mean should count; None when ``target`` is no such product."""
    value = _bound_value(src, target) if isinstance(target, cst.Name) else target
    if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply)):
        return None
    for side in (value.right, value.left):
        if any(w in src.code(side).lower() for w in _MASK_WORDS):
            return side
    return None


def _stacked_losses(ctx: Context, src: Source, target: cst.BaseExpression) -> bool:
    """Is ``target`` ``torch.stack(...)`` of a list of losses spelled out here (a list or tuple
    display, a comprehension, or a name bound to one), directly or through a name bound to it,
    with no per-sample loss found by the locator (whose entries would be vectors)?"""
    if any(s.kind in ("criterion-reduction", "per-sample-return") for s in ctx.diag.fix_sites):
        return False

    def stack_arg(e: Optional[cst.CSTNode]) -> Optional[cst.BaseExpression]:
        if isinstance(e, cst.Call) and dotted(e.func) in ("torch.stack", "stack") and len(e.args) == 1 \
                and e.args[0].keyword is None:
            return e.args[0].value
        return None

    arg = stack_arg(target) or (stack_arg(_bound_value(src, target)) if isinstance(target, cst.Name) else None)
    if isinstance(arg, cst.Name):
        arg = _bound_value(src, arg)
    return isinstance(arg, (cst.List, cst.Tuple, cst.ListComp))


def _bound_value(src: Source, name: cst.Name) -> Optional[cst.BaseExpression]:
    """The value of the one plain assignment to ``name`` closest above it in its block."""
    stmt = src.statement_of(name)
    block = src.parent(stmt) if stmt is not None else None
    body = getattr(block, "body", None)
    if not isinstance(body, (list, tuple)):
        return None
    for s in reversed(body[:next((i for i, x in enumerate(body) if x is stmt), 0)]):
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                        isinstance(small.targets[0].target, cst.Name) and small.targets[0].target.value == name.value:
                    return small.value
    return None


def _backward_target(call: cst.Call) -> Tuple[Optional[cst.BaseExpression], str]:
    """What must become a scalar, and the keyword that would carry an explicit gradient."""
    name = dotted(call.func)
    pos = positional(call)
    if name.endswith("autograd.backward") or (pos and name != ""):
        # torch.autograd.backward(x), accelerator.backward(loss), fabric.backward(loss)
        if keyword(call, "grad_tensors") or keyword(call, "gradient") or len(pos) > 1 and name.endswith("autograd.backward"):
            return None, ""
        tensors = keyword(call, "tensors")
        target = pos[0].value if pos else (tensors.value if tensors else None)
        return target, "grad_tensors" if name.endswith("autograd.backward") else "gradient"
    if not isinstance(call.func, cst.Attribute) or keyword(call, "gradient") or pos:
        return None, ""
    receiver = call.func.value
    if isinstance(receiver, cst.Call) and method_name(receiver) == "scale" and positional(receiver):
        return positional(receiver)[0].value, "gradient"     # scaler.scale(loss).backward()
    return receiver, "gradient"


def _left_uncovered(site: FixSite, options: List[Option]) -> List[Option]:
    """The locator found a use of the loss that a fix at this site leaves unreduced (another
    caller, the evaluation pass, a later ``loss.item()``): each option only moves the error."""
    if site.uncovered:
        for option in options:
            option.applicability, option.reason, option.alternative = "insufficient", site.uncovered, True
    return options


@fixer("backward-receiver")
def backward_receiver(ctx: Context, site: FixSite) -> List[Option]:
    return _left_uncovered(site, _backward_receiver(ctx, site))


def _backward_receiver(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    call = src.find(site.line, site.col, cst.Call, lambda n: method_name(n) == "backward"
                    or dotted(n.func).endswith("autograd.backward"))
    if call is None:
        # scaler.scale(loss) on a line of its own (the backward call elsewhere)
        call = src.find(site.line, site.col, cst.Call, lambda n: method_name(n) == "scale" and bool(positional(n)))
        if call is None:
            return []
        options = _reduction_options(ctx, src, positional(call)[0].value, "loss", site.path)
        number_use = _number_use(src, call, positional(call)[0].value, site.path)
        for option in options if number_use else ():
            option.applicability, option.reason, option.alternative = "insufficient", number_use, True
        return options
    target, grad_kw = _backward_target(call)
    if target is None:
        return []
    options = _reduction_options(ctx, src, target, "output", site.path)
    number_use = _number_use(src, call, target, site.path)
    if options and _used_later(src, call, target):
        # `loss` is read again after backward (loss.item(), return loss): reducing it where it is
        # assigned (another site) serves that code too, so that fix ranks first when offered.
        options[0].demote = True
    if options and not _is_complex(ctx) and not isinstance(target, (cst.List, cst.Tuple)) \
            and not _stacked_losses(ctx, src, target):  # there .sum() says the same plainly
        code = src.code(target).strip()
        ones = kwarg(grad_kw, expr(f"torch.ones_like({code})"))
        text = ensure_torch(src.replace(call, lambda n: add_arg(n, ones)))
        options.append(Option(f"Pass an explicit gradient: `{grad_kw}=torch.ones_like({code})`", "unsafe",
                              "equivalent to .sum(): per-element gradients are summed, so their scale grows "
                              "with the batch size", {site.path: text}, alternative=True))
    if number_use:
        # Reducing only inside backward() leaves `loss` a vector for the code that reads it next
        # (`loss.item()` raises "a Tensor with N elements cannot be converted to Scalar").
        for option in options:
            option.applicability, option.reason, option.alternative = "insufficient", number_use, True
    return options


# A value still "is" the loss through these (loss.detach().cpu().item()).
_PASS_THROUGH = {"detach", "cpu", "clone", "float", "double", "to", "data", "contiguous", "squeeze"}
_NUMBER_FUNCS = {"float", "int", "round", "bool", "print", "str", "format", "repr"}
_LOG_NAMES = ("log", "info", "debug", "warning", "warn", "error", "print", "write", "add_scalar",
              "set_postfix", "set_description")


def _number_use(src: Source, call: cst.Call, target: cst.BaseExpression, rel: str) -> str:
    """Why reducing ``target`` only at ``call`` is not enough: where it is used as a number
    (or handed on) after ``call`` in the same scope; "" when it is not."""
    if not isinstance(target, cst.Name):
        return ""
    scope = src.scope_of(call)
    end = src.positions[call].end.line
    for n in src.in_statement_of(scope, cst.Name):
        if n.value != target.value or src.positions[n].start.line <= end or n is target:
            continue
        # the same variable: read in this very scope, not in a function defined in it or after it
        own = src.scope_of(n)
        if own is not scope:
            continue
        how = _how_number(src, n)
        if how:
            line = src.positions[n].start.line
            stmt = src.small_statement_of(n) or n
            code = " ".join(src.code(stmt).split())
            if len(code) > 60:
                code = code[:57] + "..."
            if how == "returned":
                return (f"'{n.value}' is returned at {rel}:{line} ({code}), so its caller gets the "
                        f"unreduced value; reducing only at backward() leaves it a tensor of many elements there")
            return (f"'{n.value}' is used as a number at {rel}:{line} ({code}); reducing only at backward() "
                    f"crashes there")
    return ""


def _how_number(src: Source, node: cst.CSTNode) -> str:
    """"number" / "returned" when this read of the loss needs a scalar; "" otherwise."""
    cur = node
    while True:  # climb through loss.detach().cpu() ...
        parent = src.parent(cur)
        if isinstance(parent, cst.Attribute) and parent.value is cur:
            attr = parent.attr.value
            if attr == "item":
                return "number"
            if attr == "data":
                cur = parent
                continue
            grand = src.parent(parent)
            if attr in _PASS_THROUGH and isinstance(grand, cst.Call) and grand.func is parent:
                cur = grand
                continue
            return ""
        break
    parent = src.parent(cur)
    if isinstance(parent, (cst.Return, cst.Yield)) or _returned_branch(src, cur):
        return "returned"
    if isinstance(parent, cst.AugAssign) and parent.value is cur and _number_total(src, parent):
        return "number"
    if isinstance(parent, (cst.FormattedStringExpression, cst.Comparison, cst.ComparisonTarget)):
        return "number"
    if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Modulo) \
            and parent.right is cur and isinstance(parent.left, (cst.SimpleString, cst.ConcatenatedString)):
        return "number"
    if isinstance(parent, cst.Tuple):  # "%f %f" % (loss, acc)
        grand = src.parent(parent)
        if isinstance(grand, cst.BinaryOperation) and isinstance(grand.operator, cst.Modulo) \
                and isinstance(grand.left, (cst.SimpleString, cst.ConcatenatedString)):
            return "number"
    if isinstance(parent, cst.Element):
        grand = src.parent(parent)
        greater = src.parent(grand) if grand is not None else None
        if isinstance(grand, cst.Tuple) and isinstance(greater, cst.BinaryOperation) \
                and isinstance(greater.operator, cst.Modulo):
            return "number"
    if isinstance(parent, cst.Arg):
        func = src.parent(parent)
        if isinstance(func, cst.Call):
            name = dotted(func.func) or method_name(func)
            last = name.rsplit(".", 1)[-1]
            if name in _NUMBER_FUNCS or last == "format" or last.startswith(_LOG_NAMES) or "log" in last:
                return "number"
    return ""


def _returned_branch(src: Source, node: cst.CSTNode) -> bool:
    """``node`` is what a branch of a conditional return hands back as the loss, alone or first in
    a tuple: ``return (loss, outputs) if return_outputs else loss`` (Hugging Face's compute_loss)."""
    parent = src.parent(node)
    if isinstance(parent, cst.Element):
        tup = src.parent(parent)
        if not (isinstance(tup, cst.Tuple) and tup.elements and tup.elements[0] is parent):
            return False
        node, parent = tup, src.parent(tup)
    return isinstance(parent, cst.IfExp) and node is not parent.test and isinstance(src.parent(parent), cst.Return)


def _number_total(src: Source, aug: cst.AugAssign) -> bool:
    """``total_loss += loss`` into a running total that starts as a number (``total_loss = 0``):
    one number per step is what the total adds up."""
    if not (isinstance(aug.operator, (cst.AddAssign, cst.SubtractAssign)) and isinstance(aug.target, cst.Name)):
        return False
    scope, line = src.scope_of(aug), src.positions[aug].start.line
    starts = [t for t in src.in_statement_of(scope, cst.AssignTarget)
              if isinstance(t.target, cst.Name) and t.target.value == aug.target.value
              and src.positions[t].start.line < line]
    if not starts:
        return False
    value = src.parent(starts[-1]).value
    while isinstance(value, cst.UnaryOperation):
        value = value.expression
    return isinstance(value, (cst.Integer, cst.Float))


def _used_later(src: Source, call: cst.Call, target: cst.BaseExpression) -> bool:
    if not isinstance(target, cst.Name):
        return False
    scope = next((a for a in src.ancestors(call) if isinstance(a, cst.FunctionDef)), src.module)
    end = src.positions[call].end.line
    # (the Names of scope's top-level statement hold every Name under scope: no need for the file's)
    return any(n.value == target.value and src.positions[n].start.line > end
               for n in src.in_statement_of(scope, cst.Name) if any(a is scope for a in src.ancestors(n)))


@fixer("loss-assignment", "per-sample-return")
def loss_value(ctx: Context, site: FixSite) -> List[Option]:
    return _left_uncovered(site, _loss_value(ctx, site))


def _loss_value(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    if site.kind == "per-sample-return":
        node = src.find(site.line, site.col, cst.Return, lambda n: n.value is not None)
        what = "returned loss"
    else:
        node = src.find(site.line, site.col, (cst.Assign, cst.AnnAssign), lambda n: n.value is not None)
        what = "assigned loss"
    if node is None:
        return []
    value = _loss_element(node.value, _backward_key(ctx))
    if value is None:
        return []
    options = _reduction_options(ctx, src, value, what, site.path)
    if site.kind == "per-sample-return":
        on_purpose = _on_purpose(src, node, site.path)
        why_for = lambda how: on_purpose or _assigned_read(ctx, how) or _read_after_backward(ctx, how)  # noqa: E731
        options = _mark_per_sample(ctx, options, why_for)
        built = _ask_for_mean(ctx, src, node) if on_purpose else None
        return ([built] if built is not None else []) + _with_terms(ctx, src, value, site.path, options, why_for)
    why_for = lambda how: (_per_sample_read(src, node, _target_name(node), site.path, how)  # noqa: E731
                           or _assigned_read(ctx, how))
    return _with_terms(ctx, src, value, site.path, _mark_per_sample(ctx, options, why_for), why_for)


def _with_terms(ctx: Context, src: Source, value: cst.BaseExpression, rel: str, options: List[Option],
                why_for) -> List[Option]:
    """``BCE + KLD`` where BCE is already reduced (``reduction="sum"``) and KLD holds one value per
    sample (``torch.sum(..., dim=1)``): the scalar term is added to every sample, so reducing the
    whole counts it again (``.sum()``: once per sample) or weighs the terms unlike their own
    reductions (``.mean()``).  Reduce the per-sample terms the way the scalar terms are reduced."""
    if _is_complex(ctx):
        return options
    terms = _terms(value)
    kinds = [_term_reduction(src, t) for t in terms]
    scalar = {k for k in kinds if k in ("sum", "mean")}
    per_sample = [t for t, k in zip(terms, kinds) if k == "per-sample"]
    if len(scalar) != 1 or not per_sample or any(k == "" for k in kinds):
        return options
    how = scalar.pop()
    reduced_code = ", ".join(f"`{src.code(t).strip()}`" for t, k in zip(terms, kinds) if k == how)
    for option in options:
        if option.applicability == "insufficient" or option.applicability == "unsafe" and \
                not option.reason.startswith("gradients then grow"):
            continue        # (a per-sample read elsewhere is the stronger reason)
        whole = "weighs the terms unlike their own reductions" if "with .mean()" in option.summary \
            else "counts it once per sample"
        option.applicability, option.alternative = "unsafe", True
        option.reason = f"{reduced_code} is already reduced ({how}) and is added to every sample: reducing the whole {whole}"
    names = ", ".join(f"`{src.code(t).strip()}`" for t in per_sample)
    holder = {id(t) for t in per_sample}
    text = src.replace(value, lambda n: _reduce_terms(n, holder, how, terms))
    why = why_for(how)
    return [Option(f"Reduce the per-sample term {names} with .{how}(), as {reduced_code} is reduced "
                   f"(the terms keep their own weights)", "unsafe" if why else "safe", why,
                   {rel: text}, alternative=bool(why))] + options


def _terms(node: cst.BaseExpression) -> List[cst.BaseExpression]:
    """The terms of a sum/difference (``a + b - c`` -> a, b, c)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
        return _terms(node.left) + _terms(node.right)
    return [node]


def _term_reduction(src: Source, term: cst.BaseExpression, depth: int = 0) -> str:
    """"sum" / "mean": a term reduced so; "per-sample": reduced over some dims only or built with
    reduction="none"; "number": a plain number factor; "" when it cannot be told."""
    if depth > 4:
        return ""
    if isinstance(term, (cst.Integer, cst.Float)):
        return "number"
    if isinstance(term, cst.UnaryOperation):
        return _term_reduction(src, term.expression, depth + 1)
    if isinstance(term, cst.BinaryOperation) and isinstance(term.operator, (cst.Multiply, cst.Divide)):
        sides = [_term_reduction(src, t, depth + 1) for t in (term.left, term.right)]
        real = [k for k in sides if k != "number"]
        return real[0] if len(real) == 1 else ""
    if isinstance(term, cst.Name):
        bound = _bound_value(src, term)
        return _term_reduction(src, bound, depth + 1) if bound is not None else ""
    if not isinstance(term, cst.Call):
        return ""
    red = keyword(term, "reduction")
    if red is not None:
        mode = _string_value(red.value)
        return {"sum": "sum", "mean": "mean", "none": "per-sample"}.get(mode or "", "")
    last = (dotted(term.func) or method_name(term)).rsplit(".", 1)[-1]
    if last in ("sum", "mean"):
        tensors = 1 if dotted(term.func).startswith("torch.") else 0
        return "per-sample" if _over_some_dims(term, tensors) else last
    if last.endswith("_loss") or last in ("cross_entropy", "binary_cross_entropy", "kl_div"):
        return "mean"       # a functional loss reduces with the mean unless told otherwise
    return ""


def _reduce_terms(node: cst.BaseExpression, holder, how: str, originals) -> cst.BaseExpression:
    """``node`` (an updated copy of the sum) with each per-sample term reduced with ``how``."""
    terms = _terms(node)
    flags = [id(t) in holder for t in originals]

    def rebuild(n: cst.BaseExpression, it) -> cst.BaseExpression:
        if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, (cst.Add, cst.Subtract)):
            return n.with_changes(left=rebuild(n.left, it), right=rebuild(n.right, it))
        return _reduce(n, how) if next(it) else n
    return rebuild(node, iter(flags)) if len(terms) == len(originals) else node


def _backward_key(ctx: Context) -> str:
    """The dict key backward() is called through at the crash site (``losses["total"].backward()``
    -> "total"); "loss" otherwise (the convention of HF outputs)."""
    crash = ctx.diag.crash_site
    src = ctx.source(crash.path) if crash is not None else None
    call = src.find(crash.line, crash.col, cst.Call, lambda n: method_name(n) == "backward") \
        if src is not None else None
    target = _backward_target(call)[0] if call is not None else None
    if isinstance(target, cst.Subscript) and len(target.slice) == 1 and \
            isinstance(target.slice[0].slice, cst.Index):
        key = _string_value(target.slice[0].slice.value)
        if key:
            return key
    return "loss"


def _loss_element(value: cst.BaseExpression, key: str = "loss") -> Optional[cst.BaseExpression]:
    """What to reduce in a returned or assigned value: in a dict display, its ``key`` entry (the
    one backward() reads: ``losses["total"].backward()``; by default "loss", the convention of HF
    outputs and training loops); None when a dict has none."""
    if isinstance(value, cst.IfExp) and any(isinstance(b, (cst.Tuple, cst.List, cst.Dict))
                                            for b in (value.body, value.orelse)):
        return None     # `(loss, outputs) if return_outputs else loss`: a tuple is not reduced whole
    if not isinstance(value, cst.Dict):
        return value
    for el in value.elements:
        if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) \
                and el.key.evaluated_value == key:
            return el.value
    return None


def _mark_per_sample(ctx: Context, options: List[Option], why_for) -> List[Option]:
    """Options that would change what later code reads: unsafe, and never recommended.
    ``why_for(how)`` says why for the option reducing with ``how`` (mean, then sum)."""
    hows = ("", "") if _is_complex(ctx) else ("mean", "sum")
    for i, option in enumerate(options):
        why = why_for(hows[i] if i < len(hows) else "")
        if why:
            option.applicability, option.reason, option.alternative = "unsafe", why, True
    return options


def _target_name(node: cst.CSTNode) -> str:
    """The one plain name an assignment binds ('' for tuples, attributes, several targets)."""
    if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
        return node.targets[0].target.value
    if isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name):
        return node.target.value
    return ""


def _assigned_read(ctx: Context, how: str = "") -> str:
    """The per-sample read of the variable the locator's loss-assignment sites bind (where a
    criterion or loss function reduced at its source would hand that variable a scalar)."""
    for other, src, node in _sites_nodes(ctx, ("loss-assignment",), (cst.Assign, cst.AnnAssign), _has_value):
        why = _per_sample_read(src, node, _target_name(node), other.path, how)
        if why:
            return why
    return ""


def _has_value(n: cst.CSTNode) -> bool:
    return n.value is not None


def _sites_nodes(ctx: Context, kinds: Tuple[str, ...], types, test):
    """(site, its Source, its node of ``types`` passing ``test``) for the diagnosis's fix sites of
    ``kinds`` whose file parses and holds such a node."""
    for other in ctx.diag.fix_sites:
        if other.kind not in kinds:
            continue
        src = ctx.source(other.path)
        node = src.find(other.line, other.col, types, test) if src is not None else None
        if node is not None:
            yield other, src, node


def _reads(src: Source, scope: cst.CSTNode, name: str) -> List[cst.Name]:
    """Loads of ``name`` in ``scope`` itself (not in functions defined in it), in file order."""
    out = []
    for n in src.in_statement_of(scope, cst.Name):
        if n.value != name or src.scope_of(n) is not scope or not _is_load(src, n):
            continue
        out.append(n)
    return out


def _is_load(src: Source, n: cst.Name) -> bool:
    cur, up = n, src.parent(n)
    while isinstance(up, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        cur, up = up, src.parent(up)
    if cur is not n:                                 # `logits, loss = model(x, y)` binds loss
        return not (isinstance(up, (cst.AssignTarget, cst.For, cst.CompFor)) and up.target is cur)
    parent = src.parent(n)
    if isinstance(parent, cst.Attribute):
        return parent.attr is not n
    if isinstance(parent, (cst.AssignTarget, cst.For, cst.CompFor)):
        return parent.target is not n
    if isinstance(parent, cst.Arg):
        return parent.keyword is not n
    return not isinstance(parent, (cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.AsName,
                                   cst.Del))


def _per_sample_read(src: Source, stmt: cst.CSTNode, name: str, rel: str, how: str = "") -> str:
    """Why giving ``name`` a scalar (reduced with ``how``) at ``stmt`` changes behaviour: its first
    later read (same scope; in a loop, the reads before ``stmt`` too, as the next pass sees them)
    that a scalar does not serve as the per-sample value did; "" when every read is backward() or
    a number."""
    if not name:
        return ""
    scope = src.scope_of(stmt)
    start, end = src.positions[stmt].start.line, src.positions[stmt].end.line
    rebound = [src.positions[t].start.line for t in src.in_statement_of(scope, cst.AssignTarget)
               if isinstance(t.target, cst.Name) and t.target.value == name and src.positions[t].start.line > end]
    stop = min(rebound, default=10 ** 9)
    loops = [a for a in src.ancestors(stmt) if isinstance(a, (cst.For, cst.While))
             and any(b is scope for b in src.ancestors(a))]
    loop_start = src.positions[loops[-1]].start.line if loops else start
    for n in _reads(src, scope, name):
        line = src.positions[n].start.line
        if not (end < line <= stop or loop_start <= line < start) or _scalar_serves(src, n, how):
            continue
        stmt_code = " ".join(src.code(src.small_statement_of(n) or n).split())
        if len(stmt_code) > 60:
            stmt_code = stmt_code[:57] + "..."
        return (f"'{name}' is also used per sample at {rel}:{line} ({stmt_code}); "
                f"reducing it here changes that")
    return ""


def _scalar_serves(src: Source, n: cst.Name, how: str = "") -> bool:
    """A read that a scalar serves as well: backward() itself, or a use as a number (also after
    ``.how()``: the mean of a mean is the same number, ``loss.mean().item()``)."""
    cur = n
    while True:  # through loss.detach().cpu()
        parent = src.parent(cur)
        grand = src.parent(parent) if isinstance(parent, cst.Attribute) and parent.value is cur else None
        if isinstance(grand, cst.Call) and grand.func is parent and (
                parent.attr.value in _PASS_THROUGH or parent.attr.value == how and not grand.args):
            cur = grand
            continue
        break
    parent = src.parent(cur)
    while isinstance(parent, cst.BinaryOperation) and _scaled_by_number(parent, cur):
        cur = parent                          # (loss / accum_steps).backward()
        parent = src.parent(cur)
    parent = src.parent(cur)
    if isinstance(parent, cst.Attribute) and parent.value is cur and parent.attr.value == "backward":
        return True
    if isinstance(parent, cst.Arg) and isinstance(src.parent(parent), cst.Call):
        # accelerator.backward(loss), scaler.scale(loss).backward()
        if (dotted(src.parent(parent).func) or "").rsplit(".", 1)[-1] in ("backward", "scale"):
            return True
    if isinstance(parent, cst.Del):
        return True
    # A returned loss counts as a number too: its callers' reads are not followed here.
    return _how_number(src, cur) in ("number", "returned")


def _scaled_by_number(op: cst.BinaryOperation, operand: cst.CSTNode) -> bool:
    """``operand / n`` or ``n * operand`` with n a literal or a config value (``args.accum``,
    ``len(loader)``): scaling a scalar keeps it a scalar."""
    if isinstance(op.operator, cst.Divide) and op.left is operand:
        other = op.right
    elif isinstance(op.operator, cst.Multiply) and operand in (op.left, op.right):
        other = op.right if op.left is operand else op.left
    else:
        return False
    if isinstance(other, (cst.Integer, cst.Float)):
        return True
    if isinstance(other, cst.Attribute):
        return True
    return isinstance(other, cst.Call) and dotted(other.func) in ("len", "float", "int")


def _on_purpose(src: Source, ret: cst.Return, rel: str) -> str:
    """Why this unreduced return is deliberate: other returns of the same function reduce
    (``if self.reduction == "mean": return loss.mean()``), so this one is the per-sample branch."""
    fn = next((a for a in src.ancestors(ret) if isinstance(a, cst.FunctionDef)), None)
    if fn is None:
        return ""
    reduced = [r for r in src.in_statement_of(fn, cst.Return) if r is not ret and r.value is not None
               and src.scope_of(r) is fn and is_reduced(r.value)]
    if not reduced:
        return ""
    other = reduced[0]
    test = next((a.test for a in src.ancestors(other) if isinstance(a, cst.If)), None)
    when = f"none of its reducing branches applies ({' '.join(src.code(test).split())} returns " \
           f"{' '.join(src.code(other.value).split())} at {rel}:{src.positions[other].start.line})" \
        if test is not None else f"it does not reach {rel}:{src.positions[other].start.line}"
    cls = next((a for a in src.ancestors(fn) if isinstance(a, cst.ClassDef)), None)
    owner = f"{cls.name.value}." if cls is not None else ""
    return (f"{owner}{fn.name.value}() returns per-sample values on purpose when {when}; reducing this return "
            f"breaks every caller that asks for per-sample values")


def _reduction_default(src: Source, ret: cst.Return) -> Optional[cst.ClassDef]:
    """The loss class whose method holds ``ret`` when its ``__init__`` takes ``reduction="none"``
    by default and keeps it in ``self.reduction`` (so the caller chooses per-sample values)."""
    cls = next((a for a in src.ancestors(ret) if isinstance(a, cst.ClassDef)), None)
    init = next((f for f in (cls.body.body if cls is not None else ())
                 if isinstance(f, cst.FunctionDef) and f.name.value == "__init__"), None)
    if init is None:
        return None
    params = [*init.params.params, *init.params.kwonly_params]
    if not any(p.name.value == "reduction" and p.default is not None and _string_value(p.default) == "none"
               for p in params):
        return None
    kept = any(isinstance(a.value, cst.Name) and a.value.value == "reduction" and len(a.targets) == 1
               and src.code(a.targets[0].target).strip() == "self.reduction"
               for a in src.in_statement_of(init, cst.Assign))
    return cls if kept else None


def _ask_for_mean(ctx: Context, src: Source, ret: cst.Return) -> Optional[Option]:
    """Build the loss object with reduction="mean" where the crashing code constructs it
    (``self.criterion = FocalLoss()``), leaving the class and its per-sample mode alone."""
    cls = _reduction_default(src, ret)
    if cls is None:
        return None
    for other, osrc, node in _sites_nodes(ctx, ("loss-assignment",), (cst.Assign, cst.AnnAssign), _has_value):
        if not isinstance(node.value, cst.Call):
            continue
        holder = osrc.code(node.value.func).strip()         # self.criterion
        ctor = next((a.value for a in osrc.all(cst.Assign) if len(a.targets) == 1
                     and osrc.code(a.targets[0].target).strip() == holder and isinstance(a.value, cst.Call)
                     and dotted(a.value.func).rsplit(".", 1)[-1] == cls.name.value), None)
        if ctor is None or keyword(ctor, "reduction") or any(a.star for a in ctor.args) or positional(ctor):
            continue    # reduction given already, or perhaps positionally
        text = osrc.replace(ctor, lambda n: add_arg(n, kwarg("reduction", expr('"mean"'))))
        why = _per_sample_read(osrc, node, _target_name(node), other.path, "mean")
        calls = [c for c in osrc.all(cst.Call) if osrc.code(c.func).strip() == holder]
        elsewhere = next((c for c in calls if c is not node.value), None)
        if not why and elsewhere is not None:   # another use of the same object would get the mean too
            why = (f"{holder} is also called at {other.path}:{osrc.positions[elsewhere].start.line}, "
                   f"which then gets the mean too")
        line = osrc.positions[ctor].start.line
        return Option(f'Build {cls.name.value} with reduction="mean" at {other.path}:{line} (its default '
                      f"'none' returns per-sample values; {MEAN_WHY})", "unsafe" if why else "safe", why,
                      {other.path: text}, demote=bool(why))
    return None


def _string_value(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # pragma: no cover - odd prefixes
            return None
        return value if isinstance(value, str) else None
    return None


def _with_string(node: cst.SimpleString, new: str) -> cst.SimpleString:
    prefix_len = len(node.prefix)
    quote = node.quote
    return node.with_changes(value=node.value[:prefix_len] + quote + new + quote)


@fixer("criterion-reduction")
def criterion_reduction(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    arg = src.find(site.line, site.col, cst.Arg,
                   lambda a: a.keyword is not None and a.keyword.value == "reduction" and _string_value(a.value) == "none")
    if arg is None:
        return []
    value = arg.value
    call = src.parent(arg)
    # F.cross_entropy(..., reduction="none") assigned straight to a name: that name gets the scalar
    # (a constructor's name is the criterion itself: the locator's loss-assignment sites hold its output).
    direct = src.parent(call) if isinstance(call, cst.Call) and \
        (dotted(call.func) or "x").rsplit(".", 1)[-1][:1].islower() else None
    def why_for(how: str) -> str:
        return (_per_sample_read(src, direct, _target_name(direct), site.path, how)
                if isinstance(direct, (cst.Assign, cst.AnnAssign)) else "") or _assigned_read(ctx, how)
    return _mark_per_sample(ctx, [
        Option("Let the criterion average the per-sample losses: reduction='mean' "
               f"({MEAN_WHY})", "safe", "", {site.path: src.replace(value, lambda n: _with_string(n, "mean"))}),
        Option("Let the criterion sum the per-sample losses: reduction='sum'", "unsafe",
               "gradients then grow with the batch size", {site.path: src.replace(value, lambda n: _with_string(n, "sum"))},
               alternative=True),
    ], why_for)


@fixer("autograd-grad")
def autograd_grad(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    call = src.find(site.line, site.col, cst.Call,
                    lambda n: dotted(n.func) in ("torch.autograd.grad", "autograd.grad"))
    if call is None or keyword(call, "grad_outputs") or len(positional(call)) > 2:
        return []
    pos = positional(call)
    outputs = pos[0].value if pos else (keyword(call, "outputs").value if keyword(call, "outputs") else None)
    if outputs is None or all(is_reduced(e) for e in _elements(outputs)):
        return []
    elems = _elements(outputs)
    codes = [src.code(e).strip() for e in elems]
    if isinstance(outputs, (cst.List, cst.Tuple)):
        ones_code = "[" + ", ".join(f"torch.ones_like({c})" for c in codes) + "]"
    else:
        ones_code = f"torch.ones_like({codes[0]})"
    with_ones = ensure_torch(src.replace(call, lambda n: add_arg(n, kwarg("grad_outputs", expr(ones_code)))))
    return [
        Option(f"Give torch.autograd.grad an explicit grad_outputs={ones_code} (the gradient of the sum of the outputs, "
               "per input element)", "safe", "", {site.path: with_ones}),
        Option(f"Differentiate the sum of the outputs: `{codes[0]}.sum()`", "safe", "",
               {site.path: src.replace(outputs, lambda n: _reduce(n, "sum"))}, alternative=True),
    ]
