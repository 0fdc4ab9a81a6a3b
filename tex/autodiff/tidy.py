"""Tidying a gradient program: inline the gradient tensors a hand-written gradient would
not hold.

Reverse and forward mode build one tensor per edge and one per sum of contributions.
Elementwise gradient tensors that are cheap (``is_cheap``: small, with one read of an
indexed float tensor, 0-d reads being constants: a read, a gated or scaled read) or read by
a single elementwise gradient tensor are inlined into their readers;
the others are rebuilt over the survivors. Only tensors the differentiation ``created``
are touched: forward tensors and the head never are. The walk is iterative and an inlined
tensor's body is expanded once (shared memo), so a chain of n inlined tensors costs O(n).
"""
from __future__ import annotations

from collections.abc import Collection, Sequence

from ..ir.expr import Expr, Reduce, TensorRead
from ..ir.tensor import ComputeOp, ExternOp, Operation, ScanOp, Tensor
from ..ir.verify import check_compute_body
from ..ir.visit import post_order_by, substitute
from .builders import is_cheap, new_axes

__all__ = ["tidy", "inline_reads"]


def _elementwise(t: Tensor) -> bool:
    op = t.op
    return isinstance(op, ComputeOp) and op.num_outputs == 1 and \
        not isinstance(op.body[0], Reduce)


def tidy(roots: Sequence[Tensor], keep: Collection[Tensor],
         created: Collection[Tensor]) -> dict[Tensor, Tensor]:
    """The new version of every rebuilt tensor reachable from ``roots``: gradient tensors
    (those ``created``) that are cheap or used once by an elementwise gradient tensor are
    inlined into their readers, except those in ``keep`` (the results), and the readers
    rebuilt. A tensor missing from the map is unchanged."""
    roots = list(dict.fromkeys(roots))
    # gradient ops reachable from the roots, producers first
    order = list(post_order_by([t for t in roots if t in created],
                               lambda t: [d for d in t.op.input_tensors if d in created]))
    users: dict[Tensor, list[Tensor]] = {}
    for t in order:
        for d in t.op.input_tensors:
            users.setdefault(d, []).append(t)
    keep = set(keep)
    inline: set[Tensor] = set()
    for t in order:
        if t in keep or not _elementwise(t):
            continue
        us = users.get(t, [])
        if any(isinstance(u.op, (ExternOp, ScanOp)) for u in us):
            continue  # an extern call or a scan's steps read it from memory
        if is_cheap(t) or (len(us) == 1 and _elementwise(us[0])):
            inline.add(t)
    # an inlined tensor is rebuilt only when the result names it (a root); its readers
    # expand its original body, so a chain of n inlined tensors costs O(n), not O(n^2)
    roots_set = set(roots)
    new: dict[Tensor, Tensor] = {}
    rebuilt: dict[Operation, Operation] = {}  # one new op for all outputs of a tuple op
    memo: dict[Expr, Expr] = {}
    for t in order:
        op = t.op
        if t in inline and t not in roots_set:
            continue
        if not any(d in inline or d in new for d in op.input_tensors):
            new[t] = t
            continue
        if op not in rebuilt:
            rebuilt[op] = _reading_new(op, inline, new, memo)
        new[t] = rebuilt[op].output(t.value_index)
    return {t: n for t, n in new.items() if n is not t}


def _reading_new(op: Operation, inline: set[Tensor], new: dict[Tensor, Tensor],
                 memo: dict[Expr, Expr]) -> Operation:
    """``op`` over the inlined bodies and rebuilt tensors it reads (an extern call's or a
    scan's inputs are never inlined: they read them from memory)."""
    if isinstance(op, ExternOp):
        return op.with_inputs([new.get(d, d) for d in op.inputs])
    if isinstance(op, ScanOp):
        return op.replaced({d: new[d] for d in op.input_tensors if d in new})
    assert isinstance(op, ComputeOp)
    return _rebuild(op, [inline_reads(b, inline, new, memo) for b in op.body])


def inline_reads(body: Expr, inline: set[Tensor], new: dict[Tensor, Tensor],
                  memo: dict[Expr, Expr] | None = None) -> Expr:
    """``body`` with every read of an ``inline`` tensor replaced by that tensor's original
    body at the read's indices (expanded in turn, with an explicit stack) and every read of
    a rebuilt tensor redirected to its new version. ``memo`` (node -> expanded node) is
    shared by all calls of one tidy: an expansion depends only on the node."""
    memo = {} if memo is None else memo
    if body in memo:
        return memo[body]
    # (node, state, instance): 0 visit the children, 1 rebuild the node, 2 the node is a
    # read of an inlined tensor whose instance has been expanded
    stack: list[tuple[Expr, int, Expr | None]] = [(body, 0, None)]
    while stack:
        node, state, instance = stack.pop()
        if state == 2:
            memo[node] = memo[instance]  # type: ignore[index]
            continue
        if node in memo:
            continue
        if state == 0:
            stack.append((node, 1, None))
            stack.extend((c, 0, None) for c in reversed(node.children()) if c not in memo)
            continue
        kids = node.children()
        out = node.with_children([memo[k] for k in kids]) if kids else node
        if isinstance(out, TensorRead):
            t = out.tensor
            if t in inline:
                op: ComputeOp = t.op  # type: ignore[assignment]
                m = {iv.var: ix for iv, ix in zip(op.axis, out.indices) if iv.var is not ix}
                inst = substitute(op.body[0], m)
                if inst in memo:
                    memo[node] = memo[inst]
                else:
                    stack.append((node, 2, inst))
                    stack.append((inst, 0, None))
                continue
            if new.get(t, t) is not t:
                out = TensorRead(new[t], out.indices)
        memo[node] = out
    return memo[body]


def _rebuild(op: ComputeOp, bodies: list[Expr]) -> ComputeOp:
    """``op`` with new bodies (``op`` itself when none changed), on fresh axes (IterVars
    belong to one op); every output of a tuple op is rebuilt together."""
    if all(b is o for b, o in zip(bodies, op.body)):
        return op
    axis = new_axes([iv.var.name for iv in op.axis], [iv.dom.extent for iv in op.axis])
    m = {old.var: new.var for old, new in zip(op.axis, axis)}
    bodies = [substitute(b, m) for b in bodies]
    check_compute_body(op.name, axis, bodies)
    return ComputeOp(op.name, axis, bodies, tag=op.tag)
