"""Generic walks over expressions: iterative post-order, the rewrite driver, substitution.

Everything here uses only ``children()``/``with_children()``, so it works for every node
kind, and nothing recurses in Python (deep expressions do not hit the recursion limit).
Memo tables are local to one call.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from ..debug import InternalError
from .expr import Expr, Op, TensorRead, Var
from .tensor import Operation, PlaceholderOp, Tensor

__all__ = ["post_order", "post_order_by", "rewrite", "fixed_point_rewrite", "substitute",
           "collect_vars", "collect_reads", "evaluate_bottom_up", "topo_sort_ops",
           "placeholders_of", "RuleTable", "for_ops"]

RewriteFn = Callable[[Expr], "Expr | None"]
F = TypeVar("F", bound=Callable[..., Any])
N = TypeVar("N")
K = TypeVar("K")
V = TypeVar("V")


def post_order_by(roots: Iterable[N], children: Callable[[N], Sequence[N]] | None = None
                  ) -> Iterator[N]:
    """Each distinct (by identity) node reachable from ``roots`` once, children before
    parents, the children of a node and the roots in order: the one depth-first walk of
    tex (expressions, operations, tensors), with an explicit stack. ``children`` defaults
    to the nodes' own ``children()`` (expressions)."""
    seen: set[int] = set()
    mark = seen.add
    kids_of: Callable[[N], Sequence[N]] = (lambda n: n.children()) if children is None \
        else children  # type: ignore[attr-defined]
    for root in roots:
        if id(root) in seen:
            continue
        mark(id(root))
        kids = kids_of(root)
        if not kids:
            yield root
            continue
        # each open node with the iterator over its children still to visit
        stack: list[tuple[N, Iterator[N]]] = [(root, iter(kids))]
        while stack:
            node, rest = stack[-1]
            for child in rest:
                if id(child) not in seen:
                    mark(id(child))
                    grandchildren = kids_of(child)
                    if grandchildren:
                        stack.append((child, iter(grandchildren)))
                        break
                    yield child
            else:
                stack.pop()
                yield node


def post_order(*roots: Expr) -> Iterator[Expr]:
    """Each distinct node reachable from ``roots`` once, children before parents."""
    return post_order_by(roots)


def evaluate_bottom_up(root: K, memo: dict[K, V], inputs: Callable[[K], Iterable[K]],
                       compute: Callable[[K], V]) -> V:
    """``memo[root]``, computing missing entries children-first with an explicit stack.

    ``inputs(n)`` lists what ``compute(n)`` reads from ``memo``; used by the bounds, linear
    forms and sort keys of ``tex.arith``, the lifted conditions of the building block (one
    memo per analysis, no recursion).
    """
    if root in memo:
        return memo[root]
    if all(k in memo for k in inputs(root)):  # the common case in a bottom-up pass
        value = memo[root] = compute(root)
        return value
    stack = [root]
    while stack:
        node = stack[-1]
        if node in memo:
            stack.pop()
            continue
        missing = [k for k in inputs(node) if k not in memo]
        if missing:
            stack.extend(missing)
            continue
        memo[node] = compute(node)
        stack.pop()
    return memo[root]


def rewrite(root: Expr, fn: RewriteFn, memo: dict[Expr, Expr] | None = None) -> Expr:
    """Rebuild ``root`` bottom-up: each node's children are rewritten first, then ``fn`` is
    offered the (rebuilt) node and may return a replacement (None keeps it).

    ``memo`` maps an original node to its result; subtrees already in it are not walked
    again, so one memo shared by many calls keeps the total work linear.
    """
    memo = {} if memo is None else memo
    if root in memo:
        return memo[root]
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if node in memo:
            continue
        if not expanded:
            stack.append((node, True))
            for child in reversed(node.children()):
                if child not in memo:
                    stack.append((child, False))
            continue
        kids = node.children()
        new = node.with_children([memo[k] for k in kids]) if kids else node
        out = fn(new)
        memo[node] = new if out is None else out
    return memo[root]


def for_ops(*ops: Op) -> Callable[[F], F]:
    """Declare the operators a rule looks at: a ``RuleTable`` offers it only nodes with
    those operators (a rule stays correct when called on others: it checks again)."""
    def mark(rule: F) -> F:
        rule.ops = frozenset(ops)  # type: ignore[attr-defined]
        return rule
    return mark


