"""Shared by fp16-unscale and bf16-unscale: where trainable parameters get a half dtype.

Casts of a model (``.half()``, ``.to(torch.float16)``, ``.bfloat16()``), ``from_pretrained(torch_dtype=...)``,
``torch.set_default_dtype``, parameters created in half; for bf16 also the GradScaler itself.
"""
from __future__ import annotations

import ast
import re
from typing import List, Optional, Set, Tuple

from tracefix.locator.base import FIXED_SINCE
from tracefix.locator.tracing import Tracer, is_true, src, unwrap_chain, walk_stmt
from tracefix.pysource import SourceFile, const_str, dotted, keyword, last_name

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
TENSOR_FACTORIES = {"randn", "rand", "zeros", "ones", "empty", "full", "tensor", "as_tensor",
                    "from_numpy", "arange", "linspace", "randint", "randn_like", "zeros_like",
                    "ones_like", "rand_like", "stack", "cat", "load"}
FROM_PRETRAINED = {"from_pretrained", "from_config", "from_single_file", "pipeline"}


class HalfParams(Tracer):
    """Fix sites for trainable parameters in float16 (``bf16=False``) or bfloat16 (``bf16=True``)."""

    def __init__(self, ctx, bf16: bool) -> None:
        super().__init__(ctx)
        self.bf16 = bf16

    def run(self) -> None:
        bf16 = self.bf16
        closure = set(self.ctx.crash_closure())
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
        for rel in self.ctx.project_files(needles):
            if self.ctx.over_budget():
                break
            sf = self.project.source(rel)
            if sf is None:
                continue
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
        is_cast = False
        if isinstance(func, ast.Attribute):
            if name == ("bfloat16" if bf16 else "half") and not call.args:
                is_cast = True
            elif name in ("to", "type") and (any(_is_dtype(a, bf16) for a in call.args) or
                                             any(k.arg == "dtype" and _is_dtype(k.value, bf16) for k in call.keywords)):
                is_cast = True
        if is_cast:
            scope = sf.scope_of(call)
            if in_parameter:
                self.ctx.add(sf, call.lineno, func.end_col_offset - len(name) if hasattr(func, "end_col_offset") else call.col_offset,
                          "param-dtype", f"A trainable parameter is created in {word}; GradScaler needs float32 "
                          f"parameters.", 0.8 - penalty)
                return
            if self._is_model(sf, scope, func.value, call.lineno):
                col = (func.end_col_offset or 0) - len(name)
                self.ctx.add(sf, call.lineno, max(col, 0), "model-cast",
                          f"The model is cast to {word}, so its gradients are {word}; keep the parameters in "
                          f"float32 and let autocast handle mixed precision.", 0.9 - penalty)
            return
        # from_pretrained(..., torch_dtype=torch.float16)
        for kwname in ("torch_dtype", "dtype"):
            kw = keyword(call, kwname)
            if kw is None or not _is_dtype(kw.value, bf16):
                continue
            if name in FROM_PRETRAINED or (kwname == "torch_dtype"):
                self.ctx.add(sf, kw.lineno, kw.col_offset, "torch-dtype-fp16",
                          f"The model is loaded with {kwname}={src(sf, kw.value)}, so its trainable parameters "
                          f"are {word}.", 0.88 - penalty)
                return
        if dotted(func).endswith("set_default_dtype") and call.args and _is_dtype(call.args[0], bf16):
            self.ctx.add(sf, call.lineno, call.col_offset, "default-dtype",
                      f"The default dtype is set to {word}, so every parameter created afterwards is {word}.",
                      0.85 - penalty)
            return
        kw = keyword(call, "dtype")
        if kw is not None and _is_dtype(kw.value, bf16):
            rg = keyword(call, "requires_grad")
            if in_parameter or (rg is not None and is_true(rg.value)):
                self.ctx.add(sf, kw.lineno, kw.col_offset, "param-dtype",
                          f"A trainable parameter is created in {word}; GradScaler needs float32 parameters.",
                          0.8 - penalty)

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
            return bool(MODEL_NAME_RX.search(name)) and not name.endswith("_")
        if isinstance(recv, ast.Subscript):
            return False
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
    words = ("bfloat16", "bf16") if bf16 else ("float16", "half", "fp16")
    d = dotted(node)
    if d:
        return d.split(".")[-1] in words and (d.startswith("torch.") or "." not in d or d.count(".") == 1)
    s = const_str(node)
    return s is not None and s.lower() in words


def _scaler_disabled(call: ast.Call) -> bool:
    en = keyword(call, "enabled")
    return en is not None and isinstance(en.value, ast.Constant) and en.value.value is False
