"""Hooks that ``tracefix run`` (or a user's own launcher) injects into a Python child process.

This folder is put first on ``PYTHONPATH``; its ``sitecustomize.py`` is then imported by every
Python interpreter started with that environment (``python train.py``, ``python -m pkg.train``,
``torchrun``/``accelerate launch`` workers, multiprocessing spawn children) and:

* chains to the ``sitecustomize`` it shadows, so a site's or a virtualenv's keeps working;
* does nothing more unless one of the variables below is set;
* never imports torch itself: it waits for the user's code to import it (a one-shot
  ``sys.meta_path`` finder) and then switches on what was asked.

``TRACEFIX_ANOMALY=1``
    ``torch.autograd.set_detect_anomaly(True, check_nan=False)`` right after ``import torch``:
    an autograd error then carries the traceback of the forward call that caused it.
``TRACEFIX_WITNESS=1``
    arm the witness (``tracefix_witness.py``): while the first optimizer steps run it records
    in-place writes, non-scalar losses and half-precision casts, and when an exception ends the
    process it prints, after Python's traceback, a ``tracefix-witness:`` summary line and a
    ``tracefix-witness-data: {json}`` line that name the culprit (see docs/witness.md).
``TRACEFIX_VERIFY_STEPS=N``
    watch the first N backward passes and optimizer steps: a trainable parameter must get a
    non-zero gradient and a step must change it.  The hook says how it went in
    ``tracefix: verify: KIND: ...`` lines on stderr (in a Jupyter kernel: the kernel's own
    stderr, not the notebook's): ``steps ok`` once the steps ran and trained; then the program
    runs on, and ``time bound`` ends it (status 0) ``TRACEFIX_VERIFY_TIMEOUT`` seconds after the
    steps (default 60; 0: at once) if it has not ended by itself; ``not training`` (status 1)
    when no parameter changed; ``ended early`` when it ended by itself before N steps.
    ``tracefix run --verify`` reads these lines (runner._verify).

Interpreters started with ``-I``, ``-E`` or ``-S`` ignore ``PYTHONPATH`` or ``site``, and so
these hooks.

This package (``__init__``) is what tracefix imports; ``sitecustomize.py`` must stay
self-contained (it runs in the user's interpreter, which might not even have tracefix installed).
"""
from __future__ import annotations

from pathlib import Path

HOOKS_DIR = Path(__file__).resolve().parent
ENV_ANOMALY = "TRACEFIX_ANOMALY"
ENV_VERIFY_STEPS = "TRACEFIX_VERIFY_STEPS"
ENV_WITNESS = "TRACEFIX_WITNESS"
ENV_VERIFY_TIMEOUT = "TRACEFIX_VERIFY_TIMEOUT"
WITNESS_MARK = "tracefix-witness: "            # the human summary line
WITNESS_DATA_MARK = "tracefix-witness-data: "  # the machine-readable line (one JSON object, "v": 1)
VERIFY_MARK = "tracefix: verify: "              # the verify hook's lines: KIND: text
VERIFIED_MARKER = b"tracefix: verify: steps ok: "  # the steps ran and trained

__all__ = ["HOOKS_DIR", "ENV_ANOMALY", "ENV_VERIFY_STEPS", "ENV_WITNESS", "ENV_VERIFY_TIMEOUT", "VERIFY_MARK",
           "VERIFIED_MARKER", "WITNESS_MARK",
           "WITNESS_DATA_MARK"]
