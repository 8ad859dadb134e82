"""Locator: name the crash site and rank the fix sites (the lines that must change).

Maps the traceback's frames to files under the root (:mod:`tracefix.frames`) and reads the
user's source with :mod:`ast` (never imports torch or libcst, never writes a file).  The strategy
comes from the knowledge entry's ``locate`` field: nonscalar | inplace | fp16-params |
bf16-params | none.  ``locate`` never raises: odd input degrades to fewer fix sites and a note.
"""
from __future__ import annotations

import ast
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .frames import (FileIndex, MappedFrame, _read_lines, _reanchor, is_library_path, is_notebook_path,
                     map_frame)
from .pysource import (FUNC_TYPES, Project, SourceFile, base_name, const_str, dotted, keyword,
                       last_name, own_nodes)
from .records import Diagnosis, FixSite, Site

MAX_DEPTH = 6
TIME_BUDGET_S = 15.0        # a whole-project search stops (with a note) after this long

# ---------------------------------------------------------------------------------------------
# vocabulary
ACCEL_NAMES = {"accelerator", "fabric", "engine", "model_engine", "deepspeed", "ds_engine", "strategy",
               "precision", "trainer", "booster"}
STEP_SKIP_RX = re.compile(r"sched|lr_?|warmup|trainer|env|progress|pbar|bar", re.I)
STEP_OPT_RX = re.compile(r"opt|sgd|adam|solver|scaler", re.I)
LOSS_FN_NAMES = {"training_step", "compute_loss", "train_step", "_compute_loss", "compute_losses",
                 "shared_step", "_shared_step", "_common_step", "common_step", "step_loss"}
NON_INPLACE_METHODS = {"requires_grad_", "share_memory_", "retain_grad_", "record_stream_",
                       "pin_memory_", "apply_"}
LOG_CALLS = {"print", "info", "debug", "warning", "warn", "error", "log", "write", "format",
             "set_postfix", "set_description", "add_scalar", "add_scalars", "log_metrics",
             "log_dict", "isnan", "isinf", "isfinite", "float", "int", "round", "str", "repr"}
SCALAR_ATTRS = {"item", "tolist", "__float__"}
PASS_ATTRS = {"detach", "cpu", "data", "clone", "float", "double", "numpy"}
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
VIEW_METHODS = {"view", "view_as", "reshape", "transpose", "t", "T", "permute", "expand",
                "expand_as", "narrow", "select", "unsqueeze", "squeeze", "flatten", "unflatten",
                "chunk", "split", "unbind", "diagonal", "as_strided", "movedim", "mT", "data",
                "detach", "contiguous", "swapaxes", "unfold", "real", "imag"}

FUNCTIONAL_LOSSES = {"cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "nll_loss",
                     "kl_div", "poisson_nll_loss", "gaussian_nll_loss", "ctc_loss", "mse_loss", "l1_loss",
                     "smooth_l1_loss", "huber_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
                     "multi_margin_loss", "multilabel_margin_loss", "margin_ranking_loss", "hinge_embedding_loss",
                     "cosine_embedding_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss"}
REDUCED_MODES = {"mean", "sum", "batchmean"}
SCALAR_KEEP_METHODS = {"float", "double", "half", "bfloat16", "to", "cuda", "cpu", "clone", "contiguous",
                       "squeeze", "type"}
FIXED_SINCE = "the file seems to have been fixed since this log was written"

_FAMILY_EXACT = {
    "relu": "relu", "threshold": "relu", "relu6": "hardtanh", "hardtanh": "hardtanh",
    "leakyrelu": "leakyrelu", "rrelu": "leakyrelu", "prelu": "prelu",
    "sigmoid": "sigmoid", "logsigmoid": "logsigmoid", "tanh": "tanh", "exp": "exp", "expm1": "exp",
    "softmax": "softmax", "logsoftmax": "logsoftmax", "gelu": "gelu", "silu": "silu", "swish": "silu",
    "elu": "elu", "selu": "elu", "celu": "elu", "softplus": "softplus", "mish": "mish",
    "hardsigmoid": "hardsigmoid", "hardswish": "hardswish",
    "add": "add", "sub": "sub", "rsub": "sub", "mul": "mul", "div": "div", "pow": "pow",
    "neg": "neg", "addcmul": "addcmul", "addcdiv": "addcdiv", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "mm": "mm", "addmm": "mm", "bmm": "mm", "baddbmm": "mm", "matmul": "mm", "linear": "mm",
    "einsum": "mm", "mv": "mm", "dot": "mm", "addmv": "mm", "bilinear": "mm",
    "asstrided": "view", "slice": "view", "select": "view", "view": "view", "expand": "view",
    "unsqueeze": "view", "squeeze": "view", "transpose": "view", "t": "view", "permute": "view",
    "reshape": "view", "unsafeview": "view", "unsafesplit": "view", "split": "view",
    "splitwithsizes": "view", "chunk": "view", "narrow": "view", "unbind": "view",
    "diagonal": "view", "flatten": "view", "alias": "view", "index": "view", "viewas": "view",
    "clone": "clone", "cat": "cat", "stack": "stack", "embedding": "embedding",
    "embeddingbag": "embedding", "dropout": "dropout", "nativedropout": "dropout",
    "fuseddropout": "dropout", "featuredropout": "dropout", "alphadropout": "dropout",
    "maskedfill": "maskedfill", "where": "where", "gather": "gather", "scatter": "scatter",
    "clamp": "clamp", "clip": "clamp", "abs": "abs", "log": "log", "sin": "sin", "cos": "cos",
    "sum": "sum", "mean": "mean", "norm": "norm", "max": "max", "min": "min", "erf": "erf",
    "cumsum": "cumsum", "sort": "sort", "topk": "topk", "tanhshrink": "tanh",
}


def op_family(name: str) -> str:
    """'ReluBackward0' / 'Relu' / 'F.relu' / 'nn.ReLU' -> 'relu'; '' when empty."""
    n = (name or "").split("::")[-1].split(".")[-1]
    n = re.sub(r"Backward\d*$", "", n)
    n = n.strip("_").lower().replace("_", "")
    if not n:
        return ""
    if n in _FAMILY_EXACT:
        return _FAMILY_EXACT[n]
    if "batchnorm" in n:
        return "batchnorm"
    if "layernorm" in n:
        return "layernorm"
    if "groupnorm" in n:
        return "groupnorm"
    if "instancenorm" in n:
        return "instancenorm"
    if "conv" in n:
        return "conv"
    if "linear" in n:
        return "mm"
    if "dropout" in n:
        return "dropout"
    if "softmax" in n:
        return "logsoftmax" if "log" in n else "softmax"
    if n.endswith("pool") or "pool" in n:
        return "pool"
    m = re.match(r"(.*?)\d+d$", n)
    if m and m.group(1) in _FAMILY_EXACT:
        return _FAMILY_EXACT[m.group(1)]
    return n


KNOWN_FAMILIES = frozenset(_FAMILY_EXACT.values()) | {
    "batchnorm", "layernorm", "groupnorm", "instancenorm", "conv", "pool", "dropout"}

