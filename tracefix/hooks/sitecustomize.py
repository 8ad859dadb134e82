"""tracefix's interpreter hook (see tracefix/hooks/__init__.py); imported by ``site`` at start.

Kept cheap and self-contained: reads two environment variables, chains to the shadowed
``sitecustomize``, and, only when asked, installs a one-shot import hook that acts right after
the user's code imports torch.  Never imports torch (nor tracefix) itself.
"""
import os as _os
import sys as _sys

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_ANOMALY = _os.environ.get("TRACEFIX_ANOMALY", "").strip().lower() not in ("", "0", "false", "no", "off")
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


def _install_verify(torch, steps):
    """End the process cleanly once ``steps`` backward passes and optimizer steps have succeeded."""
    import functools

    counts = {"backward": 0, "step": 0}

    def finish():
        try:
            if _sys.stdout is not None:
                _sys.stdout.flush()
        except Exception:
            pass
        try:
            _sys.stderr.write("\ntracefix: verified after %d steps (%d backward passes, %d optimizer steps ok)\n"
                              % (steps, counts["backward"], counts["step"]))
            _sys.stderr.flush()
        except Exception:
            pass
        _os._exit(0)

    def check():
        if counts["backward"] >= steps and counts["step"] >= steps:
            finish()

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


class _TorchImportHook:
    """A ``sys.meta_path`` finder that only watches for ``torch``: it lets the real finder find
    it, and runs ``_on_torch`` when the module has finished executing.  One shot."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            _sys.meta_path.remove(cls)
        except ValueError:
            pass
        spec = None
        for finder in _sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _on_torch(module)

        try:
            loader.exec_module = exec_module  # this loader instance only; __loader__ stays the real one
        except (AttributeError, TypeError):
            spec.loader = _LoaderProxy(loader, exec_module)
        return spec


class _LoaderProxy:
    def __init__(self, loader, exec_module):
        self._loader = loader
        self.exec_module = exec_module

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _install():
    if not (_ANOMALY or _VERIFY_STEPS > 0):
        return
    torch = _sys.modules.get("torch")
    if torch is not None:  # imported before us (a .pth file): act now
        _on_torch(torch)
    else:
        _sys.meta_path.insert(0, _TorchImportHook)


_chain_sitecustomize()
_install()
