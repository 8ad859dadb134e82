"""Turn fix sites into minimal, formatting-preserving patches (libcst) and write them safely.

The only part of tracefix that writes the user's files, and the only importer of libcst: the CLI
imports this package lazily, when patches are needed.

    propose(diag, root) -> tuple[Patch, ...]   ranked; the first is what --apply writes
    settled(diag) -> bool                      does the evidence single out one fix site?
    apply(patch, root, expect=None) -> list[str]
    undo(root, force=False) -> list[str]
    explain_unpatchable(site) -> str           why a site gets no automatic patch
    PatchError                                 one-sentence failure (CLI exit code 3)
"""
from __future__ import annotations

from tracefix.patcher.errors import PatchError
from tracefix.patcher.unpatchable import explain_unpatchable
from tracefix.patcher.ranking import propose, settled



def __getattr__(name: str):
    # apply/undo (tempfile, shutil, hashlib, json) load on first use: showing a patch needs none of them
    if name in ("apply", "undo"):
        from tracefix.patcher import writing

        return getattr(writing, name)
    raise AttributeError(f"module 'tracefix.patcher' has no attribute {name!r}")


__all__ = ["PatchError", "apply", "explain_unpatchable", "propose", "settled", "undo"]