_BINOP_FAMILY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
                 ast.MatMult: "mm", ast.FloorDiv: "div"}


# ---------------------------------------------------------------------------------------------
def locate(diag: Diagnosis, entry, root: Path) -> Diagnosis:
    """Return diag with crash_site, fix_sites (best first) and notes filled in."""
    try:
        return _Locator(diag, entry, Path(root)).run()
    except Exception as exc:  # the locator must never take the run down
        return replace(diag, notes=tuple(diag.notes) + (
            f"Could not finish locating the fix site ({type(exc).__name__}: {exc}).",))


class _Locator:
    def __init__(self, diag: Diagnosis, entry, root: Path):
        self.diag = diag
        self.entry = entry
        self.strategy = getattr(entry, "locate", "none") if entry is not None else "none"
        self.root = root
        self.index = FileIndex(root)
        self.project = Project(self.index)
        self.notes: List[str] = []
        self.sites: List[FixSite] = []
        self.mapped: List[MappedFrame] = []          # user frames that map, innermost first
        self.anomaly_mapped: List[MappedFrame] = []
        self.library_search = False
        self.deadline = time.monotonic() + TIME_BUDGET_S
        self.out_of_time = False

    # --- driver ------------------------------------------------------------------------------
    def run(self) -> Diagnosis:
        if not self.index.resolved_root.is_dir():
            self.notes.append(f"The project root {self.root} is not a folder; no source was searched.")
            return replace(self.diag, notes=tuple(self.diag.notes) + tuple(self.notes))
        if self.index.truncated:
            self.notes.append(f"The project has more than {len(self.index.files)} files; only the first "
                              f"{len(self.index.files)} were indexed.")
        tb = self.diag.traceback
        self.mapped = self._map_frames(tb.frames, report=True)
        self.anomaly_mapped = self._map_frames(tb.anomaly_frames, report=False)
        crash_site = None
        if self.mapped:
            m = self.mapped[0]
            sf = self.project.source(m.rel_path)
            code = (sf.line_text(m.line) if sf else self._raw_line(m)).strip()
            crash_site = Site(path=m.rel_path, line=m.line, code=code, local_path=str(m.local_path),
                              col=_indent(sf.line_text(m.line)) if sf else 0)
        strategy = {"nonscalar": self._nonscalar, "inplace": self._inplace,
                    "fp16-params": lambda: self._half_params(bf16=False),
                    "bf16-params": lambda: self._half_params(bf16=True)}.get(self.strategy)
        if strategy is not None:
            strategy()
            # The crash file's name matched several files equally well: analyse each, so that the
            # competing fix sites tie and nothing is applied on a guess.
            if self.mapped and self.mapped[0].ambiguous:
                saved = self.mapped
                for alt in self._alternatives(saved[0]):
                    self.mapped = [alt] + saved[1:]
                    strategy()
                self.mapped = saved
        for rel, err in sorted(self.project.errors.items()):
            self.notes.append(f"{rel} {err}; it was skipped.")
        sites = _rank(self.sites)
        notes = tuple(dict.fromkeys(list(self.diag.notes) + self.notes))
        return replace(self.diag, crash_site=crash_site, fix_sites=tuple(sites), notes=notes)

    def _alternatives(self, m: MappedFrame) -> List[MappedFrame]:
        out = []
        for rel in m.ambiguous:
            local = self.index.inside(self.index.abs_path(rel))
            if local is None:
                continue
            line, changed = m.frame.line, False
            if m.frame.code:
                lines = _read_lines(local)
                if lines is not None:
                    line, changed = _reanchor(lines, m.frame.line, m.frame.code)
            out.append(MappedFrame(frame=m.frame, local_path=local, rel_path=rel, line=line,
                                   shift=line - m.frame.line, changed=changed,
                                   ambiguous=tuple(r for r in (m.rel_path,) + m.ambiguous if r != rel)))
        return out

    def _raw_line(self, m: MappedFrame) -> str:
        try:
            with open(m.local_path, "rb") as f:
                for i, raw in enumerate(f, 1):
                    if i == m.line:
                        return raw.decode("utf-8", "replace")
        except OSError:
            pass
        return ""

    def _map_frames(self, frames: Sequence, report: bool) -> List[MappedFrame]:
        out: List[MappedFrame] = []
        for fr in reversed(tuple(frames)):
            path = fr.path or ""
            if is_library_path(path):
                continue
            m = map_frame(fr, self.root, self.index)   # notebook frames map to .ipynb cells
            if m is None and is_notebook_path(path):
                if report:
                    self.notes.append(f"The frame {path} is notebook or interactive code; no notebook cell "
                                      f"under the root reads its line {fr.code!r}.")
                continue
            if m is None:
                if report and path and not (path.startswith("<") and path.endswith(">")):
                    self.notes.append(f"{path} (from the log) was not found under {self.root}.")
                continue
            if report:
                if m.ambiguous:
                    self.notes.append(f"{path} matches several files ({', '.join((m.rel_path,) + m.ambiguous)}); "
                                      f"{m.rel_path} was used.")
                if m.changed:
                    self.notes.append(f"{m.rel_path} changed since the log was written: line {fr.line} no "
                                      f"longer reads {fr.code!r}.")
                elif m.shift:
                    self.notes.append(f"{m.rel_path} changed since the log was written: the logged line "
                                      f"{fr.line} is now line {m.line}.")
            out.append(m)
        return out

    # --- helpers -------------------------------------------------------------------------------
    def _add(self, sf: SourceFile, line: int, col: int, kind: str, reason: str, score: float) -> None:
        """Record a fix site; col is an ast (UTF-8 byte) offset and is turned into characters."""
        text = sf.line_text(line)
        try:
            col = len(text.encode("utf-8")[:max(col, 0)].decode("utf-8", "ignore"))
        except Exception:
            col = max(col, 0)
        self.sites.append(FixSite(path=sf.rel, line=line, code=text.strip(),
                                  local_path=str(sf.path), col=col, reason=reason, kind=kind,
                                  score=round(score, 3)))

    def _crash_closure(self) -> List[str]:
        if not self.mapped:
            return []
        files: List[str] = []
        for m in self.mapped:
            for rel in self.project.closure(m.rel_path):
                if rel not in files:
                    files.append(rel)
        return files

    def _search_files(self, needles: Tuple[str, ...] = ()) -> List[str]:
        """The crash file's import closure, or every project file when no user frame maps."""
        files = self._crash_closure()
        if not files:
            self._library_note()
            return self.project.py_files(needles)
        return files

    def _over_budget(self) -> bool:
        if not self.out_of_time and time.monotonic() > self.deadline:
            self.out_of_time = True
            self.notes.append("The project is large; the search for fix sites stopped early and may be incomplete.")
        return self.out_of_time

    def _library_note(self) -> None:
        if not self.library_search:
            self.library_search = True
            self.notes.append("The crash happened inside a library; all project files were searched.")

    # --- value analysis ------------------------------------------------------------------------
    def _assignments(self, sf: SourceFile, scope: ast.AST, name: str) -> List[ast.stmt]:
        key = ("assign", id(scope))
        table = sf.memo.get(key)
        if table is None:
            table = {}
            for node in sf.own(scope):
                names: List[str] = []
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            names.append(t.id)
                        elif isinstance(t, (ast.Tuple, ast.List)):
                            names.extend(e.id for e in t.elts if isinstance(e, ast.Name))
                elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
                    names.append(node.target.id)
                elif isinstance(node, ast.NamedExpr):
                    names.append(node.target.id)
                for n in names:
                    table.setdefault(n, []).append(node)
            for lst in table.values():
                lst.sort(key=lambda n: (n.lineno, n.col_offset))
            sf.memo[key] = table
        return table.get(name, [])  # type: ignore[union-attr]

    def _last_assign(self, sf: SourceFile, scope: ast.AST, name: str, line: int) -> Optional[ast.AST]:
        before = [a for a in self._assignments(sf, scope, name) if a.lineno < line]
        if before:
            return before[-1]
        if not isinstance(scope, ast.Module) and sf.tree is not None:
            mod = [a for a in self._assignments(sf, sf.tree, name)]
            if mod and not _is_param(scope, name):
                return mod[-1]
        return None

    def _ctor_value(self, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int,
                    depth: int = 0) -> Optional[Tuple[SourceFile, ast.AST]]:
        """The expression an object (a name, self.attr, self.a.b) was built from."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(expr, ast.Name):
            a = self._last_assign(sf, scope, expr.id, line)
            if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None:
                if isinstance(a, ast.Assign) and not any(isinstance(t, ast.Name) for t in a.targets):
                    return None
                value = a.value
                if isinstance(value, ast.Name) and value.id != expr.id:
                    return self._ctor_value(sf, scope, value, a.lineno, depth + 1) or (sf, value)
                return sf, value
            return None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = sf.class_of(scope) if not isinstance(scope, ast.ClassDef) else scope
            if cls is None:
                return None
            table = sf.memo.get(("self-attrs", id(cls)))
            if table is None:
                table = {}
                for node in ast.walk(cls):
                    targets: List[ast.AST] = []
                    if isinstance(node, ast.Assign):
                        targets = list(node.targets)
                    elif isinstance(node, ast.AnnAssign) and node.value is not None:
                        targets = [node.target]
                    for t in targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            fn = sf.scope_of(node)
                            if t.attr not in table or getattr(fn, "name", "") == "__init__":
                                table[t.attr] = node.value
                sf.memo[("self-attrs", id(cls))] = table
            value = table.get(expr.attr)  # type: ignore[union-attr]
            return (sf, value) if value is not None else None
        if isinstance(expr, ast.Attribute):
            # obj.attr where obj is a local-class instance: look in that class
            inner = self._ctor_value(sf, scope, expr.value, line, depth + 1)
            if inner is not None:
                cls = self._class_of_value(*inner)
                if cls is not None:
                    csf, cdef = cls
                    init = _method(cdef, "__init__") or cdef
                    fake = ast.Attribute(value=ast.Name(id="self", ctx=ast.Load()), attr=expr.attr, ctx=ast.Load())
                    return self._ctor_value(csf, init, fake, 10 ** 9, depth + 1)
        return None

    def _class_of_value(self, sf: SourceFile, value: ast.AST) -> Optional[Tuple[SourceFile, ast.ClassDef]]:
        """The project class whose constructor call value is (through .to()/.cuda() chains)."""
        value = _unwrap_chain(value)
        if not isinstance(value, ast.Call):
            return None
        return self._resolve_class(sf, value.func)

    def _resolve_class(self, sf: SourceFile, func: ast.AST) -> Optional[Tuple[SourceFile, ast.ClassDef]]:
        found = self._resolve_def(sf, func)
        if found is not None and isinstance(found[1], ast.ClassDef):
            return found  # type: ignore[return-value]
        return None

    def _resolve_def(self, sf: SourceFile, func: ast.AST) -> Optional[Tuple[SourceFile, ast.AST]]:
        """A module-level project def/class referred to by Name or module.attr."""
        if isinstance(func, ast.Name):
            return self.project.lookup(sf.rel, func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            imp = sf.imports().get(func.value.id)
            if imp is not None:
                module, attr, level = imp
                mod = module if attr is None else (f"{module}.{attr}" if module else attr)
                target = self.project.resolve_module(sf.rel, mod, level)
                if target is not None:
                    return self.project.lookup(target, func.attr)
        return None

    def _module_call(self, sf: SourceFile, scope: ast.AST, func: ast.AST, line: int
                     ) -> List[Tuple[SourceFile, ast.AST]]:
        """``func`` holds an instance of a project class: calling it runs its forward/__call__."""
        ctor = self._ctor_value(sf, scope, func, line)
        if ctor is not None:
            cls = self._class_of_value(*ctor)
            if cls is not None:
                m = _method(cls[1], "forward") or _method(cls[1], "__call__")
                if m is not None:
                    return [(cls[0], m)]
        return []

    def _callees(self, sf: SourceFile, scope: ast.AST, call: ast.Call, line: int, wide: bool = False
                 ) -> List[Tuple[SourceFile, ast.AST]]:
        """Project functions a call may run (for following return values)."""
        func = call.func
        out: List[Tuple[SourceFile, ast.AST]] = []
        if isinstance(func, ast.Name):
            nested = [n for n in sf.own(scope) if isinstance(n, FUNC_TYPES) and n.name == func.id]
            if nested:
                return [(sf, nested[-1])]
            d = self._resolve_def(sf, func)
            if d is not None:
                if isinstance(d[1], FUNC_TYPES):
                    return [d]
                return []  # a class: construction
            return self._module_call(sf, scope, func, line)
        if not isinstance(func, ast.Attribute):
            return []
        recv = func.value
        if isinstance(recv, ast.Name) and recv.id == "self":
            cls = sf.class_of(scope)
            if cls is not None:
                m = _method(cls, func.attr)
                if m is not None:
                    return [(sf, m)]
            return self._module_call(sf, scope, func, line)
        d = self._resolve_def(sf, func)
        if d is not None:
            return [d] if isinstance(d[1], FUNC_TYPES) else []
        ctor = self._ctor_value(sf, scope, recv, line)
        if ctor is not None:
            cls = self._class_of_value(*ctor)
            if cls is not None:
                m = _method(cls[1], func.attr)
                return [(cls[0], m)] if m is not None else []
        if func.attr in ("forward", "__call__") or func.attr.startswith("__"):
            return []
        # unknown receiver (a parameter): any project method of that name in the closure
        files = self.project.closure(sf.rel)
        if wide:
            files = files + [r for r in self.project.py_files(("def " + func.attr,)) if r not in files]
        for rel in files:
            other = self.project.source(rel)
            if other is not None:
                out.extend((other, fn) for fn in _methods_named(other, func.attr))
            if len(out) >= 4 or (out and not wide):
                break
        return out[:4]

    # --- scalar uses ---------------------------------------------------------------------------
    def _is_scalar_use(self, sf: SourceFile, node: ast.AST) -> bool:
        cur = node
        while True:
            p = sf.parent(cur)
            if isinstance(p, ast.Attribute) and p.attr in PASS_ATTRS:
                gp = sf.parent(p)
                cur = gp if isinstance(gp, ast.Call) and gp.func is p else p
                continue
            break
        p = sf.parent(cur)
        if isinstance(p, ast.Attribute) and p.attr in SCALAR_ATTRS:
            return True
        if isinstance(p, ast.Call) and cur is not p.func and last_name(p.func) in LOG_CALLS:
            return True
        if isinstance(p, ast.keyword):
            gp = sf.parent(p)
            if isinstance(gp, ast.Call) and last_name(gp.func) in LOG_CALLS:
                return True
        if isinstance(p, ast.Compare) and all(isinstance(o, (ast.Lt, ast.Gt, ast.LtE, ast.GtE)) for o in p.ops):
            return True
        if isinstance(p, ast.BinOp) and isinstance(p.op, ast.Mod) and const_str(p.left) is not None:
            return True
        for anc in sf.ancestors(cur):
            if isinstance(anc, (ast.JoinedStr, ast.FormattedValue)):
                return True
            if isinstance(anc, ast.stmt):
                break
        return False

    def _scalar_used(self, sf: SourceFile, scope: ast.AST, name: str) -> bool:
        return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                   and self._is_scalar_use(sf, n) for n in sf.own(scope))

    def _only_consumed(self, sf: SourceFile, scope: ast.AST, name: str, assign: ast.AST,
                       consumer: ast.AST) -> bool:
        """True when the value bound by assign is used only by consumer (and as a scalar)."""
        later = [a.lineno for a in self._assignments(sf, scope, name) if a.lineno > assign.lineno]
        stop = min(later) if later else 10 ** 9
        for n in sf.own(scope):
            if not (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)):
                continue
            if n is consumer or not (assign.lineno <= n.lineno <= stop):
                continue
            if n.lineno == assign.lineno and _contains(assign, n) and not isinstance(assign, ast.AugAssign):
                continue
            if self._is_scalar_use(sf, n) or self._is_detached_return(sf, n):
                continue
            return False
        return True

    def _is_detached_return(self, sf: SourceFile, node: ast.AST) -> bool:
        """`return loss.detach()`: handed back for logging, not used for another computation."""
        cur, detached = node, False
        while True:
            p = sf.parent(cur)
            if isinstance(p, ast.Attribute) and p.attr in PASS_ATTRS:
                detached = detached or p.attr in ("detach", "data")
                gp = sf.parent(p)
                cur = gp if isinstance(gp, ast.Call) and gp.func is p else p
                continue
            return detached and isinstance(p, ast.Return)

    # --- nonscalar -----------------------------------------------------------------------------
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
            ctor = self._ctor_value(sf, scope, expr.func, line) if isinstance(expr.func, (ast.Name, ast.Attribute)) else None
            if ctor is not None and isinstance(_unwrap_chain(ctor[1]), ast.Call):
                kw = keyword(_unwrap_chain(ctor[1]), "reduction")  # type: ignore[arg-type]
                if kw is not None and const_str(kw.value) == "none":
                    return ctor[0], kw
            for csf, fn in self._callees(sf, scope, expr, line, wide=True):
                for ret in _returns(fn):
                    found = self._crit_origin(csf, fn, ret.value, ret.lineno + 1, ret.value, depth + 1)
                    if found is not None:
                        return found
            return None
        if isinstance(expr, ast.Name):
            a = self._last_assign(sf, scope, expr.id, line)
            if a is None:
                if frame_i >= 0 and isinstance(scope, FUNC_TYPES) and _is_param(scope, expr.id):
                    return self._crit_from_caller(scope, expr.id, frame_i, depth)
                return None
            if not isinstance(a, (ast.Assign, ast.AnnAssign)) or a.value is None:
                return None
            if isinstance(a, ast.Assign) and not (len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)):
                return None
            if not self._only_consumed(sf, scope, expr.id, a, consumer):
                return None
            return self._crit_origin(sf, scope, a.value, a.lineno, a.value, depth + 1)
        return None

    def _caller_argument(self, fn: ast.AST, param: str, frame_i: int):
        """(caller file, call, argument node, line) that fed ``param`` of the crash function, or None."""
        if frame_i + 1 >= len(self.mapped):
            return None
        outer = self.mapped[frame_i + 1]
        osf = self.project.source(outer.rel_path)
        stmt = osf.stmt_at(outer.line) if osf is not None else None
        if stmt is None:
            return None
        for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
            if last_name(call.func) != fn.name:  # type: ignore[attr-defined]
                continue
            arg = _argument_for(fn, call, param)
            if arg is not None:
                return osf, call, arg, outer.line
        return None

    def _crit_from_caller(self, fn: ast.AST, param: str, frame_i: int, depth: int):
        """Follow a parameter of the crash function to the argument its caller passed."""
        found = self._caller_argument(fn, param, frame_i)
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
            info = _classify_backward(node)
            if info is not None:
                found.append((0 if node.lineno == line else 1, node.lineno, node.col_offset, info, node))
        if not found:
            return None
        found.sort(key=lambda t: t[:3])
        kind, recv = found[0][3]
        return kind, found[0][4], recv

    def _nonscalar(self) -> None:
        info = None
        fi = 0
        if self.mapped:
            m = self.mapped[0]
            sf = self.project.source(m.rel_path)
            if sf is not None:
                info = self._backward_call(sf, m.line)
        if info is None:
            self._per_sample_returns()
            return
        kind, call, recv = info
        scope = sf.scope_of(call)
        crash_line = call.lineno
        if self._already_scalar(sf, scope, kind, call, recv, fi):
            return
        if kind == "autograd-grad":
            self._add(sf, call.lineno, call.col_offset, "autograd-grad",
                      "torch.autograd.grad is given a non-scalar output without grad_outputs.", 0.9)
            if isinstance(recv, ast.Name):
                a = self._last_assign(sf, scope, recv.id, crash_line)
                if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None:
                    self._add(sf, a.lineno, _value_col(sf, a), "loss-assignment",
                              f"'{recv.id}' is assigned a non-scalar value here.", 0.4)
            return
        recv_reason = (f"backward() is called on '{_src(sf, recv)}', which is not a scalar; reduce it "
                       f"(e.g. .mean()) or pass a gradient.")
        crit = self._crit_origin(sf, scope, recv, crash_line, recv, frame_i=fi)
        assign = None
        if isinstance(recv, ast.Name):
            a = self._last_assign(sf, scope, recv.id, crash_line)
            if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None and \
                    not (isinstance(a, ast.Assign) and not isinstance(a.targets[0], ast.Name)):
                assign = a
        scalar = isinstance(recv, ast.Name) and self._scalar_used(sf, scope, recv.id)
        loss_returns = self._loss_fn_returns(sf, scope, assign) if crit is None and assign is not None else []
        if loss_returns:
            unreduced = []
            for rsf, ret in loss_returns:
                red = self._reduced_origin(rsf, rsf.scope_of(ret), ret.value, ret.lineno + 1)
                if red is not None:
                    self._note_reduced(red)
                else:
                    unreduced.append((rsf, ret))
            loss_returns = unreduced or loss_returns
            for rsf, ret in loss_returns:
                self._add(rsf, ret.lineno, ret.value.col_offset, "per-sample-return",
                          f"{_func_name(rsf, ret)} returns a loss that is not reduced to a scalar; "
                          f"backward() is called on it at {sf.rel}:{call.lineno}.", 0.9)
            self._add(sf, assign.lineno, _value_col(sf, assign), "loss-assignment",
                      f"'{recv.id}' is assigned the unreduced loss here.", 0.6)
            self._add(sf, call.lineno, recv.col_offset, "backward-receiver", recv_reason, 0.5)
        elif crit is not None:
            csf, kw = crit
            self._add(csf, kw.lineno, kw.col_offset, "criterion-reduction",
                      "The loss comes from a criterion built with reduction='none', so it holds one value "
                      "per sample; nothing else uses the per-sample values.", 0.9)
            if assign is not None:
                self._add(sf, assign.lineno, _value_col(sf, assign), "loss-assignment",
                          f"'{recv.id}' is assigned the per-sample loss here.", 0.6)
            self._add(sf, call.lineno, recv.col_offset, "backward-receiver", recv_reason, 0.5)
        elif scalar and assign is not None:
            self._add(sf, assign.lineno, _value_col(sf, assign), "loss-assignment",
                      f"'{recv.id}' is used as a scalar elsewhere (e.g. .item() or printing) but is assigned "
                      f"a non-scalar value here.", 0.9)
            self._add(sf, call.lineno, recv.col_offset, "backward-receiver", recv_reason, 0.6)
        else:
            self._add(sf, call.lineno, recv.col_offset, "backward-receiver", recv_reason, 0.9)
            if assign is not None:
                self._add(sf, assign.lineno, _value_col(sf, assign), "loss-assignment",
                          f"'{recv.id}' is assigned a non-scalar value here.", 0.6)
        if self.diag.field("dtype"):
            self.notes.append(f"The output is complex ({self.diag.field('dtype')}); backward() needs a real "
                              f"scalar, e.g. .abs().mean() or .real.")

    # --- already fixed? ----------------------------------------------------------------------
    def _already_scalar(self, sf: SourceFile, scope: ast.AST, kind: str, call: ast.Call, recv: ast.AST,
                        frame_i: int) -> bool:
        """The backward call on the crash line already gets a scalar (or a gradient): note it, True."""
        given = _given_gradient(call, kind)
        if given is not None:
            what = "grad_outputs= to torch.autograd.grad" if kind == "autograd-grad" else "a gradient to backward()"
            self.notes.append(f"{sf.rel}:{given.lineno} already passes {what}; {FIXED_SINCE}.")
            return True
        red = self._reduced_origin(sf, scope, recv, call.lineno, frame_i=frame_i)
        if red is not None:
            self._note_reduced(red)
            return True
        return False

    def _note_reduced(self, red: Tuple[SourceFile, ast.AST]) -> None:
        rsf, node = red
        self.notes.append(f"{rsf.rel}:{node.lineno} already reduces the loss to a scalar; {FIXED_SINCE}.")

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
                if self._is_number(sf, scope, side, line):
                    continue
                r = self._reduced_origin(sf, scope, side, line, depth + 1, frame_i)
                if r is None:
                    return None
                sides.append(r)
            return sides[0] if sides else None
        if isinstance(expr, ast.Name):
            a = self._last_assign(sf, scope, expr.id, line)
            if a is None:
                if frame_i >= 0 and isinstance(scope, FUNC_TYPES) and _is_param(scope, expr.id):
                    return self._reduced_from_caller(scope, expr.id, frame_i, depth)
                return None
            if isinstance(a, ast.AugAssign) and isinstance(a.op, (ast.Add, ast.Sub)):
                r = self._reduced_origin(sf, scope, a.value, a.lineno, depth + 1)
                if r is None:
                    return None
                prev = ast.Name(id=expr.id, ctx=ast.Load())
                if self._is_number(sf, scope, prev, a.lineno) or \
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
        full = self._full_name(sf, func)
        if full in ("torch.mean", "torch.sum") and len(expr.args) == 1 and _no_dim(expr):
            return sf, expr
        if full.startswith("torch.nn.functional."):
            fname = full.rsplit(".", 1)[-1]
            if fname in FUNCTIONAL_LOSSES or fname.endswith("_loss"):
                return (sf, expr) if _reduces(expr) else None
            return None
        if isinstance(func, (ast.Name, ast.Attribute)) and not full.startswith("torch."):
            ctor = self._ctor_value(sf, scope, func, line)
            if ctor is not None:
                csf, value = ctor
                value = _unwrap_chain(value)
                if isinstance(value, ast.Call) and self._resolve_class(csf, value.func) is None:
                    cname = self._full_name(csf, value.func)
                    if cname.startswith("torch.nn.") and cname.endswith("Loss"):
                        return (csf, value) if _reduces(value) else None
        callees = self._callees(sf, scope, expr, line, wide=True)
        if not callees:
            return None
        found = None
        for csf, fn in callees:
            rets = [r for r in _returns(fn) if not isinstance(r.value, ast.Constant)]
            if not rets:
                return None
            for ret in rets:
                r = self._reduced_origin(csf, fn, ret.value, ret.lineno + 1, depth + 1)
                if r is None:
                    return None
                found = found or r
        return found

    def _reduced_from_caller(self, fn: ast.AST, param: str, frame_i: int, depth: int):
        found = self._caller_argument(fn, param, frame_i)
        if found is None:
            return None
        osf, call, arg, line = found
        return self._reduced_origin(osf, osf.scope_of(call), arg, line, depth + 1, frame_i + 1)

    def _is_number(self, sf: SourceFile, scope: ast.AST, node: ast.AST, line: int) -> bool:
        """A plain Python number: a literal, or a name last assigned one."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return self._is_number(sf, scope, node.operand, line)
        if isinstance(node, ast.Name):
            a = self._last_assign(sf, scope, node.id, line)
            if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None:
                v = a.value
                if isinstance(v, ast.Constant):
                    return isinstance(v.value, (int, float)) and not isinstance(v.value, bool)
                return isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in ("int", "float", "len")
        return False

    def _full_name(self, sf: SourceFile, func: ast.AST) -> str:
        """'F.cross_entropy' -> 'torch.nn.functional.cross_entropy' through the file's imports."""
        d = dotted(func)
        if not d:
            return ""
        head, _, rest = d.partition(".")
        imp = sf.imports().get(head)
        if imp is not None and not imp[2]:
            module, attr, _level = imp
            base = f"{module}.{attr}" if attr and module else (attr or module)
            d = f"{base}.{rest}" if rest else base
        elif head == "F":
            d = f"torch.nn.functional.{rest}" if rest else d
        elif head == "nn":
            d = f"torch.nn.{rest}" if rest else d
        return d

    def _loss_fn_returns(self, sf: SourceFile, scope: ast.AST, assign: ast.AST
                         ) -> List[Tuple[SourceFile, ast.Return]]:
        """Returns of a compute_loss/training_step-like project function the loss was assigned from."""
        value = getattr(assign, "value", None)
        if not isinstance(value, ast.Call):
            return []
        out: List[Tuple[SourceFile, ast.Return]] = []
        for csf, fn in self._callees(sf, scope, value, assign.lineno, wide=True):
            if getattr(fn, "name", "") not in LOSS_FN_NAMES:
                continue
            out.extend((csf, r) for r in _returns(fn) if not isinstance(r.value, ast.Constant))
        return out

    def _per_sample_returns(self) -> None:
        """The crash is inside a library (Lightning, a Trainer): look at training_step/compute_loss."""
        self._library_note()
        needles = tuple("def " + n for n in sorted(LOSS_FN_NAMES))
        found: List[Tuple[float, SourceFile, ast.Return, Optional[Tuple[SourceFile, ast.keyword]]]] = []
        for rel in self.project.py_files(needles):
            if self._over_budget():
                break
            sf = self.project.source(rel)
            if sf is None:
                continue
            for fn in sf.functions():
                if fn.name not in LOSS_FN_NAMES:
                    continue
                for ret in _returns(fn):
                    if isinstance(ret.value, ast.Constant):
                        continue
                    value = ret.value
                    red = self._reduced_origin(sf, fn, value, ret.lineno + 1)
                    if red is not None:
                        self._note_reduced(red)
                        continue
                    crit = self._crit_origin(sf, fn, value, ret.lineno + 1, value)
                    if crit is None and isinstance(value, ast.IfExp):
                        crit = self._crit_origin(sf, fn, value.orelse, ret.lineno + 1, value.orelse)
                    found.append((0.9 if crit else 0.5, sf, ret, crit))
        for score, sf, ret, crit in found:
            self._add(sf, ret.lineno, ret.value.col_offset, "per-sample-return",
                      f"{_func_name(sf, ret)} returns a loss that is not reduced to a scalar; the library "
                      f"calls backward() on it.", score)
            if crit is not None:
                csf, kw = crit
                self._add(csf, kw.lineno, kw.col_offset, "criterion-reduction",
                          "The returned loss comes from a criterion built with reduction='none'.", score - 0.2)

    # --- inplace -------------------------------------------------------------------------------
    def _node_name(self) -> str:
        node = self.diag.field("node")
        if not node:
            m = re.search(r"which is output \d+ of ([\w:.<>]+),", self.diag.traceback.message or "")
            node = m.group(1) if m else ""
        return node

    def _inplace(self) -> None:
        node = self._node_name()
        if not node:
            self._step_between()
            return
        fam = op_family(node)
        if self.anomaly_mapped and self._inplace_from_anomaly(fam):
            return
        files = self._search_files()
        seen: Set[str] = set()
        for rel in files:
            if rel in seen:
                continue
            seen.add(rel)
            if self._over_budget():
                break
            sf = self.project.source(rel)
            if sf is None:
                continue
            for scope in sf.scopes():
                self._scan_inplace(sf, scope, fam)

    def _expr_families(self, sf: SourceFile, scope: ast.AST, expr: ast.AST, line: int,
                       depth: int = 0) -> Set[str]:
        """Op families that produce the value of expr (its outermost operation)."""
        if depth > MAX_DEPTH or expr is None:
            return set()
        if isinstance(expr, ast.BinOp):
            f = _BINOP_FAMILY.get(type(expr.op))
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
            ctor = self._ctor_value(sf, scope, func, line)
            if ctor is not None:
                fams |= self._module_families(ctor[0], ctor[1], depth + 1)
                if fams:
                    return fams
        for csf, fn in self._callees(sf, scope, expr, line)[:2]:
            for ret in _returns(fn):
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
        value = _unwrap_chain(value)
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
        cls = self._class_of_value(sf, value)
        if cls is not None:
            csf, cdef = cls
            fwd = _method(cdef, "forward") or _method(cdef, "__call__")
            fams: Set[str] = set()
            if fwd is not None:
                for ret in _returns(fwd):
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
            return (sf, kw) if _is_true(kw.value) else None
        func = call.func
        if isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                          and func.value.id == "self"):
            ctor = self._ctor_value(sf, scope, func, line)
            if ctor is not None:
                value = _unwrap_chain(ctor[1])
                if isinstance(value, ast.Call):
                    if last_name(value.func) == "Sequential" and value.args:
                        value = _unwrap_chain(value.args[0])
                    if isinstance(value, ast.Call):
                        kw = keyword(value, "inplace")
                        if kw is not None and _is_true(kw.value):
                            return ctor[0], kw
        return None

    def _scan_inplace(self, sf: SourceFile, scope: ast.AST, fam: str,
                      seed: Optional[Dict[str, Tuple[Set[str], int]]] = None, start: int = 0,
                      score_match: float = 0.8, why: str = "") -> int:
        """Track values produced by ops in scope and report in-place modifications of them."""
        tracked: Dict[str, Tuple[Set[str], int]] = dict(seed or {})
        seed_origins = list((seed or {}).values())
        if seed is None and isinstance(scope, FUNC_TYPES) and scope.name == "forward":
            for a in _param_names(scope):
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
                self._add(wsf, kw.lineno, kw.col_offset, "inplace-kwarg", reason, score)
            else:
                self._add(sf, line, col, kind, reason, score)
            count += 1

        for st in stmts:
            # in-place operations in this statement
            for node in _walk_stmt(st):
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
        frames = self.anomaly_mapped
        for i, m in enumerate(frames):
            sf = self.project.source(m.rel_path)
            if sf is None:
                continue
            stmt = sf.stmt_at(m.line)
            if stmt is None:
                continue
            why = (f"The anomaly-mode trace shows the saved tensor was created at {m.rel_path}:{m.line}; "
                   f"it is modified in place here.")
            before = len(self.sites)
            # the created value flows outward while it is returned
            j = i
            cur_sf, cur_stmt = sf, stmt
            while True:
                scope = cur_sf.scope_of(cur_stmt)
                # in the creating statement itself: a module applied in place to the new value
                for node in _walk_stmt(cur_stmt):
                    if isinstance(node, ast.Call) and node.args and not isinstance(node.args[0], ast.Name):
                        where = self._inplace_module(cur_sf, scope, node, node.lineno)
                        if where is not None:
                            self._add(where[0], where[1].lineno, where[1].col_offset, "inplace-kwarg", why, 0.95)
                names = _bound_names(cur_stmt)
                if names:
                    seed = {n: ({fam or "?"}, cur_stmt.lineno) for n in names}
                    self._scan_inplace(cur_sf, scope, fam, seed=seed, start=cur_stmt.lineno,
                                       score_match=0.95, why=why)
                    if len(self.sites) > before:
                        return True
                    returned = any(isinstance(n, ast.Return) and n.value is not None and
                                   base_name(n.value) in names and _is_view_chain(n.value)
                                   for n in sf.own(scope))
                    if not returned:
                        break
                elif not isinstance(cur_stmt, ast.Return):
                    break
                if len(self.sites) > before:
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
            if len(self.sites) > before:
                return True
            self.notes.append(f"The anomaly-mode trace points at {m.rel_path}:{m.line}, but no in-place "
                              f"change of that value was found; other candidates are listed.")
            return False
        return False

    def _step_between(self) -> None:
        """Leaf/parameter tensor modified: an optimizer step (or no_grad update) between two backwards."""
        files = self._search_files(("backward",))
        crash_scopes = set()
        for m in self.mapped[:1]:
            sf = self.project.source(m.rel_path)
            st = sf.stmt_at(m.line) if sf is not None else None
            if st is not None:
                crash_scopes.add((m.rel_path, id(sf.scope_of(st))))
        for rel in files:
            if self._over_budget():
                break
            sf = self.project.source(rel)
            if sf is None:
                continue
            for scope in sf.scopes():
                bonus = 0.05 if (rel, id(scope)) in crash_scopes else 0.0
                calls = [n for n in sf.own(scope) if isinstance(n, ast.Call)]
                backs = sorted(n.lineno for n in calls if _classify_backward(n) is not None
                               and _classify_backward(n)[0] == "backward-receiver")
                if not backs:
                    continue
                for c in calls:
                    if not _is_optimizer_step(c):
                        continue
                    recv = _src(sf, c.func.value) if isinstance(c.func, ast.Attribute) else "optimizer"
                    if any(b < c.lineno for b in backs) and any(b > c.lineno for b in backs):
                        self._add(sf, c.lineno, c.col_offset, "optimizer-step-between",
                                  f"{recv}.step() updates the parameters in place between two backward() "
                                  f"calls, and the second backward still needs their old values.", 0.8 + bonus)
                # manual no_grad updates between two backwards
                for w in (n for n in sf.own(scope) if isinstance(n, ast.With)):
                    if not any("no_grad" in dotted(_unwrap_call(it.context_expr)) for it in w.items):
                        continue
                    if not (any(b < w.lineno for b in backs) and any(b > w.lineno for b in backs)):
                        continue
                    for n in ast.walk(w):
                        if isinstance(n, ast.AugAssign):
                            self._add(sf, n.lineno, n.target.col_offset, "inplace-augassign",
                                      "A parameter is updated in place between two backward() calls.", 0.6 + bonus)

    # --- fp16 / bf16 parameters ----------------------------------------------------------------
    def _half_params(self, bf16: bool) -> None:
        closure = set(self._crash_closure())
        if not closure:
            self._library_note()
        if bf16:
            disabled = self._disabled_scaler(closure)
            if disabled is not None:
                dsf, dcall = disabled
                self.notes.append(f"{dsf.rel}:{dcall.lineno} already constructs the GradScaler with enabled=False, "
                                  f"so it no longer unscales bfloat16 gradients; {FIXED_SINCE}.")
                return
            for rel in self.project.py_files(("GradScaler",)):
                sf = self.project.source(rel)
                if sf is None:
                    continue
                for node in ast.walk(sf.tree):
                    if isinstance(node, ast.Call) and last_name(node.func) in ("GradScaler", "ShardedGradScaler"):
                        en = keyword(node, "enabled")
                        if en is not None and isinstance(en.value, ast.Constant) and en.value.value is False:
                            continue
                        score = 0.95 if (not closure or rel in closure) else 0.92
                        self._add(sf, node.lineno, node.col_offset, "grad-scaler",
                                  "A GradScaler is used with bfloat16 parameters; bf16 needs no loss scaling "
                                  "(construct it with enabled=False or drop it).", score)
        needles = ("bfloat16", "bf16") if bf16 else ("half", "float16", "fp16")
        dtype_word = "bfloat16" if bf16 else "float16"
        for rel in self.project.py_files(needles):
            if self._over_budget():
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
        for m in self.mapped:
            sf = self.project.source(m.rel_path)
            stmt = sf.stmt_at(m.line) if sf is not None else None
            if stmt is None:
                continue
            scope = sf.scope_of(stmt)
            for node in _walk_stmt(stmt):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
                        node.func.attr in ("step", "unscale_", "update", "scale")):
                    continue
                recv = node.func.value
                if not isinstance(recv, (ast.Name, ast.Attribute)) or "scaler" not in last_name(recv).lower():
                    continue
                ctor = self._ctor_value(sf, scope, recv, m.line)
                value = _unwrap_chain(ctor[1]) if ctor is not None else None
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
                self._add(sf, call.lineno, func.end_col_offset - len(name) if hasattr(func, "end_col_offset") else call.col_offset,
                          "param-dtype", f"A trainable parameter is created in {word}; GradScaler needs float32 "
                          f"parameters.", 0.8 - penalty)
                return
            if self._is_model(sf, scope, func.value, call.lineno):
                col = (func.end_col_offset or 0) - len(name)
                self._add(sf, call.lineno, max(col, 0), "model-cast",
                          f"The model is cast to {word}, so its gradients are {word}; keep the parameters in "
                          f"float32 and let autocast handle mixed precision.", 0.9 - penalty)
            return
        # from_pretrained(..., torch_dtype=torch.float16)
        for kwname in ("torch_dtype", "dtype"):
            kw = keyword(call, kwname)
            if kw is None or not _is_dtype(kw.value, bf16):
                continue
            if name in FROM_PRETRAINED or (kwname == "torch_dtype"):
                self._add(sf, kw.lineno, kw.col_offset, "torch-dtype-fp16",
                          f"The model is loaded with {kwname}={_src(sf, kw.value)}, so its trainable parameters "
                          f"are {word}.", 0.88 - penalty)
                return
        if dotted(func).endswith("set_default_dtype") and call.args and _is_dtype(call.args[0], bf16):
            self._add(sf, call.lineno, call.col_offset, "default-dtype",
                      f"The default dtype is set to {word}, so every parameter created afterwards is {word}.",
                      0.85 - penalty)
            return
        kw = keyword(call, "dtype")
        if kw is not None and _is_dtype(kw.value, bf16):
            rg = keyword(call, "requires_grad")
            if in_parameter or (rg is not None and _is_true(rg.value)):
                self._add(sf, kw.lineno, kw.col_offset, "param-dtype",
                          f"A trainable parameter is created in {word}; GradScaler needs float32 parameters.",
                          0.8 - penalty)

    def _is_model(self, sf: SourceFile, scope: ast.AST, recv: ast.AST, line: int, depth: int = 0) -> bool:
        """Is the receiver of a cast a model/module (True) rather than input data (False)?"""
        if depth > 3:
            return False
        recv = _unwrap_chain(recv)
        if isinstance(recv, ast.Call):
            name = last_name(recv.func)
            if name in FROM_PRETRAINED:
                return True
            if name in TENSOR_FACTORIES:
                return False
            if name[:1].isupper():
                cls = self._resolve_class(sf, recv.func)
                return True if cls is not None else not name.endswith(("Tensor", "Dataset", "Loader"))
            return bool(MODEL_NAME_RX.search(name)) and not name.endswith("_")
        if isinstance(recv, ast.Subscript):
            return False
        name = recv.id if isinstance(recv, ast.Name) else (recv.attr if isinstance(recv, ast.Attribute) else "")
        if not name:
            return False
        if name in DATA_NAMES:
            return False
        ctor = self._ctor_value(sf, scope, recv, line) if isinstance(recv, (ast.Name, ast.Attribute)) else None
        if ctor is not None and ctor[1] is not recv:
            val = _unwrap_chain(ctor[1])
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