class RuleTable:
    """The one shape of every rule table in tex: node type -> rules tried in order.

    A rule marked with ``for_ops`` is offered only nodes with one of its operators. The
    table is indexed once, at construction, by (node type, operator): looking up a node's
    rules is one dict access. Calling the table on a node returns the first rule's result
    that differs from the node (None: no rule fired); extra arguments are passed to every
    rule (``table(node, analyzer)``). ``rules_for`` gives the rules themselves, for tables
    whose rules take something other than a node (``tex.ir.fold`` rewrites operands
    before the node is built)."""

    def __init__(self, name: str, rules: Mapping[type, Sequence[Callable[..., Any]]]) -> None:
        self.name = name
        self.rules = {k: tuple(v) for k, v in rules.items()}
        self._index: dict[tuple[type, Op | None], tuple[Callable[..., Any], ...]] = {
            (kind, op): tuple(r for r in rs if op in getattr(r, "ops", (op,)))
            for kind, rs in self.rules.items() for op in (*Op, None)}

    def rules_for(self, kind: type, op: Op | None = None) -> tuple[Callable[..., Any], ...]:
        """The rules a node of type ``kind`` with operator ``op`` meets, in order."""
        return self._index.get((kind, op), ())

    def __call__(self, node: Expr, *args: Any) -> Expr | None:
        for rule in self._index.get((type(node), getattr(node, "op", None)), ()):
            out = rule(node, *args)
            if out is not None and out is not node:
                return out
        return None

    def bound(self, *args: Any) -> BoundRules:
        """The table as a rewrite function ``node -> self(node, *args)``."""
        return BoundRules(self, args)

    @staticmethod
    def merged(name: str, tables: Iterable[RuleTable]) -> RuleTable:
        """One table trying, per node type, the rules of ``tables`` in order."""
        rules: dict[type, tuple[Callable[..., Any], ...]] = {}
        for t in tables:
            for kind, rs in t.rules.items():
                rules[kind] = rules.get(kind, ()) + rs
        return RuleTable(name, rules)

    def __repr__(self) -> str:
        return f"RuleTable({self.name}, {sum(map(len, self.rules.values()))} rules)"


class BoundRules:
    """A ``RuleTable`` with its extra arguments fixed: a rewrite function of one node."""

    __slots__ = ("table", "args", "_index")

    def __init__(self, table: RuleTable, args: tuple[Any, ...]) -> None:
        self.table, self.args = table, args
        self._index = table._index  # the same (immutable) index: one lookup per node

    @property
    def name(self) -> str:
        return self.table.name

    def __call__(self, node: Expr) -> Expr | None:
        args = self.args
        for rule in self._index.get((type(node), getattr(node, "op", None)), ()):
            out = rule(node, *args)
            if out is not None and out is not node:
                return out
        return None

    def __repr__(self) -> str:
        return f"BoundRules({self.table.name})"


def fixed_point_rewrite(root: Expr, rules: Callable[[Expr], Expr | None],
                        max_steps: int = 64, memo: dict[Expr, Expr] | None = None) -> Expr:
    """Apply ``rules`` bottom-up; a replaced node is itself rewritten again until no rule
    fires. ``memo`` (node -> result) may be shared by calls with the same rules, so that
    rewriting the sub-terms of one big expression one after another costs one pass.
    Raises InternalError on a runaway rule set."""
    if memo is None:
        memo = {}
    return rewrite(root, _Settle(rules, max_steps, memo), memo)


class _Settle:
    """``fixed_point_rewrite``'s rewrite of one node: ``rules`` until none fires, the
    sub-terms of each replacement normalized first. (An object, not a closure calling
    itself: that closure was a reference cycle, and every call left one, with its memo,
    for the cyclic collector: 2,700 of them per model gradient's build.)"""

    __slots__ = ("rules", "max_steps", "memo")

    def __init__(self, rules: Callable[[Expr], Expr | None], max_steps: int,
                 memo: dict[Expr, Expr]) -> None:
        self.rules, self.max_steps, self.memo = rules, max_steps, memo

    def __call__(self, node: Expr) -> Expr:
        current = node
        for _ in range(self.max_steps):
            out = self.rules(current)
            if out is None or out is current:
                return current
            # the replacement may hold new sub-terms: normalize them bottom-up first
            kids = out.children()
            current = out.with_children([rewrite(k, self, self.memo) for k in kids]) \
                if kids else out
        raise InternalError(f"rule set did not reach a fixed point in {self.max_steps} steps",
                            node)


def substitute(root: Expr, mapping: Mapping[Expr, Expr]) -> Expr:
    """``root`` with every occurrence of a key (usually a Var) replaced by its value."""
    if not mapping:
        return root
    return rewrite(root, lambda n: mapping.get(n))


def collect_vars(*roots: Expr) -> list[Var]:
    """The variables in the expressions, in order of first appearance."""
    return [n for n in post_order(*roots) if isinstance(n, Var)]


def collect_reads(*roots: Expr) -> list[TensorRead]:
    """Every distinct tensor read in the expressions."""
    return [n for n in post_order(*roots) if isinstance(n, TensorRead)]


def topo_sort_ops(tensors: Iterable[Tensor]) -> list[Operation]:
    """Operations the tensors depend on (themselves included), producers first.
    Iterative; the order is deterministic (depth-first in input order)."""
    roots = []
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"expected a Tensor, got {type(t).__name__} {t!r}")
        roots.append(t.op)
    return list(post_order_by(roots, _producers))


def _producers(op: Operation) -> list[Operation]:
    return [t.op for t in op.input_tensors]


def placeholders_of(tensors: Iterable[Tensor]) -> list[Tensor]:
    """The placeholders the tensors depend on, in creation order (ties, which only
    placeholders built by a copy can have, in ``topo_sort_ops`` order): the default
    arguments of a built function, and the feeds of a gradient program."""
    ops = topo_sort_ops(tensors)
    found = [op for op in ops if isinstance(op, PlaceholderOp)]
    return [op.output(0) for op in sorted(found, key=lambda op: op.seq)]
