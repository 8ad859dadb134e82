"""Locator: name the crash site and rank the fix sites (the lines that must change).

``base`` runs a diagnosis (frames -> files, crash site, ranking); ``tracing`` is the value tracing
every family shares; ``evidence`` reads the witness's evidence; ``ops`` holds operator vocabulary.
Each error family's own reasoning is in ``tracefix/families/<name>/locate.py``.  Never imports torch or libcst.
"""
from tracefix.locator.base import LocateContext, family, locate
from tracefix.locator.ops import op_family

__all__ = ["LocateContext", "family", "locate", "op_family"]
