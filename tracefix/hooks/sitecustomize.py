"""tracefix's interpreter hook (see tracefix/hooks/__init__.py); imported by ``site`` at start.

Kept cheap and self-contained: reads three environment variables, chains to the shadowed
``sitecustomize``, and, only when asked, imports ``tracefix_witness`` (stdlib only) from this
folder, whose one-shot import hook acts right after the user's code imports torch.  Never
imports torch (nor tracefix) itself.
"""
import os as _os
import sys as _sys

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_ANOMALY = _os.environ.get("TRACEFIX_ANOMALY", "").strip().lower() not in ("", "0", "false", "no", "off")
_WITNESS = _os.environ.get("TRACEFIX_WITNESS", "").strip().lower() not in ("", "0", "false", "no", "off")
try:
    _VERIFY_STEPS = int(_os.environ.get("TRACEFIX_VERIFY_STEPS", "") or 0)
except ValueError:
    _VERIFY_STEPS = 0


def _chain_sitecustomize():
    """Run the ``sitecustomize`` this one shadows (a distribution's, a virtualenv's), as site would."""
    import importlib.machinery

    def same(p):
        try:
            return _os.path.samefile(p or ".", _HERE)
        except OSError:
            return False

    path = [p for p in _sys.path if not same(p)]
    try:
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    except Exception:
        spec = None
    if spec is None or spec.loader is None:
        return
    try:
        import importlib.util

        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _sys.modules["_tracefix_chained_sitecustomize"] = module
    except Exception as exc:  # what site.execsitecustomize prints
        if _sys.flags.verbose:
            _sys.excepthook(*_sys.exc_info())
        else:
            _sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                              "%s: %s\n" % (exc.__class__.__name__, exc))


def _set_anomaly(torch):
    try:
        torch.autograd.set_detect_anomaly(True, check_nan=False)
    except TypeError:  # torch < 1.11 has no check_nan
        torch.autograd.set_detect_anomaly(True)


def _stderr_fd():
    """The fd whose bytes reach whoever reads this process's stderr.

    In a Jupyter kernel, fd 2 feeds a pipe that a thread of ipykernel forwards to the notebook (a
    line written there is lost when the process ends right after); its ``sys.stderr.fileno()`` is
    a copy of the kernel's original stderr, which the command that started the kernel reads.
    """
    copy = getattr(_sys.stderr, "_original_stdstream_copy", None)
    return copy if isinstance(copy, int) and copy >= 0 else 2


_VERIFY_PREFIX = "tracefix: verify: "      # runner._verify reads these lines (hooks.VERIFY_MARK)
_SNAPSHOTS = 4                             # parameters whose values a step must change (a few: cheap)
_SNAPSHOT_NUMEL = 1 << 20                  # ... preferably ones smaller than this
_SCAN = 64                                 # parameters looked at for a non-zero gradient, at most
_GRAPH_NODES = 20000                       # autograd nodes walked to find a backward's leaves, at most


