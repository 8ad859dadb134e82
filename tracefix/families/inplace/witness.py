"""inplace-modification: which in-place write the witness saw overwrite what autograd saved.

Loaded by path by the witness core (``tracefix/hooks/tracefix_witness.py``), which then sets
``core`` to itself; runs in the user's process: the standard library and torch only, never tracefix.
"""
core = None     # the witness core, set by its loader

# a message with every substring of one of these is this family's to explain
MESSAGES = (("modified by an inplace operation",),)


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


def explain(rec, msg, exc_frames):
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
    backward = [core._site("backward", exc_frames[0], "the backward that needed the old value")] if exc_frames else []
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
            sites.append(core._site(role, by_frames[0], detail))
            for outer in by_frames[1:3]:     # the user's calls that led there, innermost first
                sites.append(core._site("caller", outer, "called from here"))
        sites += backward
        where = ""
        if by_frames:
            where = " at " + core._where(by_frames[0])
            if len(by_frames) > 1:
                where += " (called from %s)" % core._where(by_frames[1])
        summary = "parameter %s%s was changed in place by %s%s between the forward that saved it and " \
                  "the backward%s" % ((pname + " ") if pname else "", shape, how, where,
                                      (" at " + core._where(exc_frames[0])) if exc_frames else "")
    else:
        kind = "inplace-write"
        op = w["op"]
        if frames:
            sites.append(core._site("write", frames[0], "%s: version %d -> %d" % (op, w["v0"], w["v1"]),
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
                sites.insert(0, core._site("construct", built, "%s built here" % mod["desc"], mod["name"]))
            summary += " in %s (%s%s)" % (mod["name"] or mod["class"], mod["desc"],
                                          (", built at " + core._where(built)) if built else "")
        elif frames:
            summary += " at %s" % core._where(frames[0])
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
