"""Small frozen records passed down the pipeline (read -> match -> locate -> patch -> render).

The JSON output is their plain serialisation, so what the tests assert is what users get.
"""
from __future__ import annotations

from typing import Optional, Tuple

from tracefix.record import record, field


@record(frozen=True)
class Frame:
    """One stack frame as the log shows it."""

    path: str                    # exactly as printed ("/home/u/x.py", "C:\\a b\\x.py", "<ipython-input-3-ab>")
    line: int                    # 1-based; 0 when the log does not say
    func: str = ""
    code: Optional[str] = None   # the source line the log echoed, stripped; None when absent


@record(frozen=True)
class EvidenceSite:
    """One place the witness names (paths absolute, as the crashing process saw them, like frames).

    Roles:
      ``write``     the user line whose call wrote the tensor in place (``h.mul_(..)``, ``x += y``,
                    ``x[i] = v``, ``out=``, or the line that called an ``inplace=True`` module/function);
      ``construct`` where the module involved was built (``nn.ReLU(inplace=True)``, a loss module
                    built with ``reduction='none'``);
      ``step``      the ``optimizer.step()`` (or ``scaler.step``) call that updated a parameter
                    between the forward that saved it and the backward that needed it;
      ``backward``  the failing ``backward()`` / ``autograd.grad()`` call;
      ``creator``   a user line that created the non-scalar value passed to backward, innermost
                    (closest to the backward) first;
      ``cast``      where trainable parameters became float16/bfloat16 (``.half()``, ``.to(dtype)``,
                    ``.type()``, ``.bfloat16()``, ``torch.set_default_dtype``);
      ``param``     where a parameter was built in half precision (``nn.Parameter``/``register_parameter``).
    """

    role: str
    path: str
    line: int
    code: str = ""               # the source line, stripped, as the process read it
    detail: str = ""             # e.g. "mul_: version 0 -> 1", "nn.ReLU(inplace=True) built here"
    module: str = ""             # qualified module name in the model ("decoder.0"), when known


@record(frozen=True)
class Evidence:
    """What tracefix's witness saw in the crashing process (a ``tracefix-witness-data`` line).

    Kinds:
      ``inplace-write``   a tensor autograd saved was written in place; sites: ``construct``
                          (when a module built with ``inplace=True`` did it), ``write``, ``backward``;
      ``param-update``    a parameter was changed in place (optimizer step, clipping, ``copy_``)
                          between a forward and the backward that needed it; sites: ``step`` or
                          ``write``, ``backward``;
      ``nonscalar-loss``  backward()/grad() got a non-scalar; sites: ``creator`` (innermost first),
                          ``construct`` (a loss module), ``backward``;
      ``half-params``     trainable parameters became float16/bfloat16; sites: ``cast``/``param``
                          (the one that explains the error first).
    ``sites`` is ordered most useful first.  ``data`` is the JSON object exactly as printed
    (``"v": 1``; extra keys per kind: ``tensor`` {shape, dtype, version, node, name}, ``op``,
    ``module`` {name, class, inplace}, ``optimizer``, ``param_name``, ``chain``, ``dtype``,
    ``params``, ``count``; see docs/witness.md).
    """

    kind: str
    summary: str                 # one sentence, e.g. "'h' [16, 8] (output of tanh) was changed in place by mul_ ..."
    sites: Tuple[EvidenceSite, ...] = ()
    data: str = ""

    def site(self, *roles: str) -> Optional[EvidenceSite]:
        """The first site with one of ``roles``."""
        for s in self.sites:
            if s.role in roles:
                return s
        return None


@record(frozen=True)
class Traceback:
    """One exception found in the log, with its stack (innermost frame last)."""

    exc_type: Optional[str]      # "RuntimeError"; None when the paste lost the type
    message: str                 # whole message, continuation lines joined with "\n"
    frames: Tuple[Frame, ...] = ()
    # Forward-call trace from an anomaly-mode warning printed before this exception.
    anomaly_frames: Tuple[Frame, ...] = ()
    anomaly_node: Optional[str] = None          # "ReluBackward0" from "Error detected in ReluBackward0"
    cause_of_next: bool = False  # part of a chain: a later exception was raised while handling this one
    rank: Optional[int] = None   # from "[rank3]:"-style prefixes
    line_no: int = 0             # 1-based line in the input where the record starts
    has_header: bool = False     # a "Traceback (most recent call last):" (or equivalent) was seen
    evidence: Optional[Evidence] = None   # the witness's block printed right after this exception


