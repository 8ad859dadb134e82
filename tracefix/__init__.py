"""tracefix: diagnose and fix PyTorch autograd/AMP crashes from their tracebacks."""

from tracefix.version import __version__  # noqa: F401  (tracefix.__version__)


def load_ipython_extension(ipython):  # %load_ext tracefix; the work lives in tracefix.jupyter
    from tracefix.jupyter import load
    load(ipython)


def unload_ipython_extension(ipython):
    from tracefix.jupyter import unload
    unload(ipython)
