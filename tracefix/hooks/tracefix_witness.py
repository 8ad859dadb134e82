"""tracefix's witness: records, inside the training process, what explains an autograd/AMP crash.

Self-contained (standard library and torch only; nothing of tracefix is imported), so that it can
run in any interpreter: imported as ``tracefix_witness`` when ``tracefix/hooks`` is on
``sys.path`` (``sitecustomize`` with ``TRACEFIX_WITNESS=1``), or as
``tracefix.hooks.tracefix_witness``; both names give the same module and the same state.

Public API: ``install()``, ``uninstall()``, ``armed()``, ``evidence_block(exc)``, and
``on_torch_import(callback)`` (the one-shot import hook ``sitecustomize`` shares).

While armed it records, for the main thread only:

* in-place writes: every torch function call is seen by a ``TorchFunctionMode``; a call that
  changed the ``_version`` of a tensor argument (method ``x.op_()``, ``x += y``, ``x[i] = v``,
  ``out=``, ``inplace=True``, optimizers' updates, ``copy_``/``clamp_`` under no_grad) is kept
  with its op, shape, dtype, versions, the autograd node that produced the tensor, the user
  frames, the module whose forward was running and the optimizer step running, if any;
* where each module was built (``Module.__init__``) and its name in its parent;
* the value that failed a ``backward()``/``autograd.grad()`` for not being a scalar, and the
  calls that created it (creator records: op, shape, user line);
* casts of trainable parameters to float16/bfloat16 (``Module.half/bfloat16/to/type``,
  ``torch.set_default_dtype``, parameters registered in half precision).

It never uses ``saved_tensors_hooks`` (they switch off autograd's version check), keeps no
tensor alive (ids, metadata and weak references only), and disarms itself (all hooks and
patches removed) after ``DISARM_STEPS`` successful optimizer steps or ``DISARM_BACKWARDS``
successful backward passes, when ``torch.compile`` is called, or on any internal error.
At the crash ``evidence_block(exc)`` picks the record that explains the message and returns
two lines::

    tracefix-witness: <one sentence>
    tracefix-witness-data: {"v": 1, "kind": ..., "sites": [...], ...}

which the excepthook wrappers print on stderr right after Python's own traceback.
"""
import os
import sys
import threading

_TWIN = "tracefix.hooks.tracefix_witness" if __name__ == "tracefix_witness" else "tracefix_witness"
_IS_WITNESS = True

VERSION = 1
MARK = "tracefix-witness: "
DATA_MARK = "tracefix-witness-data: "
def _env_int(name, default):
    try:
        return max(1, int(os.environ.get(name, "") or default))
    except ValueError:
        return default


# Successful optimizer steps after which the witness removes itself (most of these crashes happen
# on the first backward); TRACEFIX_WITNESS_STEPS overrides it (the benchmark measures armed steps).
DISARM_STEPS = _env_int("TRACEFIX_WITNESS_STEPS", 3)
DISARM_BACKWARDS = max(8, 2 * DISARM_STEPS + 2)   # ... or backward passes (loops without a torch optimizer)
MAX_WRITES = 4096
MAX_CREATORS = 20000
MAX_FRAMES = 4
MAX_CODE = 160
MAX_BLOCK = 3800            # one write() below PIPE_BUF: ranks' lines do not interleave inside it

_INPLACE_FN = ("dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d",
               "threshold", "relu", "hardtanh", "relu6", "elu", "selu", "celu", "leaky_relu", "rrelu",
               "hardsigmoid", "hardswish", "silu", "mish")


# --- one-shot import hook (shared with sitecustomize) ----------------------------------------
_torch_callbacks = []


def on_torch_import(callback):
    """Call ``callback(torch)`` now if torch is imported, else right after ``import torch`` ends."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "Tensor"):
        callback(torch)
        return
    _torch_callbacks.append(callback)
    if _TorchImportHook not in sys.meta_path:
        sys.meta_path.insert(0, _TorchImportHook)


def _run_callbacks(torch):
    while _torch_callbacks:
        cb = _torch_callbacks.pop(0)
        try:
            cb(torch)
        except Exception as exc:  # never break the user's `import torch`
            _say("tracefix: hook not installed: %s: %s" % (exc.__class__.__name__, exc))


class _TorchImportHook:
    """A ``sys.meta_path`` finder that only watches for ``torch``: it lets the real finder find
    it, and runs the callbacks when the module has finished executing.  One shot."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(cls)
        except ValueError:
            pass
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _run_callbacks(module)

        try:
            loader.exec_module = exec_module  # this loader instance only; __loader__ stays the real one
        except (AttributeError, TypeError):
            spec.loader = _LoaderProxy(loader, exec_module)
        return spec


class _LoaderProxy:
    def __init__(self, loader, exec_module):
        self._loader = loader
        self.exec_module = exec_module

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _say(text):
    try:
        if sys.stderr is not None:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()
    except Exception:
        pass


# --- user frames ------------------------------------------------------------------------------
_user_cache = {}
_lib_roots = None


def _library_roots():
    global _lib_roots
    if _lib_roots is None:
        import sysconfig

        roots = set()
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            try:
                p = sysconfig.get_paths().get(key)
            except Exception:
                p = None
            if p:
                roots.add(os.path.normcase(os.path.realpath(p)))
        for p in sys.path:
            if p and ("site-packages" in p or "dist-packages" in p):
                roots.add(os.path.normcase(os.path.realpath(p)))
        torch = sys.modules.get("torch")
        tfile = getattr(torch, "__file__", None)
        if tfile:
            roots.add(os.path.normcase(os.path.realpath(os.path.dirname(tfile))))
        roots.add(os.path.normcase(os.path.realpath(os.path.dirname(os.path.abspath(__file__)))))
        _lib_roots = tuple(r.rstrip(os.sep) + os.sep for r in roots)
    return _lib_roots