@record(frozen=True)
class Site:
    """A place in the user's project."""

    path: str                    # relative to --root, "/"-separated
    line: int
    code: str                    # the local source line, stripped
    local_path: str = ""         # absolute path on this machine
    col: int = 0                 # 0-based column of the expression of interest
    # In a Jupyter notebook (path ends in .ipynb; line is then a line of tracefix.notebook's virtual
    # module): the cell's 1-based position among all cells, the line within it, its saved In [N].
    cell: Optional[int] = None
    cell_line: Optional[int] = None
    execution_count: Optional[int] = None


@record(frozen=True)
class FixSite(Site):
    """A line that must change, with why.  ``kind`` names the fix strategy the patcher uses.

    Kinds: backward-receiver, loss-assignment, autograd-grad, criterion-reduction,
    per-sample-return, inplace-augassign, inplace-method, inplace-kwarg, inplace-subscript,
    inplace-out, optimizer-step-between, param-update-before-backward, param-step-before-backward,
    model-cast, torch-dtype-fp16, default-dtype, param-dtype, config-dtype, grad-scaler.
    """

    reason: str = ""
    kind: str = ""
    score: float = 0.0           # higher ranks first
    searched: bool = False       # found by searching the project, not from the log's frames: a candidate
    ambiguous: bool = False      # the log's file fits several files here; this site is in one of them
    # Why fixing only here leaves another use of the value that needs a scalar (the locator's
    # verdict, file:line named): every patch of this site is insufficient, and it ranks after
    # the sites whose fix covers that use.
    uncovered: str = ""
    # For a site that applies a dtype chosen elsewhere: where it is chosen ("train.py:12"). Two
    # sites applying the same value along one path are links of one chain, not rival causes.
    value_from: str = ""
    # A site found by no traced path to the error, only because it could be one (a module built
    # with inplace=True that may receive the saved tensor): why its fix may leave the error. A
    # patch of it is never safe.
    guess: str = ""
    # The expression the locator worked out for the fix from the whole project (the name a
    # layer's in_features should read); the fixer writes it.
    write: str = ""
    # The expressions one fix of this site rewrites, this site's own first, then the others it
    # must change to cover every use (the labels built for the validation set too), each as
    # "path:line:col:end_line:end_col" (columns in characters, the end exclusive).
    spans: Tuple[str, ...] = ()


SAFE, UNSAFE, INSUFFICIENT = "safe", "unsafe", "insufficient"
# safe: compiles, the error is gone, behaviour is what the user meant.  unsafe: the error is gone
# but behaviour may change (the reason says how).  insufficient: the error would only move (e.g.
# reducing at backward() while the loss is used as a number afterwards): shown, never written.
APPLICABILITIES = (SAFE, UNSAFE, INSUFFICIENT)


@record(frozen=True)
class Patch:
    """A proposed change to one or more files (unified diff) and how safe it is."""

    summary: str
    applicability: str           # "safe" | "unsafe" | "insufficient" (see APPLICABILITIES)
    reason: str                  # why unsafe / insufficient ("" when safe)
    diff: str                    # unified diff, paths relative to the root
    files: Tuple[Tuple[str, str, str], ...] = field(default=(), repr=False, compare=False)
    # files: (relative path, original text, patched text); used by --apply, not serialised
    origin: Optional[Tuple[str, int]] = field(default=None, repr=False, compare=False)
    covers: Tuple[Tuple[str, int], ...] = field(default=(), repr=False, compare=False)
    # origin: (path, line) of the fix site this patch fixes; covers: every such site, when one patch
    # fixes several equally likely sites at once; neither is serialised


@record(frozen=True)
class Diagnosis:
    entry_id: str
    title: str
    confidence: float
    traceback: Traceback
    fields: Tuple[Tuple[str, str], ...] = ()       # captured pattern groups, e.g. (("node", "Relu"),)
    ranks: Tuple[int, ...] = ()
    crash_site: Optional[Site] = None
    fix_sites: Tuple[FixSite, ...] = ()
    patches: Tuple[Patch, ...] = ()
    notes: Tuple[str, ...] = ()                     # e.g. "models/net.py changed since the log was written"
    rival_sites: bool = False   # the fix sites are rival explanations (which write, which cast),
    #                             not links of one chain (a criterion, the loss it makes, its backward);
    #                             the locator sets it from its family module's RIVAL_SITES

    def field(self, name: str, default: str = "") -> str:
        return dict(self.fields).get(name, default)
