"""backward-twice: backward through a graph whose saved values an earlier backward() freed."""
from tracefix.families.api import Family

FAMILY = Family(
    name="backward_twice",
    entries=("backward-twice",),
    locate={"backward-twice": "run"},
    # "-unsure": the same rewrite where tracefix cannot show it keeps what trains (labelled unsafe)
    fix_kinds=("detach-carried", "detach-carried-unsure", "detach-carried-attr", "detach-carried-attr-unsure", "detach-shared", "detach-shared-unsure",
               "graph-before-loop"),
    gate_words=("backward through the graph", "second time", "already been freed", "retain_graph"),
)
