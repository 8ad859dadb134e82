"""tracefix: diagnose and fix PyTorch autograd/AMP crashes from their tracebacks."""

__version__ = "0.1.0"


def load_ipython_extension(ipython):  # %load_ext tracefix; the work lives in tracefix.jupyter
    from tracefix.jupyter import load
    load(ipython)


def unload_ipython_extension(ipython):
    from tracefix.jupyter import unload
    unload(ipython)
