"""Read and parse the user's Python files with the standard library only (``ast``, ``tokenize``).

Everything here degrades instead of raising: an unreadable, undecodable, huge or syntactically
broken file yields a :class:`SourceFile` without a tree and with ``error`` set.
"""
from __future__ import annotations

import ast
import bisect
import stat
import tokenize
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

MAX_BYTES = 2_000_000          # larger files are not parsed
MAX_CLOSURE = 300              # files followed through imports

FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPE_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)


def read_text(path: Path) -> Tuple[Optional[str], Optional[str]]:
    """(text, None) or (None, why).  Honours coding cookies and BOMs; newlines become '\\n'.

    A ``.ipynb`` file reads as its code cells joined into one module (:mod:`tracefix.notebook`).
    """
    if str(path).lower().endswith(".ipynb"):
        from tracefix.notebook import read_text as read_notebook
        return read_notebook(Path(path))
    try:
        st = Path(path).stat()
    except OSError as exc:
        return None, f"cannot read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return None, "not a regular file"
    if st.st_size > MAX_BYTES:
        return None, f"too large to analyse ({st.st_size // 1024} KiB)"
    try:
        with tokenize.open(str(path)) as f:
            text = f.read()
    except (SyntaxError, UnicodeDecodeError, LookupError):
        try:
            text = Path(path).read_bytes().decode("utf-8", "replace")
        except OSError as exc:
            return None, f"cannot read ({exc.strerror or exc})"
    except (OSError, ValueError) as exc:
        return None, f"cannot read ({getattr(exc, 'strerror', None) or exc})"
    return text.replace("\r\n", "\n").replace("\r", "\n"), None


