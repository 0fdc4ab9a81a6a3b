"""Generic walks over expressions: iterative post-order, the rewrite driver, substitution.

Everything here uses only ``children()``/``with_children()``, so it works for every node
kind, and nothing recurses in Python (deep expressions do not hit the recursion limit).
Memo tables are local to one call.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from ..debug import InternalError
from .expr import Expr, TensorRead, Var
from .tensor import ComputeOp, Operation, Tensor

__all__ = ["post_order", "rewrite", "fixed_point_rewrite", "substitute", "collect_vars",
           "collect_reads", "topo_sort_ops", "RuleSet"]

RewriteFn = Callable[[Expr], "Expr | None"]


def post_order(*roots: Expr) -> Iterator[Expr]:
    """Each distinct node reachable from ``roots`` once, children before parents."""
    seen: set[int] = set()
    for root in roots:
        if id(root) in seen:
            continue
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                yield node
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            for child in reversed(node.children()):
                if id(child) not in seen:
                    stack.append((child, False))


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


class RuleSet:
    """Named rewrite rules, indexed by node type so a node meets only its own rules."""

    def __init__(self, name: str, rules: Mapping[type, Sequence[RewriteFn]]) -> None:
        self.name = name
        self.rules = {k: tuple(v) for k, v in rules.items()}

    def __call__(self, node: Expr) -> Expr | None:
        for rule in self.rules.get(type(node), ()):
            out = rule(node)
            if out is not None and out is not node:
                return out
        return None

    def __repr__(self) -> str:
        return f"RuleSet({self.name}, {sum(map(len, self.rules.values()))} rules)"


def fixed_point_rewrite(root: Expr, rules: Callable[[Expr], Expr | None],
                        max_steps: int = 64, memo: dict[Expr, Expr] | None = None) -> Expr:
    """Apply ``rules`` bottom-up; a replaced node is itself rewritten again until no rule
    fires. ``memo`` (node -> result) may be shared by calls with the same rules, so that
    rewriting the sub-terms of one big expression one after another costs one pass.
    Raises InternalError on a runaway rule set."""
    if memo is None:
        memo = {}

    def settle(node: Expr) -> Expr:
        current = node
        for _ in range(max_steps):
            out = rules(current)
            if out is None or out is current:
                return current
            # the replacement may hold new sub-terms: normalize them bottom-up first
            kids = out.children()
            current = out.with_children([rewrite(k, settle, memo) for k in kids]) if kids else out
        raise InternalError(f"rule set did not reach a fixed point in {max_steps} steps", node)

    return rewrite(root, settle, memo)


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
    order: list[Operation] = []
    done: set[int] = set()
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"expected a Tensor, got {type(t).__name__} {t!r}")
        stack: list[tuple[Operation, bool]] = [(t.op, False)]
        while stack:
            op, expanded = stack.pop()
            if expanded:
                if id(op) not in done:
                    done.add(id(op))
                    order.append(op)
                continue
            if id(op) in done:
                continue
            stack.append((op, True))
            inputs = op.input_tensors if isinstance(op, ComputeOp) else []
            for inp in reversed(inputs):
                if id(inp.op) not in done:
                    stack.append((inp.op, False))
    return order
