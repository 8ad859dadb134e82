"""libcst plumbing: parse one file, find a node by line/column, rewrite one node or one block."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import (AbstractSet, Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple,
                    Type, Union)

import libcst as cst
from libcst._position import CodePosition, CodeRange
from libcst.metadata.position_provider import NEWLINE_RE, PositionProvidingCodegenState

from tracefix.patcher.text import changed_run
from tracefix.pysource import module_spans

NodeTest = Callable[[cst.CSTNode], bool]

# A file this long (lines) whose functions and classes away from the lines a fix needs span at
# least this many lines is parsed without them (see Source): libcst parses ~10k lines a second.
PARTIAL_MIN_LINES = 400


class NeedWhole(BaseException):
    """A question about a file parsed in part that only the whole file answers: parse it whole and
    ask again.  A BaseException, so that no fixer's ``except Exception`` turns it into an answer."""


class Source:
    """One parsed file (text with "\\n" endings) plus position and parent metadata.

    The metadata is what libcst's ``PositionProvider`` and ``ParentNodeProvider`` give, computed by
    the codegen pass ``PositionProvider`` makes, instrumented to record parents as well, and only
    for the top-level statements that a question needs (all of them when asked for everything).
    Edits rebuild only the path from the edited node up to the module and reuse the code of the
    top-level statements they leave alone.

    Parsed with ``keep`` (the lines a fix is about), a long file is parsed in part: every
    module-level function and class holding none of those lines is read as a string literal over
    its lines, so every line keeps its number.  Questions the kept statements answer work as usual;
    a question about the whole module (every node of a kind, a line left out, the module's own
    body) raises :class:`NeedWhole`, and edits are spliced back into the whole text.
    """

    def __init__(self, text: str, keep: Optional[Iterable[int]] = None) -> None:
        self.text = text
        self.elided: FrozenSet[int] = frozenset()
        parsed = text
        if keep is not None:
            partial = _elide(text, set(keep))
            if partial is not None:
                parsed, self.elided = partial
        self.parsed = parsed
        self.module = cst.parse_module(parsed)
        self._meta: Optional[_Metadata] = None

    @property
    def meta(self) -> "_Metadata":
        if self._meta is None:
            self._meta = _Metadata(self.module, lazy="\r" not in self.text, partial=bool(self.elided))
        return self._meta

    @property
    def positions(self) -> Mapping[cst.CSTNode, CodeRange]:
        return self.meta.positions

    @property
    def parents(self) -> Mapping[cst.CSTNode, cst.CSTNode]:
        return self.meta.parents

    @classmethod
    def parse(cls, text: str, keep: Optional[Iterable[int]] = None) -> Optional["Source"]:
        try:
            return cls(text, keep)
        except (cst.ParserSyntaxError, RecursionError, ValueError):
            return None

    @property
    def partial(self) -> bool:
        return bool(self.elided)

    # -- finding ------------------------------------------------------------------------------
    def find(self, line: int, col: int, types: Union[Type[cst.CSTNode], Tuple[type, ...]],
             test: Optional[NodeTest] = None) -> Optional[cst.CSTNode]:
        """The node of ``types`` passing ``test`` at ``line`` (and ``col`` when several)."""
        found = self.all_on_line(line, types, test)
        if not found:
            return None

        def rank(node: cst.CSTNode) -> Tuple[int, int, int]:
            r = self.positions[node]
            exact = 0 if (r.start.line, r.start.column) == (line, col) else 1
            starts = 0 if r.start.line == line else 1
            inside = 0 if _contains(r, line, col) else 1
            span = (r.end.line - r.start.line) * 10000 + (r.end.column - r.start.column)
            return (exact, starts, inside, span)  # type: ignore[return-value]

        return min(found, key=rank)

    def all_on_line(self, line: int, types, test: Optional[NodeTest] = None) -> List[cst.CSTNode]:
        if line in self.elided:
            raise NeedWhole(line)
        return [n for n, r in self.meta.items_near(line)
                if isinstance(n, types) and r.start.line <= line <= r.end.line and (test is None or test(n))]

    def in_statement_of(self, node: cst.CSTNode, types) -> List[cst.CSTNode]:
        """Nodes of ``types`` in the top-level statement holding ``node`` (a superset of its
        descendants; every node of the file when ``node`` is the module), in file order."""
        return [n for n in self.meta.nodes_with(node) if isinstance(n, types)]

    def all(self, types, test: Optional[NodeTest] = None) -> List[cst.CSTNode]:
        nodes = [n for n in self.positions if isinstance(n, types) and (test is None or test(n))]
        return sorted(nodes, key=lambda n: (self.positions[n].start.line, self.positions[n].start.column))

    def line_of(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        got = self.parents.get(node)
        if got is self.module and self.elided:  # its body lacks the statements left out
            raise NeedWhole(node)
        return got

    def ancestors(self, node: cst.CSTNode):
        p = self.parents.get(node)
        while p is not None:
            yield p
            p = self.parents.get(p)

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The function or lambda whose body holds ``node``, or the module."""
        return next((a for a in self.ancestors(node) if isinstance(a, (cst.FunctionDef, cst.Lambda))), self.module)

    def statement_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The SimpleStatementLine / SimpleStatementSuite / compound statement holding ``node``."""
        cur: Optional[cst.CSTNode] = node
        while cur is not None and not isinstance(cur, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            cur = self.parents.get(cur)
        return cur

    def small_statement_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        cur: Optional[cst.CSTNode] = node
        while cur is not None and not isinstance(cur, cst.BaseSmallStatement):
            cur = self.parents.get(cur)
        return cur

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    # -- rewriting ----------------------------------------------------------------------------
    def replace(self, node: cst.CSTNode, make: Callable[[cst.CSTNode], object]) -> str:
        """New module text with ``node`` replaced by ``make(updated_node)``."""
        new = self._replace_tree(node, make)
        if new is None:  # not reachable by parent links (or make removed/flattened the node)
            new = self.module.visit(_Rewriter({id(node): make}))
            return _Code(self._splice(new.code), new if self.elided else None)
        return _Code(self._splice(self._code(new)), new)

    def _splice(self, code: str) -> str:
        """``code`` (the parsed text, edited) as an edit of the whole text: the one run of lines
        that differs must hold no line left out."""
        if not self.elided:
            return code
        old, new = self.parsed.split("\n"), code.split("\n")
        a, end, new_end = changed_run(old, new)
        if any(line in self.elided for line in range(a + 1, end + 1)):
            raise NeedWhole(a + 1)
        whole = self.text.split("\n")      # as many lines as the parsed text
        return "\n".join(whole[:a] + new[a:new_end] + whole[end:])

    def _replace_tree(self, node: cst.CSTNode, make: Callable[[cst.CSTNode], object]) -> Optional[cst.Module]:
        """The module with ``node`` replaced, rebuilding only its ancestors (None: use the visitor)."""
        parents = self.parents
        if node is not self.module and node not in parents:
            return None
        new = make(node)
        if not isinstance(new, cst.CSTNode):
            return None
        child, cur = node, parents.get(node)
        while cur is not None:
            rebuilt = _with_child(cur, child, new)
            if rebuilt is None:
                return None
            child, new, cur = cur, rebuilt, parents.get(cur)
        if child is not self.module or not isinstance(new, cst.Module):
            return None
        return new

    def _code(self, new: cst.Module) -> str:
        """``new.code``, reusing the recorded code of the original top-level nodes it still holds."""
        old = self.module
        if not (new.has_trailing_newline and new.default_indent == old.default_indent
                and new.default_newline == old.default_newline) or not self.meta.chunks:
            return new.code
        parts = []
        for child in (*new.header, *new.body, *new.footer):
            hit = self.meta.chunks.get(id(child))
            parts.append(hit[1] if hit is not None and hit[0] is child else new.code_for_node(child))
        code = "".join(parts)
        return code if code else new.code

    def edit_body(self, stmt: cst.CSTNode,
                  make: Callable[[List[cst.CSTNode], int], Sequence[cst.CSTNode]],
                  footer: Optional[Callable[[Sequence[cst.EmptyLine]], Sequence[cst.EmptyLine]]] = None) -> Optional[str]:
        """New module text with the block holding statement ``stmt`` rebuilt by ``make(body, index)``."""
        block = self.parents.get(stmt)
        if not isinstance(block, (cst.Module, cst.IndentedBlock)):
            return None
        if block is self.module and self.elided:
            raise NeedWhole(stmt)
        index = next(i for i, s in enumerate(block.body) if s is stmt)

        def rebuild(updated: cst.CSTNode) -> cst.CSTNode:
            changes = {"body": list(make(list(updated.body), index))}  # type: ignore[attr-defined]
            if footer is not None:
                changes["footer"] = list(footer(updated.footer))  # type: ignore[attr-defined]
            return updated.with_changes(**changes)

        return self.replace(block, rebuild)


def _elide(text: str, keep: AbstractSet[int]) -> Optional[Tuple[str, FrozenSet[int]]]:
    """``text`` with each module-level def and class that holds no line of ``keep`` replaced by a
    string literal over the same lines (one token to parse and print; every line keeps its
    number), and the numbers of those lines; None when that would not save much."""
    if text.count("\n") < PARTIAL_MIN_LINES or "\r" in text or "\f" in text:
        return None
    tops = module_spans(text)
    spans = [(first, last) for first, last, is_def in tops or () if is_def and last > first
             and not any(first <= k <= last for k in keep)]
    if sum(last - first + 1 for first, last in spans) < PARTIAL_MIN_LINES // 2:
        return None
    lines = text.split("\n")
    blank = set()
    for first, last in spans:
        lines[first - 1:last] = ['"""', *[""] * (last - first - 1), '"""']
        blank.update(range(first, last + 1))
    return "\n".join(lines), frozenset(blank)


class _Rewriter(cst.CSTTransformer):
    def __init__(self, table: Dict[int, Callable[[cst.CSTNode], object]]) -> None:
        super().__init__()
        self.table = table

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        make = self.table.get(id(original_node))
        return updated_node if make is None else make(updated_node)


class _Code(str):
    """Module text that remembers the tree it was generated from (lets ensure_torch skip a parse)."""

    module: Optional[cst.Module]

    def __new__(cls, text: str, module: Optional[cst.Module]) -> "_Code":
        self = super().__new__(cls, text)
        self.module = module
        return self


def _with_child(parent: cst.CSTNode, old: cst.CSTNode, new: cst.CSTNode) -> Optional[cst.CSTNode]:
    """``parent`` with its child ``old`` (by identity) replaced by ``new``; None if not found."""
    for f in dataclasses.fields(parent):
        value = getattr(parent, f.name)
        if value is old:
            return parent.with_changes(**{f.name: new})
        if isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                if item is old:
                    items = list(value)
                    items[i] = new
                    return parent.with_changes(**{f.name: type(value)(items) if isinstance(value, tuple) else items})
    return None


class _Provider:
    """Stands in for PositionProvider while its codegen state fills ``_computed``."""

    def __init__(self) -> None:
        self._computed: Dict[cst.CSTNode, CodeRange] = {}


class _MetadataState(PositionProvidingCodegenState):
    """PositionProvider's codegen state, also recording parents and the top-level nodes' code.

    Run over the module, or over one top-level node from its start (``line``, ``column``)."""

    def __init__(self, module: cst.Module, line: int = 1, column: int = 0, top: bool = False) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline,
                         provider=_Provider())
        self.line, self.column = line, column
        self.module = module
        self.path: List[cst.CSTNode] = [module] if top else []
        self.parent_of: Dict[cst.CSTNode, cst.CSTNode] = {}
        self.chunks: Dict[int, Tuple[cst.CSTNode, str]] = {}
        self.chunk_start = 0
        self.case_children: List[Tuple[cst.CSTNode, cst.CSTNode]] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        path = self.path
        if path:
            parent = self.parent_of[node] = path[-1]
            if len(path) == 1:
                self.chunk_start = len(self.tokens)
            elif type(parent) is cst.MatchCase:
                self.case_children.append((parent, node))
        path.append(node)
        super().before_codegen(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        super().after_codegen(node)
        path = self.path
        path.pop()
        if len(path) == 1 and path[0] is self.module:
            self.chunks[id(node)] = (node, "".join(self.tokens[self.chunk_start:]))

    def parents(self) -> Dict[cst.CSTNode, cst.CSTNode]:
        """``parent_of``, where MatchCase (whose codegen and children differ: whitespace around a
        missing guard, before the colon) gets ParentNodeProvider's answer, its visitors' children."""
        parents = self.parent_of
        for _case, node in self.case_children:
            del parents[node]
        for case in {id(case): case for case, _ in self.case_children}.values():
            for child in case.children:
                parents[child] = case
        return parents


class _Metadata:
    """Positions and parents of one module, computed one top-level statement at a time.

    Every top-level node's code is generated once (plain codegen, cheap) to know the line and
    column it starts at; the instrumented pass then runs over a top-level node only when a question
    needs it.  A node's range lies within its top-level node's lines, so a question about one line
    needs the one or two statements whose lines include it.  The answers are those of a pass over
    the whole module; iterating the positions computes every statement first, in file order."""

    def __init__(self, module: cst.Module, lazy: bool = True, partial: bool = False) -> None:
        self.module = module
        self.partial = partial  # every node means the whole file's: complete() cannot answer
        self.known: Dict[cst.CSTNode, CodeRange] = {}
        self.par: Dict[cst.CSTNode, cst.CSTNode] = {}
        self.chunks: Dict[int, Tuple[cst.CSTNode, str]] = {}
        self.kids: List[cst.CSTNode] = [*module.header, *module.body, *module.footer]
        self.full = not (lazy and self.kids)
        if self.full:  # "\r" in the text (newline counting by token matters) or an empty module
            state = _MetadataState(module)
            module._codegen(state)
            self.known, self.par, self.chunks = state.provider._computed, state.parents(), state.chunks
            self.order: List[Dict[cst.CSTNode, CodeRange]] = [self.known]
            self.positions: Mapping = self.known
            self.parents: Mapping = self.par
            return
        self.starts: List[Tuple[int, int]] = []
        line, column = 1, 0
        for kid in self.kids:
            code = module.code_for_node(kid)
            self.chunks[id(kid)] = (kid, code)
            self.starts.append((line, column))
            segments = NEWLINE_RE.split(code)
            if len(segments) == 1:
                column += len(code)
            else:
                line += len(segments) - 1
                column = len(segments[-1])
        self.starts.append((line, column))
        # the module's own range, as the whole-module pass records it (last, after its children)
        self.module_range = CodeRange(CodePosition(1, 0), CodePosition(line, column))
        self.index = {id(kid): i for i, kid in enumerate(self.kids)}
        self.done: List[Optional[Dict[cst.CSTNode, CodeRange]]] = [None] * len(self.kids)
        self.positions = _Positions(self)
        self.parents = _Parents(self)

    def chunk(self, i: int) -> Dict[cst.CSTNode, CodeRange]:
        got = self.done[i]
        if got is None:
            line, column = self.starts[i]
            state = _MetadataState(self.module, line, column, top=True)
            self.kids[i]._codegen(state)
            got = self.done[i] = state.provider._computed
            self.known.update(got)
            self.par.update(state.parents())
        return got

    def complete(self) -> None:
        if self.partial:
            raise NeedWhole(self.module)
        if not self.full:
            for i in range(len(self.kids)):
                self.chunk(i)
            known: Dict[cst.CSTNode, CodeRange] = {}
            for part in self.done:
                known.update(part)  # type: ignore[arg-type]
            known[self.module] = self.module_range
            self.known = known
            self.order = [known]
            self.positions, self.parents = known, self.par  # plain dicts from now on
            self.full = True

    def items_near(self, line: int):
        """(node, range) of every node whose range may include ``line``, in file order (and more)."""
        if self.full:
            for part in self.order:
                yield from part.items()
            return
        for i in range(len(self.kids)):
            if self.starts[i][0] <= line <= self.starts[i + 1][0]:
                yield from self.chunk(i).items()
        yield self.module, self.module_range

    def nodes_with(self, node: cst.CSTNode):
        """Every node in the top-level node holding ``node`` (every node, for the module)."""
        top = node
        while not self.full and top is not self.module:
            up = self.parents.get(top)
            if up is None or up is self.module:
                break
            top = up
        i = None if self.full else self.index.get(id(top))
        if i is None or self.kids[i] is not top:
            self.complete()
            return [n for part in self.order for n in part]
        return list(self.chunk(i))


class _Positions(Mapping):
    def __init__(self, meta: _Metadata) -> None:
        self.meta = meta

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        meta = self.meta
        got = meta.known.get(node)
        if got is not None:
            return got
        if node is meta.module and not meta.full:
            return meta.module_range
        meta.complete()
        return meta.known[node]

    def __iter__(self):
        self.meta.complete()
        return (n for part in self.meta.order for n in part)

    def __len__(self) -> int:
        self.meta.complete()
        return len(self.meta.known)


class _Parents(Mapping):
    def __init__(self, meta: _Metadata) -> None:
        self.meta = meta

    def __getitem__(self, node: cst.CSTNode) -> cst.CSTNode:
        meta = self.meta
        got = meta.par.get(node)
        if got is not None:
            return got
        if node is meta.module:
            raise KeyError(node)
        meta.complete()
        return meta.par[node]

    def __iter__(self):
        self.meta.complete()
        return iter(self.meta.par)

    def __len__(self) -> int:
        self.meta.complete()
        return len(self.meta.par)


def _contains(r, line: int, col: int) -> bool:
    after_start = (line, col) >= (r.start.line, r.start.column)
    before_end = (line, col) < (r.end.line, r.end.column)
    return after_start and before_end


# -- small node helpers ------------------------------------------------------------------------
def dotted(node: Optional[cst.CSTNode]) -> str:
    """"torch.autograd.grad" for Name/Attribute chains; "" otherwise."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        left = dotted(node.value)
        return f"{left}.{node.attr.value}" if left else ""
    return ""


def method_name(call: cst.CSTNode) -> str:
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    return ""


def positional(call: cst.Call) -> List[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def kwarg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(value=value, keyword=cst.Name(name),
                   equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                         whitespace_after=cst.SimpleWhitespace("")))


def add_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """Append ``arg``; a multi-line call gets it on its own line, like the others."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=[arg])
    last = args[-1]
    if last.comma is cst.MaybeSentinel.DEFAULT:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(arg)
    else:  # trailing comma: the new argument takes it, the old last takes its neighbour's
        between = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) \
            else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        args[-1] = last.with_changes(comma=between)
        args.append(arg.with_changes(comma=last.comma))
    return call.with_changes(args=args)


def remove_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    args = list(call.args)
    i = next(k for k, a in enumerate(args) if a is arg)
    del args[i]
    if args and i == len(args):  # removed the last one: its comma (or none) moves to the new last
        args[-1] = args[-1].with_changes(comma=arg.comma)
    return call.with_changes(args=args)


ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString, cst.ConcatenatedString,
         cst.FormattedString, cst.Integer, cst.Float, cst.Imaginary, cst.List, cst.Dict, cst.Set,
         cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def parenthesize(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, ATOMS) or getattr(node, "lpar", None):
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def method_call(receiver: cst.BaseExpression, name: str, args: Sequence[cst.Arg] = ()) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=parenthesize(receiver), attr=cst.Name(name)), args=list(args))


def binds_torch(module: cst.Module) -> bool:
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        bound = alias.asname.name if alias.asname else alias.name
                        if dotted(bound) == "torch" or (alias.asname is None and dotted(alias.name).startswith("torch.")):
                            return True
    return False


def ensure_torch(text: str) -> str:
    """Add ``import torch`` after the module's imports when the name is not bound."""
    built = getattr(text, "module", None)
    if built is not None and binds_torch(built):  # text from Source.replace: its tree, no new parse
        return text
    module = cst.parse_module(text)
    if binds_torch(module):
        return text
    body = list(module.body)
    at = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
            at = i + 1
        elif i == 0 and isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr) \
                and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            at = 1  # after the docstring
    body.insert(at, cst.parse_statement("import torch\n", config=module.config_for_parsing))
    return module.with_changes(body=body).code
