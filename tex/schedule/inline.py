"""Effective bodies: a stage's expressions with the reads of inlined stages replaced by
those stages' bodies. Shared by lowering (which emits them) and the auto-scheduler (which
reads their index maps)."""
from __future__ import annotations

from collections.abc import Callable

from ..ir import fold
from ..ir.expr import Expr, TensorRead
from ..ir.tensor import ComputeOp
from ..ir.visit import rewrite, substitute
from .schedule import Schedule, Stage

__all__ = ["Inliner"]


class Inliner:
    """Expands reads of the stages that are inlined in ``sch`` when it is built."""

    def __init__(self, sch: Schedule,
                 wrap: Callable[[TensorRead, Expr], Expr] | None = None) -> None:
        # wrap(read, value): what replaces ``read`` given its inlined ``value`` (lowering
        # puts the read's bounds checks around it); the value itself by default
        self.wrap = wrap
        self.inline_ops: dict[ComputeOp, Stage] = {
            st.op: st for st in sch.stages if st.attach_type == "inline"}
        self.memo: dict[Expr, Expr] = {}
        self.expanded: dict[ComputeOp, Expr] = {}

    def _fn(self, node: Expr) -> Expr | None:
        if isinstance(node, TensorRead) and node.tensor.op in self.inline_ops:
            op = node.tensor.op
            assert isinstance(op, ComputeOp)  # keys of inline_ops are compute ops
            body = self.expanded.get(op)
            if body is None:
                body = self.expand(op.body[0])  # inlined stages have one output
                self.expanded[op] = body
            # an index of another dtype (int64 data) is narrowed: in range it fits
            value = substitute(body, {iv.var: ix if ix.dtype is iv.var.dtype else
                                      fold.cast(iv.var.dtype, ix)
                                      for iv, ix in zip(op.axis, node.indices)})
            return value if self.wrap is None else self.wrap(node, value)
        return None

    def expand(self, e: Expr) -> Expr:
        """``e`` with every read of an inlined stage replaced, transitively."""
        # iterate until no inlined read remains (an inlined body may read another one)
        while True:
            new = rewrite(e, self._fn, self.memo)
            if new is e:
                return e
            e = new
