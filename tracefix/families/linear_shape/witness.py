"""linear-shape: which ``nn.Linear`` raised, and the line that built it.

Loaded by path by the witness core (``tracefix/hooks/tracefix_witness.py``), which then sets
``core`` to itself; runs in the user's process: the standard library and torch only, never tracefix.
The core already records every module's construction frames and the forwards running at a crash.
"""
import re

core = None     # the witness core, set by its loader

MESSAGES = (("shapes cannot be multiplied",), ("size mismatch", "m1:"), ("must match mat2 dim",))

_SIZES = re.compile(r"\((\d+)x(\d+) and (\d+)x(\d+)\)|m1: \[(\d+) x (\d+)\], m2: \[(\d+) x (\d+)\]")


def _sizes(msg):
    m = _SIZES.search(msg)
    if m is None:
        return None
    nums = [int(g) for g in m.groups() if g is not None]
    return nums if len(nums) == 4 else None


def explain(rec, msg, exc_frames):
    Linear = rec.torch.nn.Linear
    sizes = _sizes(msg)
    layer = None
    for module in reversed(rec.stack):       # forwards still running when it raised, innermost last
        if isinstance(module, Linear):
            layer = module
            break
    if layer is None or (sizes and (layer.in_features, layer.out_features) != (sizes[2], sizes[3])):
        # a matmul of the user's own tensors, or the stack lost it: a unique live layer of those sizes
        alive = [info[0]() for info in list(rec.modules.values())]
        match = [m for m in alive if isinstance(m, Linear) and sizes
                 and (m.in_features, m.out_features) == (sizes[2], sizes[3])]
        frames = {tuple(rec.modules[id(m)][1][0]) for m in match if rec.modules.get(id(m)) and rec.modules[id(m)][1]}
        if len(frames) != 1:
            return None
        layer = match[0]
    desc = rec.describe_module(layer)
    if not desc or not desc["frames"]:
        return None
    built = desc["frames"][0]
    name = desc["name"] or "a Linear"
    got = sizes[1] if sizes else "?"
    summary = "the nn.Linear %s built at %s takes %d input features; its input had %s" % (
        name, core._where(built), layer.in_features, got)
    site = core._site("construct", built, "nn.Linear(%d, %d)" % (layer.in_features, layer.out_features),
                      module=desc["name"])
    sites = [site]
    if len(desc["frames"]) > 1:    # who called the code that built it: a layer factory's caller
        sites.append(core._site("caller", desc["frames"][1], "called the code that built it"))
    data = {"in_features": layer.in_features, "out_features": layer.out_features, "got": got,
            "module": desc["name"]}
    return "linear-shape", summary, sites, data
