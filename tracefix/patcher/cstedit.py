"""libcst plumbing: parse one file, find a node by line/column, rewrite one node or one block."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple, Type, Union

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

NodeTest = Callable[[cst.CSTNode], bool]


class Source:
    """One parsed file (text with "\\n" endings) plus position and parent metadata."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.module = cst.parse_module(text)
        self.wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
        self.positions = self.wrapper.resolve(PositionProvider)
        self.parents = self.wrapper.resolve(ParentNodeProvider)

    @classmethod
    def parse(cls, text: str) -> Optional["Source"]:
        try:
            return cls(text)
        except (cst.ParserSyntaxError, RecursionError, ValueError):
            return None

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
        return [n for n, r in self.positions.items()
                if isinstance(n, types) and r.start.line <= line <= r.end.line and (test is None or test(n))]

    def all(self, types, test: Optional[NodeTest] = None) -> List[cst.CSTNode]:
        nodes = [n for n in self.positions if isinstance(n, types) and (test is None or test(n))]
        return sorted(nodes, key=lambda n: (self.positions[n].start.line, self.positions[n].start.column))

    def line_of(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.parents.get(node)

    def ancestors(self, node: cst.CSTNode):
        p = self.parents.get(node)
        while p is not None:
            yield p
            p = self.parents.get(p)

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
        return self.module.visit(_Rewriter({id(node): make})).code

    def edit_body(self, stmt: cst.CSTNode,
                  make: Callable[[List[cst.CSTNode], int], Sequence[cst.CSTNode]],
                  footer: Optional[Callable[[Sequence[cst.EmptyLine]], Sequence[cst.EmptyLine]]] = None) -> Optional[str]:
        """New module text with the block holding statement ``stmt`` rebuilt by ``make(body, index)``."""
        block = self.parents.get(stmt)
        if not isinstance(block, (cst.Module, cst.IndentedBlock)):
            return None
        index = next(i for i, s in enumerate(block.body) if s is stmt)

        def rebuild(updated: cst.CSTNode) -> cst.CSTNode:
            changes = {"body": list(make(list(updated.body), index))}  # type: ignore[attr-defined]
            if footer is not None:
                changes["footer"] = list(footer(updated.footer))  # type: ignore[attr-defined]
            return updated.with_changes(**changes)

        return self.replace(block, rebuild)


class _Rewriter(cst.CSTTransformer):
    def __init__(self, table: Dict[int, Callable[[cst.CSTNode], object]]) -> None:
        super().__init__()
        self.table = table

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        make = self.table.get(id(original_node))
        return updated_node if make is None else make(updated_node)


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
