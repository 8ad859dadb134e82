"""fp16-unscale / bf16-unscale: the casts that made trainable parameters half precision.

Loaded by path by the witness core (``tracefix/hooks/tracefix_witness.py``), which then sets
``core`` to itself; runs in the user's process: the standard library and torch only, never tracefix.
"""
import threading

core = None     # the witness core, set by its loader

MESSAGES = (("unscale FP16 gradients",), ("BFloat16", "unscale"))


def reset(rec):
    rec.casts = []
    if not hasattr(rec, "cast_depth"):
        rec.cast_depth = 0     # inside a cast the witness made (never reset mid-cast)


def _half(rec, dtype):
    torch = rec.torch
    return dtype in (torch.float16, torch.bfloat16)


def arm(rec):
    torch = rec.torch
    M = torch.nn.Module

    def trainable_half(module):
        try:
            return {n for n, p in module.named_parameters() if p.requires_grad and _half(rec, p.dtype)}
        except Exception:
            return set()

    def wants_half(method, args, kwargs):
        if method in ("half", "bfloat16"):
            return True
        for v in list(args) + list(kwargs.values()):
            if isinstance(v, torch.dtype) and _half(rec, v):
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
                          "frames": core._user_frames(3), "args": core._short_args(args, kwargs),
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
            rec._patch(M, method, make(method))

    def make_default(original):
        def set_default_dtype(d):
            out = original(d)
            try:
                if rec.active and _half(rec, d):
                    rec.casts.append({"how": "torch.set_default_dtype(%s)" % d, "method": "set_default_dtype",
                                      "dtype": str(d).replace("torch.", ""), "params": [], "count": 0,
                                      "frames": core._user_frames(2), "args": str(d), "module": ""})
            except Exception:
                pass
            return out
        set_default_dtype.__wrapped__ = original
        return set_default_dtype

    rec._patch(torch, "set_default_dtype", make_default)
    _arm_data_setter(rec)

    import importlib

    reg = getattr(importlib.import_module("torch.nn.modules.module"),
                  "register_module_parameter_registration_hook", None)

    def param_registered(module, name, param):
        try:
            if (rec.active and param is not None and param.requires_grad and _half(rec, param.dtype)
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
                frames = core._user_frames(2)
                rec.casts.append({"how": "parameter %r of %s built as %s" % (
                    name, type(module).__name__, str(param.dtype).replace("torch.", "")),
                    "method": "parameter", "dtype": str(param.dtype).replace("torch.", ""),
                    "params": [name], "count": 1, "frames": frames, "args": "",
                    "module": type(module).__name__})
        except Exception:
            pass
        return None

    if reg is not None:
        rec.undo.append(reg(param_registered).remove)


def _arm_data_setter(rec):
    """``param.data = param.data.to(torch.float16)``: a cast no Module method sees. ``Tensor.data``
    is a C descriptor on TensorBase; a property on torch.Tensor in front of it records a trainable
    parameter's change to half, then defers to it (reads go straight through)."""
    torch = rec.torch
    T = torch.Tensor
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
                    and t.requires_grad and isinstance(value, T) and _half(rec, value.dtype)
                    and not _half(rec, t.dtype)):
                frames = core._user_frames(2)
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
    rec.undo.append(lambda: delattr(T, "data"))


def explain(rec, msg, exc_frames):
    if not rec.casts:
        return None
    want = "bfloat16" if "BFloat16" in msg or "bfloat16" in msg.lower() else "float16"
    pick = [c for c in rec.casts if c["dtype"] == want] or rec.casts
    made = [c for c in pick if not c.get("again")] or pick
    c = made[-1]
    sites = []
    if c["frames"]:
        role = "param" if c["method"] == "parameter" else "cast"
        sites.append(core._site(role, c["frames"][0], c["how"] + ((" " + c["args"]) if c["args"] else "")))
    again = [a for a in pick if a.get("again") and pick.index(a) > pick.index(c)][:3]
    for a in again:
        if a["frames"]:
            sites.append(core._site("cast", a["frames"][0], a["how"] + " again (they already were %s)" % a["dtype"]))
    for other in [o for o in made[:-1]][-3:]:
        if other["frames"]:
            sites.append(core._site("param" if other["method"] == "parameter" else "cast", other["frames"][0], other["how"]))
    n = c["count"]
    what = "%d trainable parameter%s" % (n, "" if n == 1 else "s") if n else "new parameters"
    summary = "%s became %s at %s (%s%s)" % (
        what, c["dtype"], core._where(c["frames"][0]) if c["frames"] else "?", c["how"],
        (", e.g. " + ", ".join(c["params"][:3])) if c["params"] else "")
    built = [b for b in made if b["method"] == "parameter" and b["dtype"] == c["dtype"]]
    if c["method"] == "parameter" and len(built) > 1:
        # parameters built in half one by one: count them all, not only the last one seen
        where = []
        for b in reversed(built):
            at = core._where(b["frames"][0]) if b["frames"] else "?"
            if at not in where:
                where.append(at)
        names = list(dict.fromkeys(nm for b in reversed(built) for nm in b["params"]))
        total = sum(b["count"] for b in built)
        summary = "%d trainable parameters were built as %s at %s (e.g. %s)" % (
            total, c["dtype"], ", ".join(where[:3]) + (", ..." if len(where) > 3 else ""), ", ".join(names[:3]))
    if again and again[0]["frames"]:
        summary += "; cast to %s again at %s (%s)" % (again[0]["dtype"], core._where(again[0]["frames"][0]), again[0]["how"])
    data = {"dtype": c["dtype"], "how": c["how"], "params": c["params"], "count": c["count"], "args": c["args"]}
    return "half-params", summary, sites, data