# ---------------------------------------------------------------------------------------------
# small pure helpers
def _rank(sites: Iterable[FixSite]) -> List[FixSite]:
    best: Dict[Tuple[str, int, str], FixSite] = {}
    order: Dict[Tuple[str, int, str], int] = {}
    for i, s in enumerate(sites):
        key = (s.path, s.line, s.kind)
        if key not in best:
            best[key] = s
            order[key] = i
        elif s.score > best[key].score:
            best[key] = s
    return sorted(best.values(), key=lambda s: (-s.score, order[(s.path, s.line, s.kind)]))


def _value_col(sf: SourceFile, assign: ast.AST) -> int:
    """Byte column where the assigned value starts as written (an opening parenthesis included)."""
    value = assign.value  # type: ignore[attr-defined]
    col = value.col_offset
    raw = sf.line_text(value.lineno).encode("utf-8")
    i = col
    while i > 0 and raw[i - 1:i] in (b" ", b"\t", b"("):
        i -= 1
    if i > 0 and raw[i - 1:i] == b"=":
        j = i
        while raw[j:j + 1] == b" ":
            j += 1
        return j
    return col


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _src(sf: SourceFile, node: ast.AST) -> str:
    try:
        seg = ast.get_source_segment(sf.text, node)
    except Exception:
        seg = None
    if seg:
        return " ".join(seg.split())[:80]
    try:
        return ast.unparse(node)[:80]
    except Exception:
        return "the value"


