"""The error families: one folder each, one line in :data:`FAMILIES`.

Shared code asks this registry what a family declares (:mod:`tracefix.families.api`) and loads a
family's parts by name, so that adding a family touches its folder and the line below.  Families
never import each other.  Reading the registry imports only the ``family.py`` files.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Dict, Optional, Tuple

from tracefix.families.api import ANY, Family

FAMILIES = ("nonscalar", "inplace", "half_unscale", "linear_shape", "numpy_grad", "backward_twice", "target_dtype", "input_dtype", "no_grad_fn", "leaf_inplace", "cuda_on_cpu", "device_mismatch", "view_contiguous")

_loaded: Optional[Tuple[Family, ...]] = None


def families() -> Tuple[Family, ...]:
    """Every registered family, in registry order."""
    global _loaded
    if _loaded is None:
        _loaded = tuple(importlib.import_module(f"{__name__}.{name}.family").FAMILY for name in FAMILIES)
    return _loaded


def _index(attr: str) -> Dict[str, Family]:
    return {key: fam for fam in families() for key in getattr(fam, attr)}


def of_entry(entry_id: str) -> Optional[Family]:
    """The family of a built-in entry id."""
    return _index("entries").get(entry_id)


def of_locate(name: str) -> Optional[Family]:
    """The family whose locate.py an entry's ``locate`` name points at."""
    return _index("locate").get(name)


def of_kind(kind: str) -> Optional[Family]:
    """The family that produces a fix-site kind."""
    return _index("fix_kinds").get(kind)


def of_evidence(kind: str) -> Optional[Family]:
    """The family whose witness evidence has this kind."""
    return _index("evidence").get(kind)


def anomaly_helps(entry_id: str) -> bool:
    """Does torch's anomaly mode (its forward trace) help locate this entry's error?"""
    fam = of_entry(entry_id)
    return fam is not None and fam.anomaly_helps


def sequels(entry_id: str) -> Tuple[str, ...]:
    """Patterns of the errors a partial fix of this entry's error leads to next."""
    fam = of_entry(entry_id)
    return fam.sequels if fam is not None else ()


def locate_names() -> Tuple[str, ...]:
    return tuple(sorted(_index("locate")))


def gate_words() -> Tuple[str, ...]:
    """Every family's gate words, each once, in registry order."""
    return tuple(dict.fromkeys(w for fam in families() for w in fam.gate_words))


def part(fam: Family, name: str) -> Optional[ModuleType]:
    """The family's ``<name>.py`` module (locate, evidence, fix, unpatchable); None if it has none."""
    qual = f"{__name__}.{fam.name}.{name}"
    try:
        return importlib.import_module(qual)
    except ModuleNotFoundError as exc:
        if exc.name != qual:
            raise
        return None


__all__ = ["ANY", "FAMILIES", "Family", "anomaly_helps", "families", "gate_words", "locate_names", "of_entry", "of_evidence",
           "of_kind", "of_locate", "part", "sequels"]
