"""The one error the patcher raises; the CLI maps it to exit code 3."""
from __future__ import annotations


class PatchError(Exception):
    """A patch cannot be proposed, applied or undone; the message is one clear sentence."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message
