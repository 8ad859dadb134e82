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


def _end_verified(steps, counts):
    """Say that the steps were reached (``tracefix run`` trusts this line, see runner._verify), then
    end the process with status 0.  A Jupyter kernel ends too (the point is to stop training
    early); the client that waits for it then fails ("Kernel died"), which the line explains."""
    for stream in (_sys.stdout, _sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
    fd = _stderr_fd()
    text = ("\ntracefix: verified after %d steps (%d backward passes, %d optimizer steps ok)%s\n"
            % (steps, counts["backward"], counts["step"],
               "; ending this Jupyter kernel now (its client will say that the kernel died)" if fd != 2 else ""))
    try:
        _os.write(fd, text.encode())
    except Exception:
        pass
    _os._exit(0)


def _install_verify(torch, steps):
    """End the process cleanly once ``steps`` backward passes and optimizer steps have succeeded."""
    import functools

    counts = {"backward": 0, "step": 0}

    def check():
        if counts["backward"] >= steps and counts["step"] >= steps:
            _end_verified(steps, counts)

    # Tensor.backward calls torch.autograd.backward (looked up at call time): wrapping the
    # function counts both forms once.
    original_backward = torch.autograd.backward

    @functools.wraps(original_backward)
    def backward(*args, **kwargs):
        result = original_backward(*args, **kwargs)
        counts["backward"] += 1
        check()
        return result

    torch.autograd.backward = backward

    def step_done(*_args):
        counts["step"] += 1
        check()

    import torch.optim.optimizer as optimizer_module

    register = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    if register is not None:
        # A public, global hook, run by the wrapper torch puts around every Optimizer subclass's
        # step (GradScaler.step and closures included; a step skipped for inf/nan does not count).
        register(step_done)
        return
    # torch < 2.0: wrap each optimizer's bound step when it is created.
    Optimizer = optimizer_module.Optimizer
    original_init = Optimizer.__init__

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        bound = self.step

        @functools.wraps(bound)
        def step(*a, **k):
            out = bound(*a, **k)
            step_done()
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
    if _WITNESS:
        witness.install()
    if _ANOMALY or _VERIFY_STEPS > 0:
        witness.on_torch_import(_on_torch)  # now if torch was imported before us (a .pth file)


_chain_sitecustomize()
_install()
