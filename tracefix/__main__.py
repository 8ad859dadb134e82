from tracefix.cli import entry

entry()
