"""fp16-unscale and bf16-unscale: where trainable parameters get a half dtype.

Casts of a model (``.half()``, ``.to(torch.float16)``, ``.bfloat16()``), ``from_pretrained(torch_dtype=...)``,
``torch.set_default_dtype``, parameters created in half (``nn.Parameter(...)``, ``register_parameter``,
layers built with ``dtype=``); for bf16 also the GradScaler itself.  A dtype that is not spelled at
the cast is traced (:class:`ValueTracer`) to where it is chosen: a config field, dict key or module
constant that nothing else reads is the fix site (``config-dtype``, the cast ranked after it); one
that is shared (autocast reads it too) or chosen outside the code (argparse, a lookup table, a data
file) leaves the cast as the fix site.
"""
from __future__ import annotations

import ast
import re
from typing import List, Optional, Set, Tuple

from tracefix.locator.base import FIXED_SINCE
from tracefix.locator.tracing import (Origin, ValueTracer, is_param, is_true, param_default, returns, src,
                                     unwrap_chain, walk_stmt)
from tracefix import vocab
from tracefix.pysource import SourceFile, const_str, dotted, keyword, last_name
from tracefix.record import replace

DATA_NAMES = {"x", "xs", "xb", "inputs", "input", "inp", "batch", "data", "images", "image", "img",
              "imgs", "features", "feats", "feat", "target", "targets", "labels", "label", "y", "yb",
              "tensor", "t", "sample", "samples", "input_ids", "pixel_values", "latents", "noise",
              "z", "src", "tgt", "mask", "attention_mask", "audio", "waveform", "tokens", "ids",
              "obs", "states", "state", "emb", "embeddings", "hidden", "hidden_states", "logits",
              "out", "output", "outputs", "pred", "preds", "batch_x", "batch_y", "X", "Y"}
MODEL_NAME_RX = re.compile(
    r"model|net|module|encoder|decoder|backbone|generator|discriminator|classifier|head|unet|"
    r"vae|policy|critic|actor|transformer|teacher|student|layer|block|adapter|lora|bert|gpt|"
    r"llama|clip|resnet|vit|mlp|lm$|^lm|llm|ema|peft", re.I)
MODEL_USE_ATTRS = {"parameters", "named_parameters", "state_dict", "load_state_dict", "train",
                   "eval", "modules", "named_modules", "children", "zero_grad", "buffers"}
# what makes a tensor here: the factories, and values whose dtype comes from their inputs or a file
TENSOR_FACTORIES = vocab.TENSOR_FACTORIES | {"stack", "cat", "load"}
FROM_PRETRAINED = {"from_pretrained", "from_config", "from_single_file", "pipeline"}


CONFIG_SOURCES = {"dataclass", "class", "dict", "module", "kwarg"}
PARAMETER_CALLS = {"Parameter", "ParameterList", "ParameterDict"}


