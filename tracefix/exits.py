"""The command line's exit codes and its one-line error (see tracefix.cli for what each code means)."""
from __future__ import annotations

import sys

EXIT_OK, EXIT_NOTHING, EXIT_USAGE, EXIT_PATCH = 0, 1, 2, 3


def err(text: str) -> None:
    """One line on stderr, after what stdout holds so far."""
    sys.stdout.flush()
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


class Fail(Exception):
    """A one-line error with our exit code (never a traceback of our own)."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.message = message
        self.exit_code = code

    def show(self) -> None:
        err(f"tracefix: error: {self.message}")
