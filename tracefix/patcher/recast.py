"""Rewrite the expressions that build a tensor so that they build another dtype, in one patch.

Shared by the dtype families' fixers: ``rebuilt`` says how one builder (``torch.tensor(...,
dtype=...)``, a ``.float()`` cast, ``torch.from_numpy(a)``, ``np.array(...)``) is written to make
the dtype a message names, and ``edit`` rewrites every span of a site (:attr:`FixSite.spans`).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from tracefix.patcher.context import Context
from tracefix.patcher.cstedit import expr
from tracefix.records import FixSite
from tracefix.vocab import TENSOR_FACTORIES

# a dtype as torch messages name it -> (torch dtype, Tensor method, legacy Tensor class, numpy dtype)
SPELLING = {"Long": ("torch.long", "long", "LongTensor", "int64"),
            "Float": ("torch.float32", "float", "FloatTensor", "float32"),
            "Double": ("torch.float64", "double", "DoubleTensor", "float64"),
            "Half": ("torch.float16", "half", "HalfTensor", "float16"),
            "BFloat16": ("torch.bfloat16", "bfloat16", "", "")}
CAST_METHODS = ("float", "double", "half", "long", "int", "short", "bool", "bfloat16", "byte")
# factories whose dtype= may be any dtype (randn/rand/empty make floats only: those get a cast)
DTYPE_FACTORIES = (TENSOR_FACTORIES - {"from_numpy", "rand", "randn", "rand_like", "randn_like"}) | {"array", "asarray"}


# the expressions a builder span may hold
BUILDERS = (cst.Call, cst.BinaryOperation, cst.Comparison, cst.UnaryOperation)


def places(site: FixSite) -> List[Tuple[str, int, int, int, int]]:
    """The spans the site's fix rewrites (``FixSite.spans``; else the expression at the site)."""
    out = []
    for p in site.spans:
        path, *nums = p.rsplit(":", 4)
        out.append((path, *map(int, nums)))
    return out or [(site.path, site.line, site.col, -1, -1)]


def attr_of(node: cst.CSTNode) -> str:
    return node.func.attr.value if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) else ""


def _func(node: cst.Call) -> str:
    f = node.func
    return f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else ""


def _module(src, node: cst.Call) -> str:
    f = node.func
    return src.code(f.value) if isinstance(f, cst.Attribute) else ""


def rebuilt(src, node: cst.CSTNode, want: str) -> Optional[str]:
    """The builder ``node`` written so that it makes ``want``; None when it cannot be said."""
    dtype, meth, klass, np_dtype = SPELLING[want]
    code = src.code(node)
    if isinstance(node, cst.Call):
        attr = attr_of(node)
        if attr in CAST_METHODS and not node.args:
            return f"{src.code(node.func.value)}.{meth}()"
        if attr == "type":
            return f"{src.code(node.func.value)}.{meth}()"
        if attr == "to":        # .to(torch.float32) / .to(device, dtype=torch.float32): swap the dtype only
            kw = next((a for a in node.args if a.keyword is not None and a.keyword.value == "dtype"), None)
            arg = kw or next((a for a in node.args if a.keyword is None and "dtype" not in src.code(a.value)
                              and src.code(a.value).startswith("torch.") and "device" not in src.code(a.value)), None)
            if arg is None:
                return None
            start = _offset(src, node, arg.value)
            return code[:start] + dtype + code[start + len(src.code(arg.value)):]
        name, mod = _func(node), _module(src, node)
        if name.endswith("Tensor") and name != "Tensor" and klass:
            return code.replace(name, klass, 1)
        numpy = mod in ("np", "numpy")
        if name in DTYPE_FACTORIES and (mod in ("torch", "th") or numpy):
            value = f"{mod}.{np_dtype}" if numpy and np_dtype else dtype
            if numpy and not np_dtype:
                return None
            kw = next((a for a in node.args if a.keyword is not None and a.keyword.value == "dtype"), None)
            if kw is not None:
                return code[:_offset(src, node, kw.value)] + value + code[_offset(src, node, kw.value) + len(src.code(kw.value)):]
            inner = code[code.index("(") + 1:code.rindex(")")].rstrip()
            sep = "" if not inner else (" " if inner.endswith(",") else ", ")
            return f"{code[:code.rindex(')')].rstrip()}{sep}dtype={value})"
        if not isinstance(node.func, (cst.Name, cst.Attribute)):
            return None
        return f"{code}.{meth}()"
    return f"({code}).{meth}()"


def _offset(src, outer: cst.CSTNode, inner: cst.CSTNode) -> int:
    """Where ``inner``'s code starts in ``outer``'s code (both on one parse)."""
    o, i = src.positions[outer].start, src.positions[inner].start
    lines = src.code(outer).split("\n")
    if i.line == o.line:
        return i.column - o.column
    return sum(len(ln) + 1 for ln in lines[:i.line - o.line]) + i.column


def node_at(src, line: int, col: int, end_line: int, end_col: int, types) -> Optional[cst.CSTNode]:
    if end_line < 0:        # a site without spans: the outermost expression starting on its line
        found = src.all_on_line(line, types, lambda n: src.positions[n].start.line == line)
        if not found:
            return None
        left = min(src.positions[n].start.column for n in found)
        return max((n for n in found if src.positions[n].start.column == left),
                   key=lambda n: (src.positions[n].end.line, src.positions[n].end.column))

    def exact(n: cst.CSTNode) -> bool:
        r = src.positions[n]
        return (r.start.line, r.start.column, r.end.line, r.end.column) == (line, col, end_line, end_col)

    found = src.all_on_line(line, types, exact)
    return found[0] if found else None


def edit(ctx: Context, spots, types, make) -> Optional[Tuple[Dict[str, str], List[str]]]:
    """Each place's node rewritten by ``make(src, node) -> new code``; (texts by path, what changed)."""
    texts: Dict[str, str] = {}
    changes: List[str] = []
    by_path: Dict[str, list] = {}
    for path, *where in spots:
        by_path.setdefault(path, []).append(tuple(where))
    for path, spots in by_path.items():
        text = ctx.text(path)
        if text is None:
            return None
        for where in sorted(set(spots), reverse=True):       # later first: earlier spots keep their place
            src = ctx.source(path, text if path in texts else None)
            node = node_at(src, *where, types) if src is not None else None
            new = make(src, node) if node is not None else None
            if new is None:
                return None
            old = src.code(node)
            if new == old:
                continue
            text = src.replace(node, lambda n, new=new: expr(new))
            texts[path] = text
            changes.append(f"`{old}` -> `{new}` ({path}:{where[0]})")
    return (texts, changes) if texts else None