def _is_user(filename):
    """A file of the user's (not torch, site-packages, the stdlib or this witness)."""
    hit = _user_cache.get(filename)
    if hit is None:
        if filename.startswith("<"):
            hit = filename.startswith("<ipython-input") or filename.startswith("<stdin")
        else:
            real = os.path.normcase(os.path.realpath(filename))
            hit = not real.startswith(_library_roots()) and "site-packages" not in real \
                and "dist-packages" not in real
        _user_cache[filename] = hit
    return hit


def _user_frames(depth=2, limit=MAX_FRAMES, skip_self=None):
    """(path, line, function) of the innermost user frames, innermost first."""
    out = []
    try:
        f = sys._getframe(depth)
    except ValueError:
        return out
    while f is not None and len(out) < limit:
        code = f.f_code
        if _is_user(code.co_filename):
            if skip_self is not None and code.co_name == "__init__" and f.f_locals.get("self") is skip_self:
                f = f.f_back
                continue
            out.append((code.co_filename, f.f_lineno, code.co_name))
        f = f.f_back
    return out


def _tb_user_frames(tb, limit=MAX_FRAMES):
    out = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if _is_user(code.co_filename):
            out.append((code.co_filename, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    out.reverse()
    return out[:limit]


def _code(path, line):
    try:
        import linecache

        return linecache.getline(path, line).strip()[:MAX_CODE]
    except Exception:
        return ""


# --- the recorder -----------------------------------------------------------------------------
_state = {"installed": False, "rec": None, "hooks": None, "printed": set(), "atexit": False}


class _Recorder:
    """Everything the witness saw; armed on the thread that imported torch."""

    def __init__(self, torch):
        self.torch = torch
        self.thread = threading.get_ident()
        self.active = False
        self.pending = False       # disarm asked for inside the mode's handler: done at the next hook
        self.undo = []
        self.writes = []           # dicts, oldest first (bounded)
        self.creators = {}         # id(tensor) -> (weakref, record)
        self.casts = []
        self.nonscalar = None      # the failing backward's record
        self.modules = {}          # id(module) -> [weakref, construct frames, parent id, name]
        self.stack = []            # modules whose forward is running
        self.step = None           # the optimizer step running: {"frames", "opt"}
        self.steps = 0
        self.backwards = 0
        self.seq = 0
        self.cast_depth = 0
        self.kinds = {}            # func -> kind cache
        self.backward_fns = ()

    # -- arming --------------------------------------------------------------------------------
    def arm(self):
        torch = self.torch
        self.active = True
        try:
            self._arm_mode()
        except Exception:
            pass
        for setup in (self._arm_modules, self._arm_optimizer, self._arm_casts, self._arm_compile,
                      self._arm_workers):
            try:
                setup()
            except Exception:  # an API this torch lacks: do less
                pass
        del torch

    def disarm(self):
        self.active = False
        self.pending = False
        undo, self.undo = self.undo, []
        for fn in reversed(undo):
            try:
                fn()
            except Exception:
                pass
        self.writes, self.creators, self.casts, self.stack = [], {}, [], []
        self.nonscalar, self.step = None, None

    def _patch(self, owner, name, make):
        import functools

        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        # The wrapper takes the original's name, qualname and module: pickle (a spawned DataLoader
        # worker's target) and introspection see the same function they would without us.
        setattr(owner, name, functools.wraps(original)(make(original)))
        self.undo.append(lambda: setattr(owner, name, original))

    def _arm_mode(self):
        torch = self.torch
        from torch.overrides import TorchFunctionMode

        rec = self

        class _Witness(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if kwargs is None:
                    kwargs = {}
                if not rec.active:
                    return func(*args, **kwargs)
                return rec.observe(func, args, kwargs)

        self.backward_fns = tuple(f for f in (getattr(torch.Tensor, "backward", None),
                                              getattr(torch.autograd, "backward", None),
                                              getattr(torch.autograd, "grad", None)) if f is not None)
        self.Tensor = torch.Tensor
        self.Parameter = torch.nn.Parameter
        mode = _Witness()
        mode.__enter__()

        def pop():
            try:
                n = torch._C._len_torch_function_stack()
                top = torch._C._get_function_stack_at(n - 1) if n else None
            except AttributeError:   # an older torch without these: nothing else pushed a mode on ours
                top = mode
            except Exception:
                top = None
            if top is mode:          # (another mode on top of ours: ours stays, inactive, a pass-through)
                try:
                    mode.__exit__(None, None, None)
                except Exception:
                    pass

        self.undo.append(pop)

    def _kind(self, func):
        try:
            k = self.kinds.get(func)
        except TypeError:
            return 0
        if k is None:
            name = getattr(func, "__name__", "") or ""
            if func in self.backward_fns:
                k = 3
            elif name == "__setitem__" or (name.startswith("__i") and name.endswith("__")) or \
                    (name.endswith("_") and not name.endswith("__")):
                k = 1          # writes its first argument(s)
            elif name in _INPLACE_FN:
                k = 2          # writes its first argument when inplace
            else:
                k = 0
            self.kinds[func] = k
        return k

    def observe(self, func, args, kwargs):
        """Run ``func`` exactly as asked; note what it wrote or created."""
        k = self._kind(func)
        if k == 3:
            return self._backward(func, args, kwargs)
        Tensor = self.Tensor
        watched = None
        if k or "out" in kwargs:
            watched = []
            try:
                for a in (args[:1] if k else ()) + tuple(v for key, v in kwargs.items() if key == "out"):
                    if isinstance(a, Tensor):
                        watched.append((a, a._version))
                    elif isinstance(a, (list, tuple)):
                        watched.extend((t, t._version) for t in a if isinstance(t, Tensor))
            except Exception:      # inference tensors have no version counter: nothing to watch
                watched = None
        # tracefix witness: the call itself, unchanged
        result = func(*args, **kwargs)
        try:
            if watched:
                for t, v0 in watched:
                    if t._version != v0:
                        self._write(func, t, v0)
            elif type(result) is Tensor or type(result) is self.Parameter:
                if result.requires_grad and result.grad_fn is not None:
                    self._creator(func, result, args, kwargs)
        except Exception:
            pass
        return result

    def _write(self, func, t, v0):
        if len(self.writes) >= MAX_WRITES:
            del self.writes[:MAX_WRITES // 2]
        prev = ""
        try:
            fn = t.grad_fn
            if fn is not None:
                nxt = fn.next_functions
                if nxt and nxt[0][0] is not None:
                    prev = nxt[0][0].name()
        except Exception:
            pass
        mod = self.stack[-1] if self.stack else None
        self.seq += 1
        self.writes.append({
            "seq": self.seq, "op": getattr(func, "__name__", str(func)), "shape": list(t.shape),
            "dtype": str(t.dtype).replace("torch.", ""), "v0": v0, "v1": t._version,
            "param": isinstance(t, self.Parameter), "leaf": bool(t.is_leaf),
            "requires_grad": bool(t.requires_grad), "prev": prev, "frames": _user_frames(3),
            "module": _weak(mod), "step": self.step, "backwards": self.backwards,
            "no_grad": not self.torch.is_grad_enabled(), "tid": id(t),
        })

    def _creator(self, func, result, args, kwargs):
        import weakref

        if len(self.creators) >= MAX_CREATORS:
            self.creators = {k: v for k, v in self.creators.items() if v[0]() is not None}
            if len(self.creators) >= MAX_CREATORS:
                self.creators.clear()
        Tensor = self.Tensor
        tensors = [a for a in args if isinstance(a, Tensor)]
        inputs = tuple(id(a) for a in tensors)
        detail = ""
        red = kwargs.get("reduction")
        if isinstance(red, str):
            detail = "reduction=%r" % red
        self.creators[id(result)] = (weakref.ref(result), {
            "op": getattr(func, "__name__", str(func)), "shape": list(result.shape),
            "frames": _user_frames(3, 2), "inputs": inputs, "detail": detail,
            # another operand with several elements (pred - target): the shape does not come from
            # the first input alone, so reducing further up cannot make the result a scalar
            "mixed": any(a.numel() != 1 for a in tensors[1:]),
            "module": _weak(self.stack[-1]) if self.stack else None})

    def _backward(self, func, args, kwargs):
        try:
            out = func(*args, **kwargs)
        except RuntimeError as exc:
            try:
                if "only for scalar outputs" in str(exc):
                    self._nonscalar(func, args, kwargs)
            except Exception:
                pass
            raise
        if getattr(func, "__name__", "") == "backward":
            self.backwards += 1
            if self.backwards >= DISARM_BACKWARDS:
                # Inside this handler torch has taken the mode off its stack for the call and puts
                # it back afterwards: disarm at the next forward or step, outside any handler.
                self.active = False
                self.pending = True
        return out

    def _nonscalar(self, func, args, kwargs):
        Tensor = self.Tensor
        cand = []
        first = args[0] if args else kwargs.get("outputs", kwargs.get("tensors"))
        for t in (first if isinstance(first, (list, tuple)) else (first,)):
            if isinstance(t, Tensor) and t.numel() != 1 and t.requires_grad:
                cand.append(t)
        if not cand:
            return
        t = cand[0]
        chain = []
        seen = set()
        cur = t
        key = id(cur)
        while key is not None and key not in seen and len(chain) < 6:
            seen.add(key)
            entry = self.creators.get(key)
            if entry is None or (len(chain) == 0 and entry[0]() is not cur) or entry[0]() is None:
                break          # (a dead tensor's id may have been reused: stop there)
            rec = entry[1]
            chain.append(rec)
            key = rec["inputs"][0] if rec["inputs"] else None
        nodes = []
        try:
            fn = t.grad_fn
            while fn is not None and len(nodes) < 6:
                nodes.append(fn.name())
                nxt = [n for n, _ in fn.next_functions if n is not None]
                fn = nxt[0] if nxt else None
        except Exception:
            pass
        self.nonscalar = {"op": getattr(func, "__name__", ""), "shape": list(t.shape),
                          "dtype": str(t.dtype).replace("torch.", ""), "chain": chain, "nodes": nodes,
                          "frames": _user_frames(4)}

    # -- modules -------------------------------------------------------------------------------
    def _arm_modules(self):
        import weakref

        torch = self.torch
        import importlib

        M = torch.nn.Module
        mm = importlib.import_module("torch.nn.modules.module")
        rec = self
        main = self.thread

        def make_init(original):
            def __init__(module, *args, **kwargs):
                original(module, *args, **kwargs)
                if rec.active and threading.get_ident() == main:
                    try:
                        key = id(module)
                        ref = weakref.ref(module, lambda _r, key=key: rec.modules.pop(key, None))
                        info = rec.modules.get(key)
                        frames = _user_frames(2, 2, skip_self=module)
                        if info is None:
                            rec.modules[key] = [ref, frames, None, ""]
                        else:
                            info[0], info[1] = ref, frames
                    except Exception:
                        pass
            __init__.__wrapped__ = original
            return __init__

        self._patch(M, "__init__", make_init)

        def registered(parent, name, sub):
            if sub is None or not rec.active:
                return None
            info = rec.modules.get(id(sub))
            if info is None:
                info = rec.modules[id(sub)] = [weakref.ref(sub), [], None, ""]
            if info[2] is None:      # the first parent names it (a shared module keeps its first name)
                info[2], info[3] = id(parent), name
            return None

        reg = getattr(mm, "register_module_module_registration_hook", None)
        if reg is not None:
            self.undo.append(reg(registered).remove)

        def pre(module, _inputs):
            if threading.get_ident() == main:
                if rec.pending:
                    rec.disarm()
                else:
                    rec.stack.append(module)
            return None

        def post(module, _inputs, _output):
            if threading.get_ident() == main:
                stack = rec.stack
                while stack:
                    if stack.pop() is module:
                        break
            return None

        self.undo.append(mm.register_module_forward_pre_hook(pre).remove)
        self.undo.append(mm.register_module_forward_hook(post).remove)

    def describe_module(self, module):
        """(qualified name, class, inplace, construct frames) of a module."""
        if module is None:
            return None
        cls = type(module)
        name_parts = []
        key = id(module)
        seen = set()
        frames = []
        while key is not None and key not in seen:
            seen.add(key)
            info = self.modules.get(key)
            if info is None:
                break
            if not frames and key == id(module):
                frames = info[1]
            if info[2] is None:
                break
            name_parts.append(info[3])
            key = info[2]
        qual = ".".join(reversed(name_parts))
        inplace = getattr(module, "inplace", None)
        torch_cls = cls.__module__.startswith("torch.nn")
        desc = ("nn." if torch_cls else "") + cls.__name__
        reduction = getattr(module, "reduction", None)
        if inplace is True:
            desc += "(inplace=True)"
        elif isinstance(reduction, str) and reduction != "mean":
            desc += "(reduction=%r)" % reduction
        return {"name": qual, "class": cls.__name__, "desc": desc, "inplace": inplace,
                "reduction": reduction if isinstance(reduction, str) else None,
                "torch": torch_cls, "frames": frames}

    # -- optimizer -----------------------------------------------------------------------------
    def _arm_optimizer(self):
        import importlib

        om = importlib.import_module("torch.optim.optimizer")
        rec = self
        main = self.thread

        def pre(opt, _args, _kwargs):
            if threading.get_ident() == main:
                if rec.pending:
                    rec.disarm()
                else:
                    rec.step = {"frames": _user_frames(2), "opt": type(opt).__name__}
            return None

        def post(_opt, _args, _kwargs):
            if threading.get_ident() != main:
                return None
            rec.step = None
            rec.steps += 1
            if rec.steps >= DISARM_STEPS:
                rec.disarm()
            return None

        self.undo.append(om.register_optimizer_step_pre_hook(pre).remove)
        self.undo.append(om.register_optimizer_step_post_hook(post).remove)

    # -- casts ---------------------------------------------------------------------------------
    def _half(self, dtype):
        torch = self.torch
        return dtype in (torch.float16, torch.bfloat16)

    def _arm_casts(self):
        torch = self.torch
        M = torch.nn.Module
        rec = self

        def trainable_half(module):
            try:
                return {n for n, p in module.named_parameters() if p.requires_grad and rec._half(p.dtype)}
            except Exception:
                return set()

        def wants_half(method, args, kwargs):
            if method in ("half", "bfloat16"):
                return True
            for v in list(args) + list(kwargs.values()):
                if isinstance(v, torch.dtype) and rec._half(v):
                    return True
                if isinstance(v, str) and ("Half" in v or "BFloat16" in v):
                    return True
            return False

        def record(module, method, names, args, kwargs, again):
            dtype = ""
            for n, p in module.named_parameters():
                if n == names[0]:
                    dtype = str(p.dtype).replace("torch.", "")
            rec.casts.append({"how": "%s.%s()" % (type(module).__name__, method), "method": method,
                              "dtype": dtype, "params": names[:8], "count": len(names),
                              "frames": _user_frames(3), "args": _short_args(args, kwargs),
                              "module": type(module).__name__, "again": again})

        def make(method):
            def wrap(original):
                def cast(module, *args, **kwargs):
                    if not rec.active or rec.cast_depth or threading.get_ident() != rec.thread:
                        return original(module, *args, **kwargs)
                    before = trainable_half(module)
                    rec.cast_depth += 1
                    try:
                        out = original(module, *args, **kwargs)
                    finally:
                        rec.cast_depth -= 1
                    try:
                        after = trainable_half(module)
                        new = sorted(after - before)
                        kept = sorted(after & before)
                        if new:
                            record(module, method, new, args, kwargs, again=False)
                        elif kept and wants_half(method, args, kwargs):
                            # a cast to half of what already is: invisible in the dtypes, yet it
                            # alone would keep them half once the first cast is gone
                            record(module, method, kept, args, kwargs, again=True)
                    except Exception:
                        pass
                    return out
                cast.__wrapped__ = original
                return cast
            return wrap

        for method in ("half", "bfloat16", "to", "type"):
            if method in M.__dict__:
                self._patch(M, method, make(method))

        def make_default(original):
            def set_default_dtype(d):
                out = original(d)
                try:
                    if rec.active and rec._half(d):
                        rec.casts.append({"how": "torch.set_default_dtype(%s)" % d, "method": "set_default_dtype",
                                          "dtype": str(d).replace("torch.", ""), "params": [], "count": 0,
                                          "frames": _user_frames(2), "args": str(d), "module": ""})
                except Exception:
                    pass
                return out
            set_default_dtype.__wrapped__ = original
            return set_default_dtype

        self._patch(torch, "set_default_dtype", make_default)
        self._arm_data_setter()

        import importlib

        reg = getattr(importlib.import_module("torch.nn.modules.module"),
                      "register_module_parameter_registration_hook", None)

        def param_registered(module, name, param):
            try:
                if (rec.active and param is not None and param.requires_grad and rec._half(param.dtype)
                        and threading.get_ident() == rec.thread):
                    if torch.get_default_dtype() == param.dtype:
                        # built under a half default dtype: that set_default_dtype call decided it
                        last = [c for c in rec.casts if c["method"] == "set_default_dtype"]
                        if last:
                            c = last[-1]
                            c["count"] += 1
                            if len(c["params"]) < 8:
                                c["params"].append("%s.%s" % (type(module).__name__, name))
                            rec.casts.remove(c)
                            rec.casts.append(c)
                            return None
                    frames = _user_frames(2)
                    rec.casts.append({"how": "parameter %r of %s built as %s" % (
                        name, type(module).__name__, str(param.dtype).replace("torch.", "")),
                        "method": "parameter", "dtype": str(param.dtype).replace("torch.", ""),
                        "params": [name], "count": 1, "frames": frames, "args": "",
                        "module": type(module).__name__})
            except Exception:
                pass
            return None

        if reg is not None:
            self.undo.append(reg(param_registered).remove)

    def _arm_data_setter(self):
        """``param.data = param.data.to(torch.float16)``: a cast no Module method sees. ``Tensor.data``
        is a C descriptor on TensorBase; a property on torch.Tensor in front of it records a trainable
        parameter's change to half, then defers to it (reads go straight through)."""
        torch = self.torch
        T, rec = torch.Tensor, self
        base = getattr(torch._C, "TensorBase", None) or getattr(torch._C, "_TensorBase", None)
        desc = base.__dict__.get("data") if base is not None else None
        if "data" in T.__dict__ or desc is None or not hasattr(desc, "__set__"):
            return

        def get(t):
            return desc.__get__(t, type(t))

        def set_(t, value):
            # a Parameter's __torch_function__ re-enters through T.data.__set__: count the first only
            if rec.cast_depth:
                return desc.__set__(t, value)
            try:
                if (rec.active and threading.get_ident() == rec.thread and isinstance(t, torch.nn.Parameter)
                        and t.requires_grad and isinstance(value, T) and rec._half(value.dtype)
                        and not rec._half(t.dtype)):
                    frames = _user_frames(2)
                    dtype = str(value.dtype).replace("torch.", "")
                    last = rec.casts[-1] if rec.casts else None
                    if last and last["method"] == "data" and last["frames"][:1] == frames[:1] and last["dtype"] == dtype:
                        last["count"] += 1          # the same line in a loop over parameters
                    else:
                        rec.casts.append({"how": "param.data = <%s tensor>" % dtype, "method": "data",
                                          "dtype": dtype, "params": [], "count": 1, "frames": frames,
                                          "args": "", "module": ""})
            except Exception:
                pass
            rec.cast_depth += 1
            try:
                desc.__set__(t, value)
            finally:
                rec.cast_depth -= 1

        T.data = property(get, set_, doc=desc.__doc__)
        self.undo.append(lambda: delattr(T, "data"))

    def _arm_workers(self):
        """DataLoader worker processes (forked with the witness armed, or spawned and armed by
        sitecustomize) load data and never step: the witness leaves them as their loop starts."""
        import importlib

        worker = importlib.import_module("torch.utils.data._utils.worker")

        def make(original):
            def _worker_loop(*args, **kwargs):
                rec = _state["rec"]
                if rec is not None:
                    rec.disarm()
                return original(*args, **kwargs)
            _worker_loop.__wrapped__ = original
            return _worker_loop

        self._patch(worker, "_worker_loop", make)

    def _arm_compile(self):
        torch = self.torch
        rec = self
        if not hasattr(torch, "compile"):
            return

        def make(original):
            def compile(*args, **kwargs):
                rec.disarm()       # compiled regions are not ours to watch
                return original(*args, **kwargs)
            compile.__wrapped__ = original
            return compile

        self._patch(torch, "compile", make)


def _weak(obj):
    """A weak reference (a module holds tensors: the records must not keep it alive)."""
    import weakref

    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: None


def _short_args(args, kwargs):
    parts = [repr(a) for a in args] + ["%s=%r" % kv for kv in kwargs.items()]
    text = ", ".join(parts)
    return text[:MAX_CODE]


# --- explaining a crash -----------------------------------------------------------------------
def _site(role, frame, detail="", module=""):
    path, line, _func = frame
    return {"role": role, "path": path, "line": int(line), "code": _code(path, line), "detail": detail[:MAX_CODE],
            "module": module}


def _base(path):
    return os.path.basename(path) if path else "?"


def _where(frame):
    return "%s:%d" % (_base(frame[0]), frame[1])


def _parse_inplace(msg):
    import re

    out = {}
    m = re.search(r"\[torch\.(?:cuda\.)?(\w+)Tensor \[([\d, ]*)\]\]", msg)
    if m:
        out["dtype"] = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16",
                        "Long": "int64", "Int": "int32", "Bool": "bool"}.get(m.group(1), m.group(1).lower())
        out["shape"] = [int(x) for x in m.group(2).replace(" ", "").split(",") if x]
    m = re.search(r"output (\d+) of (\w+)", msg)
    if m:
        out["output"] = int(m.group(1))
        out["node"] = m.group(2)
    m = re.search(r"is at version (\d+); expected version (\d+)", msg)
    if m:
        out["now"], out["expected"] = int(m.group(1)), int(m.group(2))
    return out


def _node_op(node):
    import re

    return re.sub(r"Backward\d*$", "", node or "").lower()


def _var_name(code, op):
    """The written variable as the user's line names it: ``h.mul_(..)``, ``h += ..``, ``h[i] = ..``."""
    import re

    if not code:
        return ""
    for rx in (r"([A-Za-z_][\w.]*)\s*\.\s*%s\s*\(" % re.escape(op) if op.endswith("_") else None,
               r"^([A-Za-z_][\w.]*)\s*(?:\+|-|\*|/|//|%|\*\*|@|&|\||\^|<<|>>)=",
               r"^([A-Za-z_][\w.]*)\s*\[.*\]\s*=[^=]"):
        if rx:
            m = re.search(rx, code)
            if m:
                return m.group(1)
    return ""


_VIEW_OPS = {"asstrided", "t", "transpose", "permute", "view", "expand", "unsqueeze", "squeeze", "select",
             "slice", "unsafeview", "reshapealias"}


def _explain_inplace(rec, msg, exc_frames):
    want = _parse_inplace(msg)
    best, best_score = None, 0
    for w in rec.writes:
        score = 0
        if "expected" in want:
            if w["v0"] == want["expected"]:
                score += 4
            elif want["expected"] <= w["v0"] < want.get("now", w["v0"] + 1):
                score += 1
            else:
                continue
        if want.get("shape") is not None:
            if w["shape"] == want["shape"]:
                score += 3
            elif sorted(w["shape"]) == sorted(want["shape"]):
                score += 2     # autograd saved a transposed view (a Linear weight is saved as weight.t())
            else:
                score -= 2
        if want.get("dtype") and w["dtype"] == want["dtype"]:
            score += 1
        if want.get("node"):
            if _node_op(w["prev"]) == _node_op(want["node"]):
                score += 3
            elif w["prev"]:
                score -= 1
            if w["param"] and _node_op(want["node"]) in _VIEW_OPS:
                score += 2     # a view autograd saved of a weight; an optimizer's state of that shape is not one
        elif w["leaf"] and (w["param"] or w["requires_grad"]):
            score += 1
        if score > 0 and score >= best_score:   # ties: the latest write
            best, best_score = w, score
    if best is None:
        return None
    w = best
    frames = w["frames"]
    mod = rec.describe_module(w["module"]() if w["module"] is not None else None)
    sites = []
    data = {"tensor": {"shape": w["shape"], "dtype": w["dtype"], "version": [w["v0"], w["v1"]],
                       "node": want.get("node") or w["prev"], "param": w["param"], "leaf": w["leaf"]},
            "op": w["op"], "no_grad": w["no_grad"]}
    backward = [_site("backward", exc_frames[0], "the backward that needed the old value")] if exc_frames else []
    shape = "[%s]" % ", ".join(map(str, w["shape"]))
    if w["leaf"] and (w["param"] or w["requires_grad"]):
        # A parameter changed between the forward that saved it and the backward.  (A detached
        # alias or a buffer is a leaf too, but it is written like any activation: below.)
        kind = "param-update"
        step = w["step"]
        pname = _param_name(rec, w)
        if pname:
            data["param_name"] = pname
        by_frames = step["frames"] if step is not None else frames
        if step is not None:
            data["optimizer"] = step["opt"]
            how = "%s.step()" % step["opt"]
            role, detail = "step", "%s.step() updated the parameter in place" % step["opt"]
        else:
            how = w["op"]
            role, detail = "write", "%s: version %d -> %d%s" % (w["op"], w["v0"], w["v1"],
                                                               " under no_grad" if w["no_grad"] else "")
        if by_frames:
            sites.append(_site(role, by_frames[0], detail))
            for outer in by_frames[1:3]:     # the user's calls that led there, innermost first
                sites.append(_site("caller", outer, "called from here"))
        sites += backward
        where = ""
        if by_frames:
            where = " at " + _where(by_frames[0])
            if len(by_frames) > 1:
                where += " (called from %s)" % _where(by_frames[1])
        summary = "parameter %s%s was changed in place by %s%s between the forward that saved it and " \
                  "the backward%s" % ((pname + " ") if pname else "", shape, how, where,
                                      (" at " + _where(exc_frames[0])) if exc_frames else "")
    else:
        kind = "inplace-write"
        op = w["op"]
        if frames:
            sites.append(_site("write", frames[0], "%s: version %d -> %d" % (op, w["v0"], w["v1"]),
                               mod["name"] if mod else ""))
        name = _var_name(sites[0]["code"], op) if sites else ""
        what = ("'%s' " % name if name else "") + shape
        node = want.get("node") or w["prev"]
        if node:
            what += " (output of %s)" % _node_op(node)
        summary = "%s was changed in place by %s" % (what, op)
        if mod is not None and (mod["torch"] or not frames or mod["inplace"]):
            built = mod["frames"][0] if mod["frames"] else None
            if built is not None:
                sites.insert(0, _site("construct", built, "%s built here" % mod["desc"], mod["name"]))
            summary += " in %s (%s%s)" % (mod["name"] or mod["class"], mod["desc"],
                                          (", built at " + _where(built)) if built else "")
        elif frames:
            summary += " at %s" % _where(frames[0])
            if mod is not None:
                summary += " in %s (%s)" % (mod["name"] or mod["class"], mod["desc"])
        if mod is not None:
            data["module"] = {"name": mod["name"], "class": mod["class"], "inplace": mod["inplace"]}
        if name:
            data["tensor"]["name"] = name
        sites += backward
    return kind, summary, sites, data


def _param_name(rec, w):
    """``disc.0.weight`` for a written parameter, from the modules the witness saw built."""
    for key, info in list(rec.modules.items()):
        module = info[0]()
        if module is None:
            continue
        for name, p in getattr(module, "_parameters", {}).items():
            if p is not None and id(p) == w["tid"]:
                desc = rec.describe_module(module)
                return ((desc["name"] + ".") if desc and desc["name"] else "") + name
    return ""


def _explain_nonscalar(rec, msg, exc_frames):
    ns = rec.nonscalar
    if ns is None:
        return None
    shape = "[%s]" % ", ".join(map(str, ns["shape"]))
    sites = []
    where = exc_frames[0] if exc_frames else (ns["frames"][0] if ns["frames"] else None)
    creator_txt = ""
    mixed = False
    for c in ns["chain"]:
        if mixed:
            break        # the ops further up made only one of that op's operands
        mixed = c.get("mixed", False)
        if not c["frames"]:
            continue
        fr = c["frames"][0]
        detail = "%s -> [%s]%s" % (c["op"], ", ".join(map(str, c["shape"])), (" " + c["detail"]) if c["detail"] else "")
        mod = rec.describe_module(c["module"]() if c["module"] is not None else None)
        if where is not None and (fr[0], fr[1]) == (where[0], where[1]) and not sites and len(ns["chain"]) > 1:
            continue     # e.g. scaler.scale(loss) on the backward line: look further back
        if any((s["path"], s["line"]) == (fr[0], fr[1]) for s in sites):
            continue     # several ops of one line: the outermost names it
        sites.append(_site("creator", fr, detail, mod["name"] if mod else ""))
        if not creator_txt:
            creator_txt = " made by %s%s at %s" % (c["op"], ("(%s)" % c["detail"]) if c["detail"] else "", _where(fr))
            if mod is not None and mod["frames"] and mod["torch"] and mod["reduction"] is not None:  # a loss module
                built = mod["frames"][0]
                construct = _site("construct", built, "%s built here" % mod["desc"], mod["name"])
                if mod["reduction"] == "none":      # the construction decided it: that site first
                    sites.insert(len(sites) - 1, construct)
                else:
                    sites.append(construct)
                creator_txt += " (%s, built at %s)" % (mod["desc"], _where(built))
        if len(sites) >= 4:
            break
    if where is not None:
        call = _site("backward", where, "%s() on a non-scalar" % ns["op"])
        if ns["op"] == "grad":   # autograd.grad of a non-scalar: grad_outputs belongs at this call
            sites.insert(0, call)
        else:
            sites.append(call)
    summary = "the value passed to %s()%s has shape %s (%s), not a scalar%s" % (
        ns["op"], (" at " + _where(where)) if where else "", shape, ns["dtype"],
        ("; it was" + creator_txt) if creator_txt else "")
    data = {"tensor": {"shape": ns["shape"], "dtype": ns["dtype"]}, "nodes": ns["nodes"],
            "chain": [{"op": c["op"], "shape": c["shape"], "detail": c["detail"]} for c in ns["chain"]]}
    return "nonscalar-loss", summary, sites, data


def _explain_cast(rec, msg):
    if not rec.casts:
        return None
    want = "bfloat16" if "BFloat16" in msg or "bfloat16" in msg.lower() else "float16"
    pick = [c for c in rec.casts if c["dtype"] == want] or rec.casts
    made = [c for c in pick if not c.get("again")] or pick
    c = made[-1]
    sites = []
    if c["frames"]:
        role = "param" if c["method"] == "parameter" else "cast"
        sites.append(_site(role, c["frames"][0], c["how"] + ((" " + c["args"]) if c["args"] else "")))
    again = [a for a in pick if a.get("again") and pick.index(a) > pick.index(c)][:3]
    for a in again:
        if a["frames"]:
            sites.append(_site("cast", a["frames"][0], a["how"] + " again (they already were %s)" % a["dtype"]))
    for other in [o for o in made[:-1]][-3:]:
        if other["frames"]:
            sites.append(_site("param" if other["method"] == "parameter" else "cast", other["frames"][0], other["how"]))
    n = c["count"]
    what = "%d trainable parameter%s" % (n, "" if n == 1 else "s") if n else "new parameters"
    summary = "%s became %s at %s (%s%s)" % (
        what, c["dtype"], _where(c["frames"][0]) if c["frames"] else "?", c["how"],
        (", e.g. " + ", ".join(c["params"][:3])) if c["params"] else "")
    built = [b for b in made if b["method"] == "parameter" and b["dtype"] == c["dtype"]]
    if c["method"] == "parameter" and len(built) > 1:
        # parameters built in half one by one: count them all, not only the last one seen
        where = []
        for b in reversed(built):
            at = _where(b["frames"][0]) if b["frames"] else "?"
            if at not in where:
                where.append(at)
        names = list(dict.fromkeys(nm for b in reversed(built) for nm in b["params"]))
        total = sum(b["count"] for b in built)
        summary = "%d trainable parameters were built as %s at %s (e.g. %s)" % (
            total, c["dtype"], ", ".join(where[:3]) + (", ..." if len(where) > 3 else ""), ", ".join(names[:3]))
    if again and again[0]["frames"]:
        summary += "; cast to %s again at %s (%s)" % (again[0]["dtype"], _where(again[0]["frames"][0]), again[0]["how"])
    data = {"dtype": c["dtype"], "how": c["how"], "params": c["params"], "count": c["count"], "args": c["args"]}
    return "half-params", summary, sites, data


def evidence_block(exc):
    """The marked evidence lines for ``exc`` ('' when the witness has nothing for it)."""
    try:
        return _evidence_block(exc)
    except Exception:
        return ""


def _evidence_block(exc):
    rec = _state["rec"]
    if rec is None or exc is None:
        return ""
    msg = str(exc)
    exc_frames = _tb_user_frames(getattr(exc, "__traceback__", None))
    if "modified by an inplace operation" in msg:
        got = _explain_inplace(rec, msg, exc_frames)
    elif "only for scalar outputs" in msg:
        got = _explain_nonscalar(rec, msg, exc_frames)
    elif "unscale FP16 gradients" in msg or ("BFloat16" in msg and "unscale" in msg):
        got = _explain_cast(rec, msg)
    else:
        got = None
    if not got:
        return ""
    kind, summary, sites, data = got
    import json

    payload = {"v": VERSION, "kind": kind, "exc": type(exc).__name__, "msg": msg.split("\n", 1)[0][:200],
               "summary": summary, "sites": sites[:8], "pid": os.getpid()}
    if os.environ.get("RANK", "").isdigit():
        payload["rank"] = int(os.environ["RANK"])
    payload.update(data)
    line = json.dumps(payload, separators=(",", ":"), ensure_ascii=True, default=str)
    while len(line) > MAX_BLOCK and payload["sites"]:
        payload["sites"] = payload["sites"][:-1]
        line = json.dumps(payload, separators=(",", ":"), ensure_ascii=True, default=str)
    summary = summary.replace("\n", " ")[:600]
    return "%s%s\n%s%s\n" % (MARK, summary, DATA_MARK, line)


# --- printing at the crash -----------------------------------------------------------------------
def _print_block(exc, block=None):
    if exc is None or id(exc) in _state["printed"]:
        return
    _state["printed"].add(id(exc))
    if block is None:
        block = evidence_block(exc)
    if not block:
        return
    try:
        err = sys.stderr
        if err is None:
            return
        err.flush()
        err.write(block)
        err.flush()
    except Exception:
        pass


def _strip_own_frames(exc, tb):
    """The traceback without the witness's own frames (its mode handler sits between the user's
    call and torch's), so that the printed traceback reads exactly as without the witness."""
    own = os.path.normcase(os.path.abspath(__file__))
    if own.endswith((".pyc", ".pyo")):
        own = own[:-1]

    def dispatch(t):      # torch's handle_torch_function, which called the mode
        code = t.tb_frame.f_code
        return code.co_name == "handle_torch_function" and code.co_filename.replace("\\", "/").endswith(
            "torch/overrides.py")

    def strip(t):
        kept = []
        while t is not None:
            nxt = t.tb_next
            if os.path.normcase(t.tb_frame.f_code.co_filename) == own or dispatch(t):
                pass
            elif nxt is not None and dispatch(nxt) and not _is_user(t.tb_frame.f_code.co_filename):
                pass          # the torch function that handed the call to the mode: it runs again below
            else:
                kept.append(t)
            t = nxt
        for a, b in zip(kept, kept[1:] + [None]):
            a.tb_next = b
        return kept[0] if kept else None

    try:
        seen = set()
        e = exc
        while e is not None and id(e) not in seen:
            seen.add(id(e))
            if e.__traceback__ is not None:
                e.__traceback__ = strip(e.__traceback__)
            e = e.__cause__ or e.__context__
        return exc.__traceback__ if exc is not None and tb is not None else tb
    except Exception:
        return tb


def _excepthook_wrapper(previous):
    def excepthook(etype, value, tb):
        block = evidence_block(value)       # before anything else runs
        try:
            previous(etype, value, _strip_own_frames(value, tb))
        finally:
            _print_block(value, block)
    excepthook._tracefix_previous = previous
    return excepthook


def _thread_excepthook_wrapper(previous):
    def excepthook(args):
        value = getattr(args, "exc_value", None)
        block = evidence_block(value)
        try:
            _strip_own_frames(value, getattr(args, "exc_traceback", None))
            previous(args)
        finally:
            _print_block(value, block)
    excepthook._tracefix_previous = previous
    return excepthook


def _at_exit():
    # A hook installed after ours replaced sys.excepthook: Python still left the exception here.
    if not _state["installed"]:
        return
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if exc is not None:
        _print_block(exc)


# --- public API -----------------------------------------------------------------------------------
def _arm(torch):
    if not _state["installed"] or _state["rec"] is not None:
        return
    if threading.current_thread() is not threading.main_thread():
        return           # imported torch in a worker thread: stay out of the way
    rec = _Recorder(torch)
    _state["rec"] = rec
    rec.arm()


def install():
    """Arm the witness: now if torch is imported, else when it is; print evidence at a crash."""
    if _state["installed"]:
        return
    _state["installed"] = True
    hooks = {"excepthook": sys.excepthook}
    sys.excepthook = _excepthook_wrapper(sys.excepthook)
    if hasattr(threading, "excepthook"):
        hooks["thread"] = threading.excepthook
        threading.excepthook = _thread_excepthook_wrapper(threading.excepthook)
    _state["hooks"] = hooks
    if not _state["atexit"]:
        import atexit

        atexit.register(_at_exit)
        _state["atexit"] = True
    on_torch_import(_arm)


def uninstall():
    """Remove every hook and patch the witness installed (recorders, excepthooks, import hook)."""
    if not _state["installed"]:
        return
    _state["installed"] = False
    try:
        _torch_callbacks.remove(_arm)
    except ValueError:
        pass
    if not _torch_callbacks:
        try:
            sys.meta_path.remove(_TorchImportHook)
        except ValueError:
            pass
    rec, _state["rec"] = _state["rec"], None
    if rec is not None:
        rec.disarm()
    hooks = _state["hooks"] or {}
    if getattr(sys.excepthook, "_tracefix_previous", None) is not None and "excepthook" in hooks:
        sys.excepthook = hooks["excepthook"]
    if "thread" in hooks and getattr(threading.excepthook, "_tracefix_previous", None) is not None:
        threading.excepthook = hooks["thread"]
    _state["hooks"] = None


def armed():
    """Whether the recorders are running now."""
    rec = _state["rec"]
    return bool(rec is not None and rec.active)


# One witness per process, whichever of its two names was imported first.
_twin = sys.modules.get(_TWIN)
if _twin is not None and getattr(_twin, "_IS_WITNESS", False) and _twin is not sys.modules.get(__name__):
    sys.modules[__name__] = _twin
