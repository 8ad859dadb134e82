"""F3: trainable parameters in fp16/bf16 under a GradScaler (casts, dtypes, the scaler itself),
and the autocast block that keeps the forward in half precision once the weights are fp32."""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.cstedit import (Source, add_arg, dotted, ensure_torch, expr, keyword, kwarg, method_name,
                                      positional, remove_arg)
from tracefix.records import FixSite

TO_FLOAT32 = {"float16": "float32", "half": "float32", "bfloat16": "float32",
              "HalfTensor": "FloatTensor", "BFloat16Tensor": "FloatTensor"}
_HALF_NAMES = {"float16": "float16", "half": "float16", "HalfTensor": "float16",
               "bfloat16": "bfloat16", "BFloat16Tensor": "bfloat16"}
_HALF_STRINGS = {"float16": "float16", "half": "float16", "fp16": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16"}
_CAST_KEEP_KWARGS = {"non_blocking", "copy", "memory_format"}
_MOVES = {"to", "cuda", "cpu", "half", "float", "bfloat16", "double", "long", "int", "contiguous", "pin_memory"}


def half_dtype(node: cst.CSTNode) -> str:
    """"float16" / "bfloat16" when ``node`` spells a half-precision dtype, else ""."""
    if isinstance(node, (cst.Attribute, cst.Name)):
        name = dotted(node)
        last = name.rsplit(".", 1)[-1]
        if last in _HALF_NAMES and (name.startswith("torch.") or isinstance(node, cst.Name)):
            return _HALF_NAMES[last]
    if isinstance(node, cst.SimpleString):
        try:
            return _HALF_STRINGS.get(str(node.evaluated_value), "")
        except Exception:  # pragma: no cover
            return ""
    return ""


def cast_info(call: cst.CSTNode) -> Optional[Tuple[str, Optional[cst.Arg]]]:
    """(dtype, None) when the whole call goes; (dtype, arg) when only that argument goes."""
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
        return None
    name = method_name(call)
    if name in ("half", "bfloat16") and not call.args:
        return ("float16" if name == "half" else "bfloat16"), None
    if name not in ("to", "type"):
        return None
    for arg in call.args:
        if (arg.keyword is None or arg.keyword.value == "dtype") and not arg.star and half_dtype(arg.value):
            others = [a for a in call.args if a is not arg and not (a.keyword and a.keyword.value in _CAST_KEEP_KWARGS)]
            return half_dtype(arg.value), (arg if others else None)
    return None


def _root(node: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        node = node.func.value
    return node


# -- deleting a statement, and the comments that described it ---------------------------------------
# A comment on (or directly above) a removed cast described the cast: left behind it would be an
# orphan ("# the base model was released in fp16" above nothing).  On a line that keeps the rest
# of its code, only a comment about precision goes.
_PRECISION_WORDS = re.compile(r"fp16|bf16|half|float16|bfloat16|precision|memory", re.IGNORECASE)


def _comment_run(lines: Sequence[cst.EmptyLine]) -> int:
    """Index where the run of comment lines directly above a statement starts."""
    k = len(lines)
    while k > 0 and lines[k - 1].comment is not None:
        k -= 1
    return k


def _drop_cast_comments(line: cst.CSTNode, everything: bool) -> cst.CSTNode:
    """``line`` without the comments about the cast: the run directly above it and its trailing one
    (all of them when the statement goes, those about precision when it stays)."""
    changes = {}
    lead = list(getattr(line, "leading_lines", ()))
    k = _comment_run(lead)
    if k < len(lead) and (everything or any(_PRECISION_WORDS.search(c.comment.value) for c in lead[k:])):
        changes["leading_lines"] = lead[:k]
    trailing = getattr(line, "trailing_whitespace", None)
    if trailing is not None and trailing.comment is not None and (
            everything or _PRECISION_WORDS.search(trailing.comment.value)):
        changes["trailing_whitespace"] = trailing.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
    return line.with_changes(**changes) if changes else line


def _replace_in_line(src: Source, old: cst.CSTNode, make) -> Optional[str]:
    """Replace ``old`` by ``make(old)``, and drop the comments of its line that spoke of the cast."""
    line = src.statement_of(old)
    if not isinstance(line, cst.SimpleStatementLine):
        return src.replace(old, make)
    new = make(old)
    return src.replace(line, lambda n: _drop_cast_comments(n.deep_replace(old, new), everything=False))


def _pure(node: cst.CSTNode) -> bool:
    """No call in ``node``: dropping it (an if's test) drops no side effect."""
    class Calls(cst.CSTVisitor):
        found = False

        def visit_Call(self, n: cst.Call) -> None:
            Calls.found = True

    node.visit(Calls())
    return not Calls.found


def _delete_small(src: Source, small: cst.BaseSmallStatement) -> Optional[str]:
    line = src.parent(small)
    if isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and len(line.body) > 1:
        def drop(n):
            body = [s for s, o in zip(n.body, line.body) if o is not small]
            body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            return n.with_changes(body=body)
        return src.replace(line, drop)
    return _delete_statement(src, line, small)


def _delete_statement(src: Source, line: cst.CSTNode, small: cst.CSTNode) -> Optional[str]:
    """Remove statement ``line``; a block it empties goes too (``if args.fp16:`` with nothing left
    under it), or keeps a meaningful condition (``if not args.fp16:`` over the else branch)."""
    block = src.parent(line)
    owner = src.parent(block) if block is not None else None
    if isinstance(line, cst.SimpleStatementSuite) or not isinstance(block, (cst.Module, cst.IndentedBlock)):
        return src.replace(small, lambda n: cst.Pass())
    if len(block.body) == 1:
        if isinstance(owner, cst.If) and isinstance(src.parent(owner), (cst.Module, cst.IndentedBlock)) \
                and _pure(owner.test):
            if owner.orelse is None:
                return _delete_statement(src, owner, owner)
            if isinstance(owner.orelse, cst.Else):
                from tracefix.patcher.cstedit import parenthesize

                negated = cst.UnaryOperation(operator=cst.Not(), expression=parenthesize(owner.test))
                return src.replace(owner, lambda n: n.with_changes(test=negated, body=n.orelse.body, orelse=None))
        return src.replace(line, lambda n: _drop_cast_comments(n, everything=True).with_changes(
            body=[cst.Pass()]) if isinstance(n, cst.SimpleStatementLine) else n)
    carry = list(line.leading_lines)[:_comment_run(line.leading_lines)]
    index = next(i for i, s in enumerate(block.body) if s is line)
    last = index == len(block.body) - 1

    def make(body, i):
        rest = body[:i] + body[i + 1:]
        if not last:
            rest[i] = rest[i].with_changes(leading_lines=carry + list(rest[i].leading_lines))
        return rest

    return src.edit_body(line, make, footer=(lambda f: carry + list(f)) if last else None)


# -- autocast around the forward ------------------------------------------------------------------
def _is_autocast(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.With) and any(
        isinstance(i.item, cst.Call) and "autocast" in dotted(i.item.func) for i in node.items)


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: Set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def _names(node: cst.CSTNode) -> Set[str]:
    v = _Names()
    node.visit(v)
    return v.names


def _assigned(small: cst.CSTNode) -> Set[str]:
    if isinstance(small, cst.Assign):
        return set().union(*(_names(t.target) for t in small.targets))
    if isinstance(small, (cst.AnnAssign, cst.AugAssign)):
        return _names(small.target)
    return set()


def _is_move(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Tuple):
        return all(_is_move(e.value) for e in value.elements)
    while isinstance(value, cst.Call) and method_name(value) in _MOVES:
        value = value.func.value
    return isinstance(value, (cst.Name, cst.Attribute, cst.Subscript))


def _quote(src: Source) -> str:
    strings = src.all(cst.SimpleString)
    single = sum(1 for s in strings if s.quote == "'")
    return "'" if single > len(strings) - single else '"'


def _scaler_device(loop: Source, others: Sequence[Source]) -> str:
    q = _quote(loop)
    for src in (loop, *others):
        for call in src.all(cst.Call, lambda n: dotted(n.func).endswith("GradScaler")):
            name = dotted(call.func)
            if "cuda.amp" in name:
                return f"{q}cuda{q}"
            if "cpu.amp" in name:
                return f"{q}cpu{q}"
            pos = positional(call)
            dev = keyword(call, "device") or (pos[0] if pos else None)
            if dev is None:
                return f"{q}cuda{q}"
            if isinstance(dev.value, cst.SimpleString) or (
                    isinstance(dev.value, cst.Attribute) and dev.value.attr.value == "type" and src is loop):
                return src.code(dev.value).strip()
            if isinstance(dev.value, cst.Name) and src is loop:
                var = dev.value.value
                for a in src.all(cst.Assign, lambda n: var in _assigned(n)):
                    if isinstance(a.value, cst.Call) and dotted(a.value.func) in ("torch.device", "device"):
                        return f"{var}.type"
                return var
            return f"{q}cuda{q}"
    return f"{q}cuda{q}"


def wrap_autocast(loop: Source, others: Sequence[Source], dtype: str) -> Optional[str]:
    """Wrap the statements from the forward call to the loss (before ``scaler.scale(loss)``) in
    ``with torch.autocast(...)``; None when there is no such loop or it is already wrapped."""
    for call in loop.all(cst.Call, lambda n: method_name(n) == "scale" and len(positional(n)) == 1):
        loss = positional(call)[0].value
        if not isinstance(loss, cst.Name):
            continue
        stmt = loop.statement_of(call)
        if stmt is None or any(_is_autocast(a) for a in loop.ancestors(stmt)):
            return None
        block = loop.parent(stmt)
        if not isinstance(block, (cst.Module, cst.IndentedBlock)):
            continue
        body = list(block.body)
        k = next(i for i, s in enumerate(body) if s is stmt)
        end = None
        for i in range(k - 1, -1, -1):
            s = body[i]
            if _is_autocast(s):
                return None
            if isinstance(s, cst.SimpleStatementLine) and any(loss.value in _assigned(x) for x in s.body):
                end = i
                break
        if end is None:
            continue
        needed = _names(body[end])
        start = end
        for i in range(end - 1, -1, -1):
            s = body[i]
            if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
                    and isinstance(s.body[0], (cst.Assign, cst.AnnAssign)) and s.body[0].value is not None):
                break
            if not (_assigned(s.body[0]) & needed) or _is_move(s.body[0].value):
                break
            needed |= _names(s)
            start = i
        if any(_is_autocast(s) for s in body[:start]):
            return None  # the forward already runs under autocast (its own dtype): nothing to add
        device = _scaler_device(loop, others)
        item = expr(f"torch.autocast(device_type={device}, dtype=torch.{dtype})")

        def make(b, i, start=start, end=end):
            group = b[start:end + 1]
            inner = [group[0].with_changes(leading_lines=[])] + group[1:]
            w = cst.With(items=[cst.WithItem(item=item)], body=cst.IndentedBlock(body=inner),
                         leading_lines=group[0].leading_lines)
            return b[:start] + [w] + b[end + 1:]

        text = loop.edit_body(body[start], make)
        return None if text is None else ensure_torch(text)
    return None


def _candidates(ctx: Context, rel: str) -> List[str]:
    names = [rel]
    if ctx.diag.crash_site is not None:
        names.append(ctx.diag.crash_site.path)
    names += [s.path for s in ctx.diag.fix_sites]
    names += ctx.frame_files()
    # the locator may not name the training script: look beside the fix site (cheap, bounded)
    folder = (ctx.root / rel).parent
    try:
        siblings = sorted(p for p in folder.glob("*.py") if p.is_file())[:50]
    except OSError:
        siblings = []
    for p in siblings:
        try:
            names.append(p.relative_to(ctx.root).as_posix())
        except ValueError:
            pass
    out: List[str] = []
    for n in names:
        if n and n not in out:
            out.append(n)
    return out


def _half_maths(texts: Dict[str, str], rel: str, text: str, name: str) -> str:
    """Where the half-precision maths comes from after the patch, for its description."""
    if len(texts) > 1 or texts[rel] != text:
        return f"the added torch.autocast computes in {name}"
    return "half-precision maths is autocast's job, not the weights'"


def with_autocast(ctx: Context, rel: str, new_text: str, dtype: str) -> Dict[str, str]:
    """{rel: new_text} plus the autocast wrapping, in ``rel`` or in the file holding the loop."""
    texts = {rel: new_text}
    cands = _candidates(ctx, rel)
    if not any("scale" in (new_text if c == rel else (ctx.text(c) or "")) for c in cands):
        return texts  # no candidate can hold the scaler loop: nothing to parse
    sources: Dict[str, Source] = {}
    for cand in cands:
        src = ctx.source(cand, new_text if cand == rel else None)
        if src is not None:
            sources[cand] = src
    for cand, src in sources.items():
        if "scale" not in src.text:  # cheap prefilter before walking the tree
            continue
        wrapped = wrap_autocast(src, [s for c, s in sources.items() if c != cand], dtype)
        if wrapped is not None:
            texts[cand] = wrapped
            break
    return texts


# -- casts coupled to the model's: inputs cast only to match the half model ---------------------------
def _feeds_model(src: Source, name: str, scope: cst.CSTNode, after: int, model: str) -> bool:
    """Is ``name`` passed (after line ``after``, in ``scope``) straight to a call of ``model``?"""
    for call in src.all(cst.Call, lambda c: (dotted(c.func) or "").split(".forward")[0] == model):
        if src.line_of(call) < after or src.scope_of(call) is not scope:
            continue
        if any(isinstance(a.value, cst.Name) and a.value.value == name for a in call.args):
            return True
    return False


def _coupled_cast(src: Source, model: str, dtype: str):
    """The first half cast of an input that exists only to match the model's weights: its value
    goes straight into ``model(...)``, either inline (``model(x.half())``) or through a name
    (``images = images.half()`` ... ``model(images)``). (call, statement, whole-statement) or None."""
    for call in src.all(cst.Call, lambda c: (cast_info(c) or ("",))[0] == dtype):
        recv = _root(call.func.value)
        if dotted(recv) == model or (dotted(call.func.value) or "").startswith(model + "."):
            continue                                    # the model's own cast
        parent = src.parent(src.parent(call))            # Arg -> Call
        if isinstance(src.parent(call), cst.Arg) and isinstance(parent, cst.Call) and \
                (dotted(parent.func) or "").split(".forward")[0] == model:
            return call, None, False
        small = src.parent(call)
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            name = small.targets[0].target.value
            if _feeds_model(src, name, src.scope_of(call), src.line_of(call), model):
                whole = isinstance(call.func.value, cst.Name) and call.func.value.value == name \
                    and cast_info(call)[1] is None
                return call, small, whole
    return None


def drop_coupled_casts(ctx: Context, texts: Dict[str, str], rel: str, model: str, dtype: str) -> List[str]:
    """Remove, in the files around the fix, the input casts that only matched the half model
    (an evaluation helper's ``images = images.half()``): with float32 weights they would make the
    model see half inputs (``Input type (c10::Half) and bias type (float) should be the same``).
    Edits ``texts`` in place; returns the "file:line" of each removed cast."""
    removed: List[str] = []
    if not model:
        return removed
    for cand in _candidates(ctx, rel):
        text = texts.get(cand, ctx.text(cand))
        if text is None or model not in text or not ("half" in text or "float16" in text or "bfloat16" in text):
            continue
        for _ in range(8):
            src = Source.parse(text)
            found = _coupled_cast(src, model, dtype) if src is not None else None
            if found is None:
                break
            call, small, whole = found
            where = f"{cand}:{src.line_of(call)}"
            info = cast_info(call)
            if whole:
                new = _delete_small(src, small)
            elif info[1] is not None:
                new = _replace_in_line(src, call, lambda n, a=info[1]: remove_arg(n, a))
            else:
                new = _replace_in_line(src, call, lambda n: n.func.value)
            if new is None or new == text:
                break
            text = texts[cand] = new
            removed.append(where)
    return removed


# -- fixers ------------------------------------------------------------------------------------------
def _lora_block(src: Source, var: str) -> cst.BaseStatement:
    ind = src.module.default_indent
    code = f"for p in {var}.parameters():\n{ind}if p.requires_grad:\n{ind}{ind}p.data = p.data.float()\n"
    return cst.parse_statement(code, config=src.module.config_for_parsing)


def _family_dtype(ctx: Context) -> str:
    return "bfloat16" if "bf16" in (ctx.diag.entry_id or "") else "float16"


def _traced_cast(src: Source, site: FixSite, dtype: str) -> Optional[Tuple[cst.Call, str, Optional[cst.Arg]]]:
    """A ``.to(dev, dtype)`` whose dtype argument (at the site's column) the locator traced to a half
    dtype set elsewhere (``DTYPES[args.dtype]``, ``getattr(torch, cfg.param_dtype)``)."""
    def is_cast_arg(n: cst.CSTNode) -> bool:
        parent = src.parent(n)
        return isinstance(parent, cst.Call) and method_name(parent) in ("to", "type") and not n.star and \
            (n.keyword is None or n.keyword.value == "dtype")

    arg = src.find(site.line, site.col, cst.Arg, is_cast_arg)
    if arg is None:
        return None
    call = src.parent(arg)
    r = src.positions[arg]
    if not (r.start.line, r.start.column) <= (site.line, site.col) < (r.end.line, r.end.column):
        # the column does not name the argument: take the one torch reads as the dtype
        # (.to(dtype=...), or the second of .to(device, dtype)); a lone positional may be a device
        args = [a for a in call.args if is_cast_arg(a)]
        kw = [a for a in args if a.keyword is not None]
        pos = [a for a in args if a.keyword is None]
        arg = kw[0] if kw else (pos[1] if len(pos) == 2 else None)
        if arg is None:
            return None
    others = [a for a in call.args if a is not arg and not (a.keyword and a.keyword.value in _CAST_KEEP_KWARGS)]
    return call, dtype, (arg if others else None)


def _parameter_loop(src: Source, small: cst.CSTNode) -> Optional[cst.For]:
    """The ``for p in m.parameters():`` loop whose whole body is this cast (it goes with it)."""
    line = src.parent(small)
    block = src.parent(line) if line is not None else None
    loop = src.parent(block) if block is not None else None
    if not (isinstance(loop, cst.For) and isinstance(block, cst.IndentedBlock) and len(block.body) == 1
            and isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and loop.orelse is None):
        return None
    it = loop.iter
    if isinstance(it, cst.Call) and method_name(it) in ("parameters", "named_parameters"):
        return loop
    return None


@fixer("model-cast")
def model_cast(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    call = src.find(site.line, site.col, cst.Call, lambda n: cast_info(n) is not None)
    if call is not None:
        dtype, arg = cast_info(call)
    else:
        traced = _traced_cast(src, site, _family_dtype(ctx))
        if traced is None:
            return []
        call, dtype, arg = traced
    inner = call.func.value
    parent = src.parent(call)
    var = ""
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        var = src.code(parent.targets[0].target).strip()
    elif isinstance(parent, cst.Expr) and isinstance(_root(inner), (cst.Name, cst.Attribute)):
        var = src.code(_root(inner)).strip()
    cast_code = src.code(call).strip()
    if arg is not None:
        text = _replace_in_line(src, call, lambda n: remove_arg(n, arg))
    elif (isinstance(parent, cst.Expr) and isinstance(inner, (cst.Name, cst.Attribute))) or \
            (isinstance(parent, cst.Assign) and var == src.code(inner).strip()):
        loop = _parameter_loop(src, parent)
        text = _delete_statement(src, loop, loop) if loop is not None else _delete_small(src, parent)
    else:
        text = _replace_in_line(src, call, lambda n: n.func.value)
    if text is None:
        return []
    texts = with_autocast(ctx, site.path, text, dtype)
    name = "fp16" if dtype == "float16" else "bf16"
    autocast_note = " and run the forward under torch.autocast" if len(texts) > 1 or texts[site.path] != text else ""
    maths = _half_maths(texts, site.path, text, name)
    model = var if re.fullmatch(r"[A-Za-z_][\w.]*", var or "") else ""
    coupled = drop_coupled_casts(ctx, texts, site.path, model, dtype)
    coupled_note = (f"; also drop the input casts that only matched the {name} weights "
                    f"({', '.join(coupled[:3])}{', ...' if len(coupled) > 3 else ''})") if coupled else ""
    options = [Option(f"Keep the weights in float32: remove the {name} cast `{cast_code}`{autocast_note}{coupled_note}; "
                      f"GradScaler needs float32 parameters ({maths})", "safe", "", texts)]
    line = src.statement_of(call)
    in_loop = any(isinstance(a, cst.For) and var.split(".")[0] in _names(a.target) for a in src.ancestors(call))
    if var and not in_loop and isinstance(line, cst.SimpleStatementLine) and \
            isinstance(src.parent(line), (cst.Module, cst.IndentedBlock)):
        keep = src.edit_body(line, lambda b, i: b[:i + 1] + [_lora_block(src, var)] + b[i + 1:])
        if keep is not None:
            options.append(Option(f"Keep {var} in {name} but make its trainable parameters float32 after the cast "
                                  "(the usual fix for adapters/LoRA on a frozen half-precision model)", "unsafe",
                                  "frozen weights stay in half precision while trainable ones become float32; the "
                                  "forward must run under autocast to mix them",
                                  with_autocast(ctx, site.path, keep, dtype), alternative=True))
    return options


def _dtype_node(src: Source):
    def test(n: cst.CSTNode) -> bool:
        if not half_dtype(n):
            return False
        if isinstance(n, cst.Attribute):
            return dotted(n).startswith("torch.")
        parent = src.parent(n)
        if not isinstance(parent, cst.Arg):
            return False
        if isinstance(n, cst.SimpleString):
            return parent.keyword is not None and parent.keyword.value in ("dtype", "torch_dtype")
        return True
    return test


def _to_float32(src: Source, node: cst.CSTNode) -> str:
    if isinstance(node, cst.Attribute):
        return src.replace(node, lambda n: n.with_changes(attr=cst.Name(TO_FLOAT32[n.attr.value])))
    if isinstance(node, cst.SimpleString):
        prefix, q = node.prefix, node.quote
        return src.replace(node, lambda n: n.with_changes(value=f"{prefix}{q}float32{q}"))
    return ensure_torch(src.replace(node, lambda n: expr("torch.float32")))


@fixer("torch-dtype-fp16", "param-dtype", "default-dtype")
def dtype_fix(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    node = src.find(site.line, site.col, (cst.Attribute, cst.Name, cst.SimpleString), _dtype_node(src))
    if node is not None:
        dtype = half_dtype(node)
        code = src.code(node).strip()
        text = _to_float32(src, node)
    else:
        # dtype=<a value the locator traced to a half dtype set elsewhere>: spell float32 here
        kw = src.find(site.line, site.col, cst.Arg, lambda n: n.keyword is not None and
                      n.keyword.value in ("dtype", "torch_dtype") and site.kind != "default-dtype")
        if kw is None or dotted(kw.value).startswith("torch.") or isinstance(kw.value, cst.SimpleString):
            return []                   # a literal that is not half: nothing to change
        dtype = _family_dtype(ctx)
        code = src.code(kw.value).strip()
        text = ensure_torch(src.replace(kw.value, lambda n: expr("torch.float32")))
    what = {"torch-dtype-fp16": "Load the model in float32",
            "param-dtype": "Create the parameter in float32",
            "default-dtype": "Keep the default dtype float32"}[site.kind]
    texts = with_autocast(ctx, site.path, text, dtype) if site.kind == "torch-dtype-fp16" else {site.path: text}
    return [Option(f"{what} instead of `{code}`: GradScaler needs float32 trainable parameters (mixed precision "
                   "comes from autocast, not from the weights)", "safe", "", texts)]


_FLOAT32_STRINGS = {"float16": "float32", "half": "float32", "fp16": "float32", "bfloat16": "float32",
                    "bf16": "float32"}


@fixer("config-dtype")
def config_dtype(ctx: Context, site: FixSite) -> List[Option]:
    """The half dtype is chosen in a config (a dataclass default, a dict entry, a module constant)
    that sets only the parameters' dtype: choose float32 there."""
    src = ctx.source(site.path)
    if src is None:
        return []

    def test(n: cst.CSTNode) -> bool:
        if isinstance(n, cst.SimpleString):
            try:
                return str(n.evaluated_value) in _FLOAT32_STRINGS
            except Exception:  # pragma: no cover
                return False
        return bool(half_dtype(n)) and dotted(n).startswith("torch.")

    node = src.find(site.line, site.col, (cst.SimpleString, cst.Attribute), test)
    if node is None:
        return []
    code = src.code(node).strip()
    if isinstance(node, cst.SimpleString):
        prefix, q = node.prefix, node.quote
        new = f"{prefix}{q}{_FLOAT32_STRINGS[str(node.evaluated_value)]}{q}"
        text = src.replace(node, lambda n: n.with_changes(value=new))
        dtype = _HALF_STRINGS[str(node.evaluated_value)]
    else:
        new = f"torch.{TO_FLOAT32[node.attr.value]}"
        text = _to_float32(src, node)
        dtype = half_dtype(node)
    texts = with_autocast(ctx, site.path, text, dtype)
    name = "fp16" if dtype == "float16" else "bf16"
    return [Option(f"Set the parameters' dtype to float32 where it is chosen: `{code}` -> `{new}` (it sets only "
                   f"the weights' dtype; GradScaler needs float32 parameters; {_half_maths(texts, site.path, text, name)})",
                   "safe", "", texts)]


@fixer("grad-scaler")
def grad_scaler(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    if src is None:
        return []
    call = src.find(site.line, site.col, cst.Call, lambda n: dotted(n.func).endswith("GradScaler"))
    if call is None:
        return []
    enabled = keyword(call, "enabled")
    if enabled is not None:
        if isinstance(enabled.value, cst.Name) and enabled.value.value == "False":
            return []
        text = src.replace(enabled.value, lambda n: cst.Name("False"))
    else:
        text = src.replace(call, lambda n: add_arg(n, kwarg("enabled", cst.Name("False"))))
    return [Option("Disable the GradScaler (enabled=False): bf16 has float32's exponent range, so it needs no loss "
                   "scaling; the scaler calls then pass through unchanged", "safe", "", {site.path: text})]