def _func_name(sf: SourceFile, node: ast.AST) -> str:
    fn = sf.scope_of(node)
    return f"{getattr(fn, 'name', 'the module')}()" if isinstance(fn, FUNC_TYPES) else "The module"


def _contains(outer: ast.AST, inner: ast.AST) -> bool:
    return any(n is inner for n in ast.walk(outer))


def _is_param(fn: ast.AST, name: str) -> bool:
    return isinstance(fn, FUNC_TYPES) and name in _param_names(fn)


def _param_names(fn: ast.AST) -> List[str]:
    a = fn.args  # type: ignore[attr-defined]
    names = [x.arg for x in getattr(a, "posonlyargs", []) + a.args + a.kwonlyargs]
    if a.vararg:
        names.append(a.vararg.arg)
    if a.kwarg:
        names.append(a.kwarg.arg)
    return names


def _argument_for(fn: ast.AST, call: ast.Call, param: str) -> Optional[ast.AST]:
    for kw in call.keywords:
        if kw.arg == param:
            return kw.value
    a = fn.args  # type: ignore[attr-defined]
    positional = [x.arg for x in getattr(a, "posonlyargs", []) + a.args]
    if positional and positional[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        positional = positional[1:]
    if param in positional:
        i = positional.index(param)
        if i < len(call.args) and not isinstance(call.args[i], ast.Starred):
            return call.args[i]
    return None


def _methods_named(sf: SourceFile, name: str) -> List[ast.AST]:
    table = sf.memo.get("methods")
    if table is None:
        table = {}
        for fn in sf.functions():
            if isinstance(sf.parent(fn), ast.ClassDef):
                table.setdefault(fn.name, []).append(fn)
        sf.memo["methods"] = table
    return list(table.get(name, []))  # type: ignore[union-attr]


def _method(cls: ast.ClassDef, name: str) -> Optional[ast.AST]:
    found = None
    for st in cls.body:
        if isinstance(st, FUNC_TYPES) and st.name == name:
            found = st
    return found


def _returns(fn: ast.AST) -> List[ast.Return]:
    return sorted((n for n in own_nodes(fn) if isinstance(n, ast.Return) and n.value is not None),
                  key=lambda n: n.lineno)


def _unwrap_chain(node: ast.AST) -> ast.AST:
    """model.to(dev).cuda().train() -> model; Net().to(dev) -> Net()."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("to", "cuda", "cpu", "train", "eval", "float", "requires_grad_", "half",
                               "bfloat16", "double", "type", "xpu", "mps", "share_memory"):
        node = node.func.value
    return node


def _unwrap_call(node: ast.AST) -> ast.AST:
    return node.func if isinstance(node, ast.Call) else node


def _is_true(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _is_dtype(node: ast.AST, bf16: bool) -> bool:
    words = ("bfloat16", "bf16") if bf16 else ("float16", "half", "fp16")
    d = dotted(node)
    if d:
        return d.split(".")[-1] in words and (d.startswith("torch.") or "." not in d or d.count(".") == 1)
    s = const_str(node)
    return s is not None and s.lower() in words


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


def _walk_stmt(st: ast.AST):
    """Nodes of one simple statement, not descending into lambdas/comprehension-scoped defs."""
    stack = [st]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            stack.append(child)


def _bound_names(st: ast.AST) -> List[str]:
    out: List[str] = []
    targets: List[ast.AST] = []
    if isinstance(st, ast.Assign):
        targets = list(st.targets)
    elif isinstance(st, (ast.AnnAssign, ast.AugAssign)):
        targets = [st.target]
    for t in targets:
        if isinstance(t, ast.Name):
            out.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            out.extend(e.id for e in t.elts if isinstance(e, ast.Name))
    return out


def _classify_backward(call: ast.Call) -> Optional[Tuple[str, ast.AST]]:
    """('backward-receiver', receiver) or ('autograd-grad', output) for a backward-like call."""
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr == "backward":
            recv = func.value
            d = dotted(recv)
            if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) and recv.func.attr == "scale" \
                    and recv.args:
                return "backward-receiver", recv.args[0]
            if d.endswith("autograd") or d == "torch":
                return ("backward-receiver", call.args[0]) if call.args else None
            if call.args and last_name(recv) in ACCEL_NAMES:
                return "backward-receiver", call.args[0]
            return "backward-receiver", recv
        if func.attr == "manual_backward" and call.args:
            return "backward-receiver", call.args[0]
        if func.attr == "grad" and dotted(func.value).endswith("autograd"):
            out = call.args[0] if call.args else (keyword(call, "outputs").value if keyword(call, "outputs") else None)
            return ("autograd-grad", out) if out is not None else None
    elif isinstance(func, ast.Name):
        if func.id == "backward" and call.args:
            return "backward-receiver", call.args[0]
        if func.id == "grad" and call.args and len(call.args) >= 2:
            return "autograd-grad", call.args[0]
    return None


def _scaler_disabled(call: ast.Call) -> bool:
    en = keyword(call, "enabled")
    return en is not None and isinstance(en.value, ast.Constant) and en.value.value is False


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
