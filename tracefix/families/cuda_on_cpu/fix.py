"""cuda-on-cpu patches: choose CUDA by availability where the device is written; ``map_location``
at ``torch.load``; ``.to(self.device)`` for a ``.cuda()`` in a module that knows its device.  Never
``weights_only=False``."""
from __future__ import annotations

from typing import List

import libcst as cst

from tracefix.patcher.context import Context, Option, fixer
from tracefix.patcher.cstedit import add_arg, expr, kwarg
from tracefix.patcher.imports import imported_as, with_import
from tracefix.records import FixSite
from tracefix.vocab import DEVICE_AWARE_MODULES


@fixer("device-choice")
def device_choice(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    lit = src.find(site.line, site.col, cst.SimpleString) if src is not None else None
    if lit is None or not lit.evaluated_value.startswith("cuda"):
        return []
    torch = imported_as(ctx.text(site.path) or "", "torch")
    parent = src.parent(lit)
    bare = isinstance(parent, (cst.Arg, cst.Assign, cst.AnnAssign, cst.Return))
    choice = f'{src.code(lit)} if {torch or "torch"}.cuda.is_available() else "cpu"'
    text = src.replace(lit, lambda n: expr(choice if bare else f"({choice})"))
    if torch is None:
        text = with_import(text, "torch")
        if text is None:
            return []
    default = isinstance(parent, cst.Arg) and parent.keyword is not None and parent.keyword.value == "default"
    said = "; a device given on the command line still wins" if default else ""
    return [Option(f"Use CUDA only where it is available: {src.code(lit)} -> {choice} ({site.path}:{site.line})"
                   f"{said}", "safe", "", {site.path: text})]


@fixer("load-map-location")
def load_map_location(ctx: Context, site: FixSite) -> List[Option]:
    src = ctx.source(site.path)
    call = src.find(site.line, site.col, cst.Call, lambda n: isinstance(n.func, (cst.Attribute, cst.Name))
                    and (n.func.attr.value if isinstance(n.func, cst.Attribute) else n.func.value) == "load") \
        if src is not None else None
    if call is None or any(a.keyword is not None and a.keyword.value == "map_location" for a in call.args):
        return []
    text = src.replace(call, lambda n: add_arg(n, kwarg("map_location", expr('"cpu"'))))
    return [Option('Map the checkpoint\'s GPU tensors to the CPU: torch.load(..., map_location="cpu") (move them '
                   "to a GPU afterwards with .to(device) where there is one)", "safe", "", {site.path: text})]


@fixer("cuda-call")
def cuda_call(ctx: Context, site: FixSite) -> List[Option]:
    """``t.cuda()`` -> ``t.to(self.device)`` in a method of a LightningModule, which Lightning puts on
    the device it trains on (elsewhere there is no device to name: explained, not patched)."""
    src = ctx.source(site.path)
    call = src.find(site.line, site.col, cst.Call, lambda n: isinstance(n.func, cst.Attribute)
                    and n.func.attr.value == "cuda" and not n.args) if src is not None else None
    if call is None or not _in_device_aware_method(src, call):
        return []
    text = src.replace(call, lambda n: n.with_changes(func=n.func.with_changes(attr=cst.Name("to")),
                                                      args=[cst.Arg(expr("self.device"))]))
    return [Option(f"Move to the module's own device: `{src.code(call)}` -> "
                   f"`{src.code(call.func.value)}.to(self.device)` ({site.path}:{site.line}); the framework "
                   "puts the module on the GPU when there is one", "safe", "", {site.path: text})]


def _in_device_aware_method(src, node) -> bool:
    """``node`` is in a method (first parameter ``self``) of a class deriving from a LightningModule."""
    ups = list(src.ancestors(node))
    fn = next((u for u in ups if isinstance(u, (cst.FunctionDef, cst.Lambda, cst.ClassDef))), None)
    if not isinstance(fn, cst.FunctionDef) or not fn.params.params or fn.params.params[0].name.value != "self":
        return False
    cls = next((u for u in ups if isinstance(u, cst.ClassDef)), None)
    if cls is None or src.parent(fn) is not cls.body:
        return False
    return any((b.value.attr.value if isinstance(b.value, cst.Attribute) else getattr(b.value, "value", ""))
               in DEVICE_AWARE_MODULES for b in cls.bases)
