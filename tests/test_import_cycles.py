"""The import graph among tracefix's modules has no cycle, function-local imports included
(tracefix.hooks runs in the user's process and imports none of them), and tracefix.commands does not
import tracefix.cli."""
import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

PACKAGE = Path(__file__).resolve().parent.parent / "tracefix"
LEFT_OUT = ("tracefix.hooks",)


def _modules() -> Dict[str, Path]:
    """Every module under tracefix/, by dotted name (a package by its own name: its __init__)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("tracefix",) + path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, known: Set[str]) -> Set[str]:
    """The tracefix modules that this module imports anywhere in its body."""
    is_package = path.name == "__init__.py"
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, is_package, node.module, node.level)
            if base is None:
                continue
            # `from tracefix.x import y`: y may be a submodule (then that module is what is imported)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        # Importing a.b.c runs a/__init__ and a/b/__init__ too; only a.b.c counts (every module would
        # import tracefix/__init__ otherwise).  A module from outside tracefix/ (tracefix.entries is
        # knowledge/, data only) is no edge.
        found.update(t for t in targets if t in known and t != name)
    return found


def _absolute(name: str, is_package: bool, module: Optional[str], level: int) -> Optional[str]:
    if level == 0:
        return module
    parts = name.split(".") if is_package else name.split(".")[:-1]
    if level > 1:
        parts = parts[:-(level - 1)]
    if not parts:
        return None
    return ".".join(parts + ([module] if module else []))


def import_graph() -> Dict[str, Set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _left_out(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in LEFT_OUT)


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One cycle as a path [a, b, ..., a], or None."""
    state: Dict[str, int] = {}      # 1: on the current path, 2: done
    stack: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def test_the_graph_is_read_as_described():
    graph = import_graph()
    assert "tracefix" in graph and "tracefix.cli" in graph
    assert "tracefix.cli" in graph["tracefix.__main__"]
    # a relative import and a function-local one are both edges
    assert "tracefix.record" in graph["tracefix.frames"]
    assert "tracefix.jupyter" in graph["tracefix"]


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_among_tracefix_modules():
    graph = {name: {t for t in targets if not _left_out(t)}
             for name, targets in import_graph().items() if not _left_out(name)}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_commands_do_not_import_the_command_line():
    graph = import_graph()
    assert "tracefix.cli" not in graph["tracefix.commands"]
    assert [m for m, targets in graph.items() if "tracefix.cli" in targets] == ["tracefix.__main__"]
