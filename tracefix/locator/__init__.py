"""Locator: name the crash site and rank the fix sites (the lines that must change).

``base`` runs a diagnosis (frames -> files, crash site, ranking); ``tracing`` is the value tracing
every family shares; ``families/<locate name>.py`` holds one error family's reasoning; ``ops`` and
``dtype`` hold vocabulary and logic shared by some families.  Never imports torch or libcst.
"""
from tracefix.locator.base import LocateContext, family, locate
from tracefix.locator.ops import op_family

__all__ = ["LocateContext", "family", "locate", "op_family"]