def _say(kind, text):
    """One ``tracefix: verify: KIND: TEXT`` line on the stderr that the command's reader sees."""
    for stream in (_sys.stdout, _sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
    fd = _stderr_fd()
    try:
        _os.write(fd, ("\n%s%s: %s\n" % (_VERIFY_PREFIX, kind, text)).encode())
    except Exception:
        pass
    return fd


def _end_verified(steps, counts, kind="time bound", text=None, status=0):
    """Say why the hook ends this process (the time bound after the steps, or that it does not
    train), then end it.  A Jupyter kernel ends too; the client that waits for it then fails
    ("Kernel died"), which the line explains."""
    if text is None:
        text = "stopped %d optimizer steps in (%d backward passes); no error so far" % (counts["step"],
                                                                                          counts["backward"])
    if _stderr_fd() != 2:
        text += "; ending this Jupyter kernel now (its client will say that the kernel died)"
    _say(kind, text)
    _os._exit(status)


def _verify_bound():
    """Seconds the program may run on after the steps (TRACEFIX_VERIFY_TIMEOUT; default 60)."""
    try:
        return max(0.0, float(_os.environ.get("TRACEFIX_VERIFY_TIMEOUT", "") or 60))
    except ValueError:
        return 60.0


def _install_verify(torch, steps, bound=None):
    """Watch the first ``steps`` backward passes and optimizer steps: a non-zero gradient must
    reach a trainable parameter and a step must change it.  Then the program runs on, ended by
    the hook ``bound`` seconds later (0: at once) if it has not ended by itself.

    A program without an optimizer (``p.add_(p.grad, alpha=-lr)`` by hand) is watched through
    its backward passes: the leaves each one reaches must get a non-zero gradient, and their
    values must change before the next one; a change seen counts as a step."""
    import atexit
    import functools
    import threading

    bound = _verify_bound() if bound is None else bound
    counts = {"backward": 0, "step": 0, "manual": 0}
    state = {"grad": False, "changed": False, "said": False, "reached": False, "snap": [], "note": "",
             "hand": []}

    def passed():
        return state["grad"] and state["changed"]

    def updates():
        return counts["step"] or counts["manual"]

    def done_text():
        if counts["step"]:
            return "%d optimizer steps (%d backward passes)" % (counts["step"], counts["backward"])
        return ("%d parameter updates by the program's own code (no optimizer step, %d backward passes)"
                % (counts["manual"], counts["backward"]))

    def reason():
        if counts["step"] == 0 and counts["backward"] == 0:
            return "no optimizer step ran"
        if not state["grad"]:
            return "every gradient was zero or missing at each optimizer step"
        if counts["step"] == 0:
            return "no optimizer step ran, and no parameter changed between backward passes"
        return "gradients were non-zero, but no optimizer step changed a parameter (a learning rate of 0?)"

    def checks():
        return state["note"] or "gradients non-zero, parameters changed"

    def on_bound():
        if passed():
            _end_verified(steps, counts, "time bound", "ran on %gs after the %d %s without an error"
                          % (bound, steps, "optimizer steps" if counts["step"] else "parameter updates"))
        _end_verified(steps, counts, "not training", "%d optimizer steps ran in %gs, but %s"
                      % (counts["step"], bound, reason()), status=1)

    def check():
        if not state["reached"] and counts["backward"] >= steps and updates() >= steps:
            state["reached"] = True
            if bound > 0:
                timer = threading.Timer(bound, on_bound)
                timer.daemon = True
                timer.start()
            elif not passed():
                on_bound()
        if state["reached"] and passed() and not state["said"]:
            state["said"] = True
            _say("steps ok", "%s; %s; %s"
                 % (done_text(), checks(),
                    "running on for at most %gs" % bound if bound > 0 else "stopping now (time bound 0)"))
            if bound <= 0:
                on_bound()

    def trainable(optimizer):
        for group in optimizer.param_groups:
            for p in group["params"]:
                if getattr(p, "requires_grad", False):
                    yield p

    def nonzero(p):
        g = p.grad
        if g is None:
            return False
        if g.is_sparse:
            g = g.coalesce().values()
        return bool((g != 0).any())

    def pre_step(optimizer, *_args):
        if passed():
            return
        try:
            with torch.no_grad():
                seen, small, large = 0, [], []
                for p in trainable(optimizer):
                    if seen >= _SCAN or len(small) >= _SNAPSHOTS:
                        break
                    seen += 1
                    if nonzero(p):
                        state["grad"] = True
                        (small if p.numel() <= _SNAPSHOT_NUMEL else large).append(p)
                chosen = (small + large)[:_SNAPSHOTS]
                if not chosen and not state["grad"]:   # a closure computes the gradients inside step()
                    chosen = [p for _i, p in zip(range(_SCAN), trainable(optimizer))][:_SNAPSHOTS]
                state["snap"] = [(p, p.detach().clone()) for p in chosen]
        except Exception as exc:   # never break the user's step; say what was not checked
            state.update(grad=True, changed=True, snap=[],
                         note="gradients and parameters not checked (%s: %s)" % (exc.__class__.__name__, exc))

    def post_step(optimizer, *_args):
        try:
            if not passed():
                with torch.no_grad():
                    if not state["grad"]:
                        state["grad"] = any(nonzero(p) for _i, p in zip(range(_SCAN), trainable(optimizer)))
                    if any(not torch.equal(p.detach(), before) for p, before in state["snap"]):
                        state["changed"] = True
                state["snap"] = []
        except Exception as exc:
            state.update(grad=True, changed=True, snap=[],
                         note="gradients and parameters not checked (%s: %s)" % (exc.__class__.__name__, exc))
        counts["step"] += 1
        state["hand"] = []
        check()

    def leaves(args, kwargs):
        """The leaf tensors that require grad which this backward reaches (a bounded walk)."""
        roots = kwargs.get("tensors", args[0] if args else None)
        roots = [roots] if isinstance(roots, torch.Tensor) else list(roots or ())
        stack = [t.grad_fn for t in roots if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        seen, found = set(), []
        while stack and len(seen) < _GRAPH_NODES and len(found) < _SCAN:
            fn = stack.pop()
            if fn is None or fn in seen:
                continue
            seen.add(fn)
            variable = getattr(fn, "variable", None)   # an AccumulateGrad node: its leaf
            if isinstance(variable, torch.Tensor):
                found.append(variable)
            else:
                stack.extend(f for f, _i in getattr(fn, "next_functions", ()))
        return found

    def hand_changed():
        """Whether a leaf the last backward gave a non-zero gradient has changed since."""
        try:
            with torch.no_grad():
                if any(not torch.equal(p.detach(), before) for p, before in state["hand"]):
                    counts["manual"] += 1
                    state["changed"] = True
        except Exception:
            pass
        state["hand"] = []

    def hand_snapshot(found):
        try:
            with torch.no_grad():
                chosen = [p for p in found if nonzero(p)]
                if chosen:
                    state["grad"] = True
                chosen.sort(key=lambda p: p.numel() > _SNAPSHOT_NUMEL)
                state["hand"] = [(p, p.detach().clone()) for p in chosen[:_SNAPSHOTS]]
        except Exception:
            state["hand"] = []

    def at_exit():
        # The program ended by itself (not on an uncaught exception: Python printed that already).
        if state["hand"]:
            hand_changed()
        if state["said"] or not (counts["step"] or counts["backward"]):
            return          # said so already, or a process that did not train (a data-loading worker)
        if getattr(_sys, "last_value", None) is not None or getattr(_sys, "last_exc", None) is not None:
            return
        if passed():
            _say("ended early", "the program ended after %d of %d %s; %s"
                 % (updates(), steps, done_text().split(" ", 1)[1], checks()))
        else:
            _say("not training", "the program ended after %d optimizer steps (%d backward passes), but %s"
                 % (counts["step"], counts["backward"], reason()))

    atexit.register(at_exit)

    # Tensor.backward calls torch.autograd.backward (looked up at call time): wrapping the
    # function counts both forms once.
    original_backward = torch.autograd.backward

    @functools.wraps(original_backward)
    def backward(*args, **kwargs):
        # Until an optimizer step is seen, parameters may be updated by hand between backwards.
        watch = counts["step"] == 0 and not (passed() and counts["manual"] >= steps)
        found = []
        if watch:
            if state["hand"]:
                hand_changed()
            try:
                found = leaves(args, kwargs)
            except Exception:
                found = []
        result = original_backward(*args, **kwargs)
        counts["backward"] += 1
        if found and counts["step"] == 0:
            hand_snapshot(found)
        check()
        return result

    torch.autograd.backward = backward

    import torch.optim.optimizer as optimizer_module

    register = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    register_pre = getattr(optimizer_module, "register_optimizer_step_pre_hook", None)
    if register is not None and register_pre is not None:
        # Public, global hooks, run by the wrapper torch puts around every Optimizer subclass's
        # step (GradScaler.step and closures included; a step skipped for inf/nan does not count).
        register_pre(pre_step)
        register(post_step)
        return
    # torch < 2.0: wrap each optimizer's bound step when it is created.
    Optimizer = optimizer_module.Optimizer
    original_init = Optimizer.__init__

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        bound_step = self.step

        @functools.wraps(bound_step)
        def step(*a, **k):
            pre_step(self)
            out = bound_step(*a, **k)
            post_step(self)
            return out

        self.step = step

    Optimizer.__init__ = __init__


def _on_torch(torch):
    if getattr(torch, "_tracefix_hooked", False):
        return
    torch._tracefix_hooked = True
    try:
        if _ANOMALY:
            _set_anomaly(torch)
        if _VERIFY_STEPS > 0:
            _install_verify(torch, _VERIFY_STEPS)
    except Exception as exc:  # never break the user's `import torch`
        _sys.stderr.write("tracefix: hook not installed: %s: %s\n" % (exc.__class__.__name__, exc))


def _witness_module():
    """tracefix_witness from this folder (it holds the one-shot ``import torch`` hook too)."""
    try:
        import tracefix_witness
        return tracefix_witness
    except ImportError:  # this folder is not on sys.path (a copied sitecustomize): load it by path
        import importlib.util

        spec = importlib.util.spec_from_file_location("tracefix_witness", _os.path.join(_HERE, "tracefix_witness.py"))
        module = importlib.util.module_from_spec(spec)
        _sys.modules["tracefix_witness"] = module
        spec.loader.exec_module(module)
        return module


def _install():
    if not (_ANOMALY or _VERIFY_STEPS > 0 or _WITNESS):
        return
    witness = _witness_module()
    if _ANOMALY or _VERIFY_STEPS > 0:
        # Before the witness: its optimizer hooks come after ours in torch's global hook dicts, so
        # that its removing them at its last step (while torch loops over a dict) ends the loop.
        witness.on_torch_import(_on_torch)  # now if torch was imported before us (a .pth file)
    if _WITNESS:
        witness.install()


_chain_sitecustomize()
_install()
