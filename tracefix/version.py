"""tracefix's version (imports nothing: every module may import it)."""

__version__ = "0.1.0"
