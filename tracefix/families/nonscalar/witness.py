"""nonscalar-backward: the non-scalar tensor a failing backward() got, and the ops that made it.

Loaded by path by the witness core (``tracefix/hooks/tracefix_witness.py``), which then sets
``core`` to itself; runs in the user's process: the standard library and torch only, never tracefix.
"""
core = None     # the witness core, set by its loader

MESSAGES = (("only for scalar outputs",),)


def reset(rec):
    rec.nonscalar = None      # the failing backward's record


def on_backward_error(rec, exc, func, args, kwargs):
    """A backward that failed for a non-scalar: record the tensor and the ops that made it."""
    if "only for scalar outputs" in str(exc):
        _nonscalar(rec, func, args, kwargs)


def _nonscalar(rec, func, args, kwargs):
    Tensor = rec.Tensor
    cand = []
    first = args[0] if args else kwargs.get("outputs", kwargs.get("tensors"))
    for t in (first if isinstance(first, (list, tuple)) else (first,)):
        if isinstance(t, Tensor) and t.numel() != 1 and t.requires_grad:
            cand.append(t)
    if not cand:
        return
    t = cand[0]
    chain = []
    entry = rec.creators.get(id(t))
    made = entry[1] if entry is not None and entry[0]() is t else None
    while made is not None and len(chain) < 6:
        chain.append(made)
        made = made["parent"]
    nodes = []
    try:
        fn = t.grad_fn
        while fn is not None and len(nodes) < 6:
            nodes.append(fn.name())
            nxt = [n for n, _ in fn.next_functions if n is not None]
            fn = nxt[0] if nxt else None
    except Exception:
        pass
    rec.nonscalar = {"op": getattr(func, "__name__", ""), "shape": list(t.shape),
                      "dtype": str(t.dtype).replace("torch.", ""), "chain": chain, "nodes": nodes,
                      "frames": core._user_frames(4)}


def explain(rec, msg, exc_frames):
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
        sites.append(core._site("creator", fr, detail, mod["name"] if mod else ""))
        if not creator_txt:
            creator_txt = " made by %s%s at %s" % (c["op"], ("(%s)" % c["detail"]) if c["detail"] else "", core._where(fr))
            if mod is not None and mod["frames"] and mod["torch"] and mod["reduction"] is not None:  # a loss module
                built = mod["frames"][0]
                construct = core._site("construct", built, "%s built here" % mod["desc"], mod["name"])
                if mod["reduction"] == "none":      # the construction decided it: that site first
                    sites.insert(len(sites) - 1, construct)
                else:
                    sites.append(construct)
                creator_txt += " (%s, built at %s)" % (mod["desc"], core._where(built))
        if len(sites) >= 4:
            break
    if where is not None:
        call = core._site("backward", where, "%s() on a non-scalar" % ns["op"])
        if ns["op"] == "grad":   # autograd.grad of a non-scalar: grad_outputs belongs at this call
            sites.insert(0, call)
        else:
            sites.append(call)
    summary = "the value passed to %s()%s has shape %s (%s), not a scalar%s" % (
        ns["op"], (" at " + core._where(where)) if where else "", shape, ns["dtype"],
        ("; it was" + creator_txt) if creator_txt else "")
    data = {"tensor": {"shape": ns["shape"], "dtype": ns["dtype"]}, "nodes": ns["nodes"],
            "chain": [{"op": c["op"], "shape": c["shape"], "detail": c["detail"]} for c in ns["chain"]]}
    return "nonscalar-loss", summary, sites, data