def dotted(node: ast.AST) -> str:
    """'torch.nn.functional.relu' for a Name/Attribute chain, '' otherwise."""
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def last_name(node: ast.AST) -> str:
    """The final identifier of a Name/Attribute/Call chain ('opt' for self.opt, 'f' for a.f())."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def base_name(node: ast.AST) -> str:
    """The root variable of an expression chain: 'model' for model.to(dev).half()."""
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
            node = node.value
        elif isinstance(node, ast.Name):
            return node.id
        else:
            return ""


def const_str(node: Optional[ast.AST]) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def keyword(call: ast.Call, name: str) -> Optional[ast.keyword]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw
    return None


# The module-level statement spans of the last files parsed, by text: the patcher asks for them
# again (which lines a fix needs) and need not parse the file a second time.
_SPANS: Dict[str, Tuple[Tuple[int, int, bool], ...]] = {}
_SPANS_KEPT = 8


def _spans_of(tree: ast.Module) -> Tuple[Tuple[int, int, bool], ...]:
    out = []
    for st in tree.body:
        first = min([st.lineno, *(d.lineno for d in getattr(st, "decorator_list", ()))])
        out.append((first, st.end_lineno or st.lineno, isinstance(st, (*FUNC_TYPES, ast.ClassDef))))
    return tuple(out)


def remember_spans(text: str, spans: Tuple[Tuple[int, int, bool], ...]) -> None:
    if len(_SPANS) >= _SPANS_KEPT:
        _SPANS.pop(next(iter(_SPANS)))
    _SPANS[text] = spans


def module_spans(text: str) -> Optional[Tuple[Tuple[int, int, bool], ...]]:
    """(first line, last line, is a def or class) of each module-level statement of ``text``
    (decorators included); None when it does not parse."""
    got = _SPANS.get(text)
    if got is None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return None
        got = _spans_of(tree)
        remember_spans(text, got)
    return got


class SourceFile:
    """One parsed file: text, lines, tree (None when it cannot be parsed) and lookup helpers."""

    def __init__(self, rel: str, path: Path):
        self.rel = rel
        self.path = path
        self.error: Optional[str] = None
        self.tree: Optional[ast.Module] = None
        self._parents: Optional[Dict[int, ast.AST]] = None
        self._top_parents: Dict[int, Dict[int, ast.AST]] = {}
        self._top_spans: Optional[Tuple[List[int], List[int]]] = None
        self.spans: Tuple[Tuple[int, int, bool], ...] = ()   # see module_spans
        self._funcs: Optional[List[ast.AST]] = None
        self._imports: Optional[Dict[str, Tuple[str, Optional[str], int]]] = None
        self._own: Dict[int, List[ast.AST]] = {}
        self.memo: Dict[object, object] = {}      # per-file memo for callers' derived tables
        text, why = read_text(path)
        self.text = text or ""
        self.lines: List[str] = self.text.split("\n") if text is not None else []
        if text is None:
            self.error = why
            return
        try:
            self.tree = ast.parse(text, filename=rel)
            self.spans = _spans_of(self.tree)
            remember_spans(self.text, self.spans)
        except SyntaxError as exc:
            self.error = f"has a syntax error at line {exc.lineno}"
        except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
            self.error = f"cannot be parsed ({type(exc).__name__})"

    # --- structure ------------------------------------------------------------------------
    @property
    def parents(self) -> Dict[int, ast.AST]:
        """id(node) -> parent for the whole tree (one walk of every node; see :meth:`parent`)."""
        if self._parents is None:
            self._parents = {}
            if self.tree is not None:
                for node in ast.walk(self.tree):
                    for child in ast.iter_child_nodes(node):
                        self._parents[id(child)] = node
        return self._parents

    def _tops(self) -> Tuple[List[int], List[int]]:
        """First and last line of each module-level statement (decorators included), in order."""
        if self._top_spans is None:
            self._top_spans = ([first for first, _, _ in self.spans], [last for _, last, _ in self.spans])
        return self._top_spans

    def top_index(self, line: int) -> Optional[int]:
        """Index in the module body of the statement whose lines hold ``line`` (None: none)."""
        starts, ends = self._tops()
        i = bisect.bisect_right(starts, line) - 1
        return i if i >= 0 and line <= ends[i] else None

    def parent(self, node: ast.AST) -> Optional[ast.AST]:
        if self._parents is not None or self.tree is None:
            return self.parents.get(id(node))
        # A big file walks only the module-level statement that holds the node (by its line);
        # nodes without a line, or not found there, fall back to the whole tree.
        line = getattr(node, "lineno", None)
        i = self.top_index(line) if isinstance(line, int) else None
        if i is not None:
            table = self._top_parents.get(i)
            if table is None:
                top = self.tree.body[i]
                table = self._top_parents[i] = {id(top): self.tree}
                for n in ast.walk(top):
                    for child in ast.iter_child_nodes(n):
                        table[id(child)] = n
            got = table.get(id(node))
            if got is not None:
                return got
        return self.parents.get(id(node))

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        cur = self.parent(node)
        while cur is not None:
            yield cur
            cur = self.parent(cur)

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The innermost function (or the module) that contains node."""
        for anc in self.ancestors(node):
            if isinstance(anc, SCOPE_TYPES):
                return anc
        return self.tree  # type: ignore[return-value]

    def class_of(self, node: ast.AST) -> Optional[ast.ClassDef]:
        for anc in self.ancestors(node):
            if isinstance(anc, ast.ClassDef):
                return anc
        return None

    def functions(self) -> List[ast.AST]:
        if self._funcs is None:
            self._funcs = [n for n in ast.walk(self.tree) if isinstance(n, FUNC_TYPES)] if self.tree else []
        return self._funcs

    def scopes(self) -> List[ast.AST]:
        return ([self.tree] if self.tree is not None else []) + self.functions()

    def own(self, scope: ast.AST) -> List[ast.AST]:
        """Cached :func:`own_nodes` of a scope of this file."""
        key = id(scope)
        if key not in self._own:
            self._own[key] = list(own_nodes(scope))
        return self._own[key]

    def segment(self, node: ast.AST) -> Optional[str]:
        """``ast.get_source_segment`` from the lines already split (that splits the whole text)."""
        try:
            first, last = node.lineno, node.end_lineno  # type: ignore[attr-defined]
            start, end = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        except AttributeError:
            return None
        if "\r" in self.text or first is None or last is None or end is None:
            return ast.get_source_segment(self.text, node)
        lines = [ln.encode("utf-8") for ln in self.lines[first - 1:last]]
        if len(lines) != last - first + 1:
            return None
        if first == last:
            return lines[0][start:end].decode("utf-8", "replace")
        lines[0], lines[-1] = lines[0][start:], lines[-1][:end]
        return b"\n".join(lines).decode("utf-8", "replace")

    def brief(self, node: ast.AST, width: int = 60) -> str:
        """The node's source on one line, cut at ``width`` characters (for reasons and notes)."""
        text = " ".join((self.segment(node) or "").split())
        return text if len(text) <= width else text[:width - 3] + "..."

    def line_text(self, line: int) -> str:
        return self.lines[line - 1] if 1 <= line <= len(self.lines) else ""

    def stmt_at(self, line: int) -> Optional[ast.stmt]:
        """The innermost statement whose span covers line."""
        if self.tree is None:
            return None
        best: Optional[ast.stmt] = None
        body: List[ast.stmt] = list(self.tree.body)
        while body:
            nxt: List[ast.stmt] = []
            for st in body:
                end = getattr(st, "end_lineno", st.lineno) or st.lineno
                if st.lineno <= line <= end:
                    best = st
                    for fld in ("body", "orelse", "finalbody", "handlers", "cases"):
                        for sub in getattr(st, fld, []) or []:
                            if isinstance(sub, ast.stmt):
                                nxt.append(sub)
                            elif hasattr(sub, "body"):      # except handlers, match cases
                                nxt.extend(s for s in sub.body if isinstance(s, ast.stmt))
                    break
            body = nxt
        return best

    def top_level(self, name: str) -> Optional[ast.AST]:
        """A module-level def/class called name (the last one wins, as at run time)."""
        found = None
        if self.tree is not None:
            for st in self.tree.body:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and st.name == name:
                    found = st
        return found

    def classes(self, name: str) -> List[ast.ClassDef]:
        if self.tree is None:
            return []
        return [n for n in ast.walk(self.tree) if isinstance(n, ast.ClassDef) and n.name == name]

    def imports(self) -> Dict[str, Tuple[str, Optional[str], int]]:
        """local name -> (module, imported attribute or None, relative level)."""
        if self._imports is not None:
            return self._imports
        out: Dict[str, Tuple[str, Optional[str], int]] = {}
        self._imports = out
        if self.tree is None:
            return out
        starts, ends = self._tops()
        # Only module-level statements whose lines say "import" can hold an import statement.
        holders = [st for st, a, b in zip(self.tree.body, starts, ends)
                   if "\r" in self.text or any("import" in ln for ln in self.lines[a - 1:b])]
        for node in (n for st in holders for n in ast.walk(st)):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        out[a.asname] = (a.name, None, 0)
                    else:
                        out[a.name.split(".")[0]] = (a.name.split(".")[0], None, 0)
                        out[a.name] = (a.name, None, 0)
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.name == "*":
                        continue
                    out[a.asname or a.name] = (node.module or "", a.name, node.level or 0)
        return out


