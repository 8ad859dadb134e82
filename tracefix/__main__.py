from tracefix.cli import main

main()
