"""Effective bodies: a stage's expressions with the reads of inlined stages replaced by
those stages' bodies. Shared by lowering (which emits them) and the auto-scheduler (which
reads their index maps).

The expansion is linear in the size of the result's DAG: a read ``X[idx]`` of an inlined
stage is replaced by X's own (small) body with its axes substituted by ``idx``, and that
instance is expanded in turn, iteratively. Every node's expansion depends only on the node
(its indices are concrete), so one memo serves every call; shared sub-expressions stay
shared (nodes are interned) and an inlined chain of any length never recurses in Python.
"""
from __future__ import annotations

from collections.abc import Callable

from ..ir import fold
from ..ir.expr import Expr, TensorRead
from ..ir.tensor import ComputeOp, Operation
from ..ir.visit import substitute
from .schedule import Schedule, Stage

__all__ = ["Inliner"]


class Inliner:
    """Expands reads of the stages that are inlined in ``sch`` when it is built.

    The memo is valid while the set of inlined stages only grows by stages none of whose
    reads were kept in an earlier expansion (``add`` checks, and starts over otherwise).
    """

    def __init__(self, sch: Schedule,
                 wrap: Callable[[TensorRead, Expr], Expr] | None = None) -> None:
        # wrap(read, value): what replaces ``read`` given its inlined ``value`` (lowering
        # puts the read's bounds checks around it); the value itself by default
        self.wrap = wrap
        self.sch = sch
        # node -> the node with every inlined read expanded (expanded nodes map to themselves)
        self.memo: dict[Expr, Expr] = {}
        # operations whose reads some memo entry keeps as reads
        self.kept: set[Operation] = set()

    def add(self, stage: Stage) -> None:
        """Count ``stage`` (just marked ``compute_inline``) as inlined from now on."""
        if stage.op in self.kept:  # some expansion kept its reads: it is stale
            self.memo.clear()
            self.kept.clear()

    def _inlined(self, op: Operation) -> bool:
        """Whether ``op`` is the operation of a stage computed inline, asked of the
        schedule when a read of it is met (a set built up front cost a pass over every
        stage per Inliner, and the auto-scheduler's padding and phase steps make one per
        reduction: quadratic in a program of many reductions)."""
        st = self.sch.stage_map.get(op)
        return st is not None and st.attach_type == "inline" and st.op is op

    def _instance(self, read: TensorRead) -> Expr:
        """The inlined stage's body at the point ``read`` names (not yet expanded)."""
        op = read.tensor.op
        assert isinstance(op, ComputeOp)  # keys of inline_ops are compute ops
        body = op.body[0]  # inlined stages have one output
        # an index of another dtype (int64 data) is narrowed: in range it fits
        mapping = {iv.var: ix if ix.dtype is iv.var.dtype else fold.cast(iv.var.dtype, ix)
                   for iv, ix in zip(op.axis, read.indices) if iv.var is not ix}
        return substitute(body, mapping)

    def _wrapped(self, read: TensorRead, value: Expr) -> Expr:
        """What replaces ``read`` once its inlined instance expanded to ``value``."""
        return value if self.wrap is None else self.wrap(read, value)

    def expand(self, e: Expr) -> Expr:
        """``e`` with every read of an inlined stage replaced, transitively."""
        memo = self.memo
        if e in memo:
            return memo[e]
        # (node, state, extra): 0 visit the children, 1 rebuild the node, 2 the node is an
        # inlined read whose instance has been expanded (extra: the instance and the read
        # with its indices expanded)
        stack: list[tuple] = [(e, 0, None)]
        while stack:
            node, state, extra = stack.pop()
            if state == 2:
                inst, read = extra
                memo[node] = self._wrapped(read, memo[inst])
                continue
            if node in memo:
                continue
            if state == 0:
                stack.append((node, 1, None))
                for child in reversed(node.children()):
                    if child not in memo:
                        stack.append((child, 0, None))
                continue
            kids = node.children()
            new = node.with_children([memo[k] for k in kids]) if kids else node
            if isinstance(new, TensorRead):
                op = new.tensor.op
                if self._inlined(op):
                    inst = self._instance(new)
                    if inst in memo:
                        memo[node] = self._wrapped(new, memo[inst])
                    else:
                        stack.append((node, 2, (inst, new)))
                        stack.append((inst, 0, None))
                    continue
                self.kept.add(op)
            memo[node] = new
            memo[new] = new  # an expanded node expands to itself
        return memo[e]