class HalfParams(ValueTracer):
    """Fix sites for trainable parameters in float16 (``bf16=False``) or bfloat16 (``bf16=True``)."""

    def __init__(self, ctx, bf16: bool) -> None:
        super().__init__(ctx)
        self.bf16 = bf16

    def run(self) -> None:
        bf16 = self.bf16
        order = self.ctx.crash_closure()         # the crash file first, then what it imports
        closure = set(order)
        if bf16:
            disabled = self._disabled_scaler(closure)
            if disabled is not None:
                dsf, dcall = disabled
                self.ctx.notes.append(f"{dsf.rel}:{dcall.lineno} already constructs the GradScaler with enabled=False, "
                                  f"so it no longer unscales bfloat16 gradients; {FIXED_SINCE}.")
                return
            for rel in self.ctx.project_files(("GradScaler",)):
                sf = self.project.source(rel)
                if sf is None:
                    continue
                for node in ast.walk(sf.tree):
                    if isinstance(node, ast.Call) and last_name(node.func) in ("GradScaler", "ShardedGradScaler"):
                        en = keyword(node, "enabled")
                        if en is not None and isinstance(en.value, ast.Constant) and en.value.value is False:
                            continue
                        score = 0.95 if (not closure or rel in closure) else 0.92
                        self.ctx.add(sf, node.lineno, node.col_offset, "grad-scaler",
                                  "A GradScaler is used with bfloat16 parameters; bf16 needs no loss scaling "
                                  "(construct it with enabled=False or drop it).", score)
        needles = ("bfloat16", "bf16") if bf16 else ("half", "float16", "fp16")
        dtype_word = "bfloat16" if bf16 else "float16"
        # The crash's own files are read whole: a dtype that arrives through a config object
        # (getattr(torch, cfg["precision"])) is not spelled where the cast is.
        # (in the closure's own order: a set's order changes with the hash seed, and ties keep it)
        files = order + [r for r in self.ctx.project_files(needles) if r not in closure]
        for rel, sf in self.ctx.sources(files):
            near = not closure or rel in closure
            penalty = 0.0 if near else 0.3
            for node in ast.walk(sf.tree):
                if isinstance(node, ast.Call):
                    self._half_call(sf, node, bf16, dtype_word, penalty)

    def _disabled_scaler(self, closure: Set[str]) -> Optional[Tuple[SourceFile, ast.Call]]:
        """The GradScaler behind the crash, when it is built with enabled=False.

        The scaler the crash frames call (scaler.step(opt), self.scaler.unscale_(opt)) is traced to
        its construction; when it cannot be traced, every GradScaler built in the crash file's import
        closure must be disabled (a crash inside a library proves nothing about the project's)."""
        traced: List[Tuple[SourceFile, ast.Call]] = []
        untraced = False
        for m in self.ctx.mapped:
            sf = self.project.source(m.rel_path)
            stmt = sf.stmt_at(m.line) if sf is not None else None
            if stmt is None:
                continue
            scope = sf.scope_of(stmt)
            for node in walk_stmt(stmt):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
                        node.func.attr in ("step", "unscale_", "update", "scale")):
                    continue
                recv = node.func.value
                if not isinstance(recv, (ast.Name, ast.Attribute)) or "scaler" not in last_name(recv).lower():
                    continue
                ctor = self.ctor_value(sf, scope, recv, m.line)
                value = unwrap_chain(ctor[1]) if ctor is not None else None
                if isinstance(value, ast.Call) and last_name(value.func) in ("GradScaler", "ShardedGradScaler"):
                    traced.append((ctor[0], value))
                else:
                    untraced = True
            if traced or untraced:
                break                       # the innermost frame that uses a scaler decides
        if traced:
            return traced[0] if all(_scaler_disabled(c) for _sf, c in traced) else None
        if not closure:
            return None
        built: List[Tuple[SourceFile, ast.Call]] = []
        for rel in sorted(closure):
            sf = self.project.source(rel)
            if sf is None or sf.tree is None or "GradScaler" not in sf.text:
                continue
            built.extend((sf, n) for n in ast.walk(sf.tree) if isinstance(n, ast.Call)
                         and last_name(n.func) in ("GradScaler", "ShardedGradScaler"))
        if built and all(_scaler_disabled(c) for _sf, c in built):
            return min(built, key=lambda t: (t[0].rel, t[1].lineno))
        return None

    def _half_call(self, sf: SourceFile, call: ast.Call, bf16: bool, word: str, penalty: float) -> None:
        func = call.func
        name = last_name(func)
        parent = sf.parent(call)
        in_parameter = isinstance(parent, ast.Call) and last_name(parent.func) == "Parameter"
        scope = sf.scope_of(call)
        cast_arg: Optional[ast.AST] = None           # the dtype argument of .to()/.type()
        cast_origins: List[Origin] = []
        is_cast = False
        if isinstance(func, ast.Attribute):
            if name == ("bfloat16" if bf16 else "half") and not call.args:
                is_cast = True
            elif name in ("to", "type"):
                for arg in list(call.args) + [k.value for k in call.keywords if k.arg == "dtype"]:
                    found = self._half_value(sf, scope, arg, call.lineno)
                    if found is not None:
                        is_cast, cast_arg, cast_origins = True, arg, found
                        break
        if is_cast:
            if in_parameter:
                self.ctx.add(sf, call.lineno, func.end_col_offset - len(name) if hasattr(func, "end_col_offset") else call.col_offset,
                          "param-dtype", f"A trainable parameter is created in {word}; GradScaler needs float32 "
                          f"parameters.", 0.8 - penalty)
                return
            if self._is_model(sf, scope, func.value, call.lineno):
                reason = (f"The model is cast to {word}, so its gradients are {word}; keep the parameters in "
                          f"float32 and let autocast handle mixed precision.")
                if _cast_on_request(sf, scope, call, cast_arg):
                    # a loader (from_pretrained(..., torch_dtype=None)) casting only when asked: the
                    # caller that asks is the fix, not the option every caller relies on
                    reason += (f" {src(sf, cast_arg)} is an option that defaults to None, and the cast only "
                               f"happens when a caller passes it.")
                    penalty += 0.04
                if cast_origins and cast_origins[0].node is not cast_arg:
                    self._traced_site(sf, cast_arg, cast_origins, "model-cast", reason, 0.9 - penalty, word)
                    return
                col = (func.end_col_offset or 0) - len(name)
                self.ctx.add(sf, call.lineno, max(col, 0), "model-cast", reason, 0.9 - penalty)
            return
        # from_pretrained(..., torch_dtype=torch.float16)
        for kwname in ("torch_dtype", "dtype"):
            kw = keyword(call, kwname)
            if kw is None or not (name in FROM_PRETRAINED or kwname == "torch_dtype"):
                continue
            found = self._half_value(sf, scope, kw.value, call.lineno, strings=True)
            if found is None:
                continue
            reason = (f"The model is loaded with {kwname}={src(sf, kw.value)}, so its trainable parameters "
                      f"are {word}.")
            if found[0].node is not kw.value:
                self._traced_site(sf, kw, found, "torch-dtype-fp16", reason, 0.88 - penalty, word)
            else:
                self.ctx.add(sf, kw.lineno, kw.col_offset, "torch-dtype-fp16", reason, 0.88 - penalty)
            return
        if dotted(func).endswith("set_default_dtype") and call.args and _is_dtype(call.args[0], bf16):
            self.ctx.add(sf, call.lineno, call.col_offset, "default-dtype",
                      f"The default dtype is set to {word}, so every parameter created afterwards is {word}.",
                      0.85 - penalty)
            return
        kw = keyword(call, "dtype")
        if kw is None or name in ("autocast", "GradScaler"):
            return
        found = self._half_value(sf, scope, kw.value, call.lineno)
        if found is None:
            return
        rg = keyword(call, "requires_grad")
        # nn.Linear(4, 4, dtype=torch.float16): a layer built with half weights (factory kwargs)
        layer = name[:1].isupper() and (self.full_name(sf, func).startswith("torch.nn.") or
                                         self._module_class(sf, func))
        if layer or in_parameter or (rg is not None and is_true(rg.value)) or self._into_parameter(sf, scope, call):
            reason = (f"The layer {name} is built with {word} weights; GradScaler needs float32 parameters." if layer
                      else f"A trainable parameter is created in {word}; GradScaler needs float32 parameters.")
            if found[0].node is not kw.value:
                self._traced_site(sf, kw, found, "param-dtype", reason, 0.8 - penalty, word)
            else:
                self.ctx.add(sf, kw.lineno, kw.col_offset, "param-dtype", reason, 0.8 - penalty)

    def _module_class(self, sf: SourceFile, func: ast.AST) -> bool:
        """A project class that derives from nn.Module (not a config class taking dtype=)."""
        cls = self.resolve_class(sf, func)
        return cls is not None and any(last_name(b) == "Module" for b in cls[1].bases)

    def _loop_parameter(self, sf: SourceFile, scope: ast.AST, recv: ast.AST) -> bool:
        """``p`` or ``p.data`` where ``for p in m.parameters()`` (or ``for n, p in m.named_parameters()``)."""
        if isinstance(recv, ast.Attribute) and recv.attr == "data":
            recv = recv.value
        if not isinstance(recv, ast.Name):
            return False
        for node in sf.own(scope):
            if not (isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, ast.Call)):
                continue
            if last_name(node.iter.func) not in ("parameters", "named_parameters"):
                continue
            t = node.target
            names = [t.id] if isinstance(t, ast.Name) else [e.id for e in getattr(t, "elts", [])[1:]
                                                            if isinstance(e, ast.Name)]
            if recv.id in names:
                return True
        return False

    # -- dtypes that are not spelled at the cast ------------------------------------------------
    def _half_value(self, sf: SourceFile, scope: ast.AST, node: ast.AST, line: int,
                    strings: bool = False) -> Optional[List[Origin]]:
        """Where ``node`` gets a half dtype: ``[Origin]`` whose first is node itself when it is
        spelled there (``torch.float16``), else the traced literals (config fields, dict keys,
        argparse defaults, ``getattr(torch, name)``); None when it is not (or not provably) half."""
        local = isinstance(node, ast.Name) and (self.last_assign(sf, scope, node.id, line) is not None
                                                 or is_param(scope, node.id))
        if not local and _is_dtype(node, self.bf16) and (strings or const_str(node) is None or
                                                          isinstance(sf.parent(node), ast.keyword)):
            return [Origin(sf, node, "", False, False)]
        if not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.IfExp)):
            return None
        if isinstance(node, ast.Attribute) and dotted(node).startswith("torch."):
            return None
        half = [o for o in self.origins(sf, scope, node, line) if self._origin_is_half(o, strings)]
        return half or None

    def _origin_is_half(self, o: Origin, strings: bool) -> bool:
        if isinstance(o.node, ast.Constant):
            # a name looked up on torch (getattr(torch, "float16")), or a string torch_dtype=
            return (o.by_name or strings) and _is_dtype(o.node, self.bf16)
        return isinstance(o.node, (ast.Attribute, ast.Name)) and not o.by_name and _is_dtype(o.node, self.bf16)

    def _traced_site(self, sf: SourceFile, at: ast.AST, origins: List[Origin], kind: str, reason: str,
                     score: float, word: str) -> None:
        """A dtype that arrives from elsewhere: fix it where it is chosen when that place sets only
        this (a config field or key read nowhere else), else where it is applied (``at``)."""
        where = "; ".join(list(dict.fromkeys(f"{_describe(o)} ({o.where})" for o in origins))[:2])
        reason = f"{reason} The dtype comes from {where}."
        config = [o for o in origins if o.source in CONFIG_SOURCES and not o.shared]
        if any(o.shared for o in origins):
            reason += " The same value is read elsewhere too, so the cast is what changes."
        elif any(o.source in ("argparse", "lookup", "file", "default") for o in origins):
            reason += (" It is chosen outside this code (a command-line option, a lookup table, a config file or a "
                       "caller), so the cast is what changes.")
        if config and len(config) == len(origins):
            for o in config:
                near = 0.0 if o.sf.rel in self.ctx.crash_closure() or not self.ctx.mapped else 0.3
                self.ctx.add(o.sf, o.node.lineno, o.node.col_offset, "config-dtype",
                             f"{_describe(o)[0].upper()}{_describe(o)[1:]} sets the trainable parameters' dtype "
                             f"to {word} and nothing else reads it; set it to float32 (half-precision maths is "
                             f"autocast's job, not the weights'). It is applied at {sf.rel}:{at.lineno}.", max(score, 0.9 - near))
            score -= 0.1
        self.ctx.add(sf, at.lineno, at.col_offset, kind, reason, score)
        if len({o.where for o in origins}) == 1:
            self.ctx.sites[-1] = replace(self.ctx.sites[-1], value_from=origins[0].where)

    def _into_parameter(self, sf: SourceFile, scope: ast.AST, node: ast.AST, depth: int = 0) -> bool:
        """Does the tensor built by ``node`` become a trainable ``nn.Parameter`` (directly, through
        arithmetic or in-place initialisers, or through a name: ``register_parameter(.., Parameter(g))``)?"""
        cur = node
        while True:
            p = sf.parent(cur)
            if isinstance(p, (ast.BinOp, ast.UnaryOp, ast.List, ast.Tuple, ast.Starred)):
                cur = p
                continue
            if isinstance(p, ast.Attribute) and p.value is cur:
                gp = sf.parent(p)
                if not (isinstance(gp, ast.Call) and gp.func is p) or p.attr in _DTYPE_CHANGERS:
                    return False                      # .float(), .to(...): no longer the half tensor
                if p.attr == "requires_grad_":
                    return not (gp.args and isinstance(gp.args[0], ast.Constant) and gp.args[0].value is False)
                cur = gp
                continue
            if isinstance(p, ast.keyword):
                gp = sf.parent(p)
                if isinstance(gp, ast.Call) and last_name(gp.func) in PARAMETER_CALLS and p.arg == "data":
                    p, cur = gp, p
                else:
                    return False
            if isinstance(p, ast.Call) and cur is not p.func:
                if last_name(p.func) not in PARAMETER_CALLS:
                    return False
                rg = keyword(p, "requires_grad")
                if rg is not None and isinstance(rg.value, ast.Constant) and rg.value.value is False:
                    return False
                if len(p.args) > 1 and isinstance(p.args[1], ast.Constant) and p.args[1].value is False:
                    return False
                return True
            if isinstance(p, (ast.Assign, ast.AnnAssign)) and depth < 2:
                names = [t.id for t in (p.targets if isinstance(p, ast.Assign) else [p.target])
                         if isinstance(t, ast.Name)]
                if len(names) != 1:
                    return False
                later = [a.lineno for a in self.assignments(sf, scope, names[0]) if a.lineno > p.lineno]
                stop = min(later) if later else 10 ** 9
                return any(isinstance(n, ast.Name) and n.id == names[0] and isinstance(n.ctx, ast.Load)
                           and p.lineno < n.lineno <= stop and self._into_parameter(sf, scope, n, depth + 1)
                           for n in sf.own(scope))
            return False

    def _is_model(self, sf: SourceFile, scope: ast.AST, recv: ast.AST, line: int, depth: int = 0) -> bool:
        """Is the receiver of a cast a model/module (True) rather than input data (False)?"""
        if depth > 3:
            return False
        recv = unwrap_chain(recv)
        if isinstance(recv, ast.Call):
            name = last_name(recv.func)
            if name in FROM_PRETRAINED:
                return True
            if name in TENSOR_FACTORIES:
                return False
            if name[:1].isupper():
                cls = self.resolve_class(sf, recv.func)
                return True if cls is not None else not name.endswith(("Tensor", "Dataset", "Loader"))
            d = self.resolve_def(sf, recv.func)
            if d is not None and isinstance(d[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
                # a project factory: what it returns decides, not its name
                dsf, fn = d
                rets = returns(fn)
                if rets:
                    return any(self._is_model(dsf, fn, r.value, r.lineno, depth + 1) for r in rets)
            return bool(MODEL_NAME_RX.search(name)) and not name.endswith("_")
        if isinstance(recv, ast.Subscript):
            return False
        if self._loop_parameter(sf, scope, recv):
            return True                 # for p in model.parameters(): p.data = p.data.half()
        if isinstance(recv, ast.Name) and recv.id == "self":
            cls = sf.class_of(scope)    # self.half() inside an nn.Module subclass
            return cls is not None and any(last_name(b) == "Module" or self.resolve_class(sf, b) is not None
                                           for b in cls.bases)
        name = recv.id if isinstance(recv, ast.Name) else (recv.attr if isinstance(recv, ast.Attribute) else "")
        if not name:
            return False
        if name in DATA_NAMES:
            return False
        ctor = self.ctor_value(sf, scope, recv, line) if isinstance(recv, (ast.Name, ast.Attribute)) else None
        if ctor is not None and ctor[1] is not recv:
            val = unwrap_chain(ctor[1])
            if isinstance(val, ast.Subscript):
                return False
            if isinstance(val, ast.Call):
                vname = last_name(val.func)
                if vname in TENSOR_FACTORIES or vname in ("next", "iter"):
                    return False
                if vname in FROM_PRETRAINED or vname[:1].isupper():
                    return True
                if MODEL_NAME_RX.search(vname):
                    return True
        if MODEL_NAME_RX.search(name):
            return True
        if isinstance(recv, ast.Name):
            for n in sf.own(scope if scope is not None else sf.tree):
                if isinstance(n, ast.Call):
                    if isinstance(n.func, ast.Name) and n.func.id == name:
                        return True                      # called like a module
                    if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and \
                            n.func.value.id == name and n.func.attr in MODEL_USE_ATTRS:
                        return True
        return False


def _is_dtype(node: ast.AST, bf16: bool) -> bool:
    words = ("bfloat16", "bf16", "BFloat16Tensor") if bf16 else ("float16", "half", "fp16", "HalfTensor")
    d = dotted(node)
    if d:
        return d.split(".")[-1] in words and (d.startswith("torch.") or "." not in d or d.count(".") == 1)
    s = const_str(node)
    return s is not None and s.lower() in words


_DTYPE_CHANGERS = {"float", "double", "to", "type", "half", "bfloat16", "long", "int"}


def _describe(o: Origin) -> str:
    """'the dataclass field default', 'the key of a dict', ... for a reason text."""
    return {"dataclass": "the dataclass field's default", "class": "the class attribute",
            "dict": "the dict entry", "module": "the module constant", "kwarg": "the constructor keyword",
            "argparse": "the argparse default", "lookup": "the lookup-table entry",
            "default": "the parameter default", "file": "the config file's value"}.get(o.source, "the value") + \
        (f" `{o.node.value}`" if o.source == "file" else f" `{src(o.sf, o.node)}`")


def _cast_on_request(sf: SourceFile, scope: ast.AST, call: ast.Call, arg: Optional[ast.AST]) -> bool:
    """The cast's dtype is a parameter of its function that defaults to None, and the cast is
    guarded by ``if dtype is not None`` / ``if dtype``: the function casts only when asked."""
    if not (isinstance(arg, ast.Name) and is_param(scope, arg.id)):
        return False
    default = param_default(scope, arg.id)
    if not (isinstance(default, ast.Constant) and default.value is None):
        return False
    for anc in sf.ancestors(call):
        if anc is scope:
            break
        test = anc.test if isinstance(anc, ast.If) else None
        if isinstance(test, ast.Name) and test.id == arg.id:
            return True
        if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == arg.id and \
                len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot) and \
                isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
            return True
    return False


def _scaler_disabled(call: ast.Call) -> bool:
    en = keyword(call, "enabled")
    return en is not None and isinstance(en.value, ast.Constant) and en.value.value is False


def run_fp16(ctx) -> None:
    """fp16-unscale: GradScaler met float16 gradients, because trainable parameters are float16."""
    HalfParams(ctx, bf16=False).run()


def run_bf16(ctx) -> None:
    """bf16-unscale: GradScaler met bfloat16 gradients (the scaler itself, or bf16 trainable parameters)."""
    HalfParams(ctx, bf16=True).run()
