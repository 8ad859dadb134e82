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
* the calls that created tensors (creator records: op, shape, user line);
* and what each error family's recorder (``tracefix/families/<name>/witness.py``, loaded by path)
  keeps: the value that failed a ``backward()`` for not being a scalar, casts of trainable
  parameters to float16/bfloat16 (``Module.half/bfloat16/to/type``, ``torch.set_default_dtype``,
  parameters registered in half precision).

It never uses ``saved_tensors_hooks`` (they switch off autograd's version check), keeps no
tensor alive (ids, metadata and weak references only), and disarms itself (all hooks and
patches removed) after ``DISARM_STEPS`` successful optimizer steps or ``DISARM_BACKWARDS``
successful backward passes, when ``torch.compile`` is called, or on any internal error.
At the crash ``evidence_block(exc)`` asks the family whose ``MESSAGES`` the error's message
has to explain it from the records, and returns two lines::

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
_state = {"installed": False, "rec": None, "hooks": None, "printed": set(), "atexit": False, "families": None}


# --- the families' recorders -------------------------------------------------------------------
def _families():
    """Each registered family's ``witness.py`` (``tracefix/families/<name>/``), loaded by path.

    The family names are read from the registry's ``FAMILIES`` line with ``ast``: importing
    tracefix here is not allowed.  A family's module may define ``MESSAGES`` and
    ``explain(rec, msg, exc_frames)`` (the evidence for an error of its own), ``reset(rec)`` (its
    state on the recorder), ``arm(rec)`` (its patches, undone with the core's) and
    ``on_backward_error(rec, exc, func, args, kwargs)``."""
    if _state["families"] is not None:
        return _state["families"]
    import ast
    import importlib.util

    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "families")
    names = ()
    try:
        with open(os.path.join(folder, "__init__.py"), encoding="utf-8") as f:
            for node in ast.parse(f.read()).body:
                if (isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "FAMILIES" for t in node.targets)):
                    names = ast.literal_eval(node.value)
    except Exception:
        names = ()
    me = sys.modules.get(__name__)
    loaded = []
    for name in names:
        path = os.path.join(folder, name, "witness.py")
        if not os.path.isfile(path):
            continue
        try:
            spec = importlib.util.spec_from_file_location("tracefix_witness_%s" % name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            module.core = me
            loaded.append(module)
        except Exception:   # a broken family's recorder: the others still work
            continue
    _state["families"] = loaded
    return loaded


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
        self.modules = {}          # id(module) -> [weakref, construct frames, parent id, name]
        self.stack = []            # modules whose forward is running
        self.step = None           # the optimizer step running: {"frames", "opt"}
        self.steps = 0
        self.backwards = 0
        self.seq = 0
        self.kinds = {}            # func -> kind cache
        self.backward_fns = ()
        self.families = _families()
        self._each("reset")

    # -- arming --------------------------------------------------------------------------------
    def arm(self):
        torch = self.torch
        self.active = True
        try:
            self._arm_mode()
        except Exception:
            pass
        setups = [self._arm_modules, self._arm_optimizer]
        setups += [(lambda fam=fam: fam.arm(self)) for fam in self.families if hasattr(fam, "arm")]
        for setup in setups + [self._arm_compile, self._arm_workers]:
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
        self.writes, self.creators, self.stack = [], {}, []
        self.step = None
        self._each("reset")

    def _each(self, hook, *args):
        """Call every family's ``hook(rec, *args)`` that it has; a family's error stays its own."""
        for fam in self.families:
            fn = getattr(fam, hook, None)
            if fn is not None:
                try:
                    fn(self, *args)
                except Exception:
                    pass

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
        # The first input's record, linked now: by backward time its Python object may be gone (a
        # framework's `loss / normalize` keeps only the graph), and its id may belong to another.
        parent = self.creators.get(id(tensors[0])) if tensors else None
        parent = parent[1] if parent is not None and parent[0]() is tensors[0] else None
        detail = ""
        red = kwargs.get("reduction")
        if isinstance(red, str):
            detail = "reduction=%r" % red
        self.creators[id(result)] = (weakref.ref(result), {
            "op": getattr(func, "__name__", str(func)), "shape": list(result.shape),
            "frames": _user_frames(3, 2), "parent": parent, "detail": detail,
            # another operand with several elements (pred - target): the shape does not come from
            # the first input alone, so reducing further up cannot make the result a scalar
            "mixed": any(a.numel() != 1 for a in tensors[1:]),
            "module": _weak(self.stack[-1]) if self.stack else None})

    def _backward(self, func, args, kwargs):
        try:
            out = func(*args, **kwargs)
        except RuntimeError as exc:
            self._each("on_backward_error", exc, func, args, kwargs)
            raise
        if getattr(func, "__name__", "") == "backward":
            self.backwards += 1
            if self.backwards >= DISARM_BACKWARDS:
                # Inside this handler torch has taken the mode off its stack for the call and puts
                # it back afterwards: disarm at the next forward or step, outside any handler.
                self.active = False
                self.pending = True
        return out


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
    got = None
    for fam in rec.families:
        if any(all(part in msg for part in words) for words in getattr(fam, "MESSAGES", ())):
            got = fam.explain(rec, msg, exc_frames)
            break
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