def param_names(fn: ast.AST) -> List[str]:
    """A function's parameter names, positional-only first, keyword-only last ([] for a non-function)."""
    a = getattr(fn, "args", None)
    return [] if a is None else [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]


def own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """Nodes of a function/module body, not descending into nested functions, lambdas or classes."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))


class Project:
    """The files under the root: parsed lazily, once each."""

    def __init__(self, index):
        self.index = index
        self._cache: Dict[str, SourceFile] = {}
        self.errors: Dict[str, str] = {}
        self._grep_cache: Dict[Tuple[str, ...], List[str]] = {}
        self._closure_cache: Dict[str, List[str]] = {}

    def source(self, rel: str) -> Optional[SourceFile]:
        if rel not in self._cache:
            if rel not in self.index.rel_set:
                return None
            path = self.index.abs_path(rel)
            if self.index.inside(path) is None:
                return None
            sf = SourceFile(rel, path)
            self._cache[rel] = sf
            if sf.error:
                self.errors[rel] = sf.error
        sf = self._cache[rel]
        return sf if sf.tree is not None else None

    def py_files(self, needles: Tuple[str, ...] = ()) -> List[str]:
        """All project .py files, or those whose raw bytes contain one of needles (cheap prefilter)."""
        key = tuple(needles)
        if key not in self._grep_cache:
            self._grep_cache[key] = self._py_files(key)
        return list(self._grep_cache[key])

    def _py_files(self, needles: Tuple[str, ...]) -> List[str]:
        out = []
        for rel in self.index.py_files():
            if needles:
                try:
                    path = self.index.inside(self.index.abs_path(rel))
                    if path is None:
                        continue        # a symlink out of the root, or gone
                    st = path.stat()
                    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
                        continue        # a FIFO would block, a device never ends
                    raw = path.read_bytes()
                except OSError:
                    continue
                if not any(n.encode() in raw for n in needles):
                    continue
            out.append(rel)
        return out

    def resolve_module(self, from_rel: str, module: str, level: int) -> Optional[str]:
        """The project file for an import seen in from_rel, or None (third-party, stdlib)."""
        here = from_rel.split("/")[:-1]
        mod_parts = [p for p in module.split(".") if p] if module else []
        bases: List[List[str]] = []
        if level > 0:
            if level - 1 > len(here):
                return None
            bases.append(here[: len(here) - (level - 1)])
        else:
            for i in range(len(here), -1, -1):   # script dir first, then its parents up to root
                bases.append(here[:i])
            bases.append(["src"])
        for base in bases:
            stem = base + mod_parts
            if not stem:
                continue
            for cand in ("/".join(stem) + ".py", "/".join(stem + ["__init__.py"])):
                if cand in self.index.rel_set:
                    return cand
        return None

    def imported_modules(self, rel: str) -> List[str]:
        sf = self.source(rel)
        if sf is None:
            return []
        out: List[str] = []
        for node in ast.walk(sf.tree):
            targets: List[Tuple[str, int]] = []
            if isinstance(node, ast.Import):
                targets = [(a.name, 0) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                targets = [(mod, node.level or 0)]
                targets += [((mod + "." + a.name) if mod else a.name, node.level or 0)
                            for a in node.names if a.name != "*"]
            for mod, level in targets:
                found = self.resolve_module(rel, mod, level)
                if found and found != rel and found not in out:
                    out.append(found)
        return out

    def closure(self, rel: str) -> List[str]:
        """rel and the project files it imports, transitively (breadth first, bounded)."""
        if rel in self._closure_cache:
            return list(self._closure_cache[rel])
        seen = [rel]
        i = 0
        while i < len(seen) and len(seen) < MAX_CLOSURE:
            for dep in self.imported_modules(seen[i]):
                if dep not in seen:
                    seen.append(dep)
            i += 1
        self._closure_cache[rel] = seen
        return list(seen)

    def lookup(self, rel: str, name: str, depth: int = 0) -> Optional[Tuple[SourceFile, ast.AST]]:
        """The def/class a name refers to at module level in rel (following project imports)."""
        sf = self.source(rel)
        if sf is None or depth > 4:
            return None
        node = sf.top_level(name)
        if node is not None:
            return sf, node
        imp = sf.imports().get(name)
        if imp is None:
            return None
        module, attr, level = imp
        if attr is None:
            return None
        target = self.resolve_module(rel, module, level)
        if target is not None and target != rel:
            found = self.lookup(target, attr, depth + 1)
            if found is not None:
                return found
        return None
