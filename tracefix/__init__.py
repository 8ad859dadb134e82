"""tracefix: diagnose and fix PyTorch autograd/AMP crashes from their tracebacks."""

__version__ = "0.1.0"
