"""The scatter form of a one-hot gather sum: what a data-dependent gradient looks like.

The gradient of a read at a data-dependent index (``take``, the ``argsel`` of a max) is a
sum that picks, for every output point, the reduction points whose index lands on it::

    A_grad[p, q] = sum(H[i, q], i in [0, 5), where=p == max(min(I[i], 9), 0))

Run as written, every output element scans every ``i``: O(outputs x indices). Read the
other way round, the same sum is a *scatter*: for every free point ``q`` and reduction
point ``i`` in order, compute ``p = g(i, q)`` once and add the source into ``A_grad[p, q]``
(after an init of the whole output). Each element receives the same contributions in the
same order, so the result is the same, bit for bit, without atomics.

``scatter_form(op)`` recognizes such sums (``tex.lower`` lowers them as scatters,
``tex.autodiff.iteration_count`` counts them as such). Affine index maps never get here:
the autodiff's integer solver turns them into exact gathers; only index expressions that
read a tensor (data-dependent) qualify.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import fold
from .expr import Binary, Cast, Compare, Const, Expr, IterVar, Op, Reduce, TensorRead, Var
from .tensor import ComputeOp, Operation
from .visit import collect_vars, post_order

__all__ = ["ScatterForm", "scatter_form", "scatter_form_of"]


@dataclass(frozen=True)
class ScatterForm:
    """A single-output ``sum`` whose ``where`` pins some output axes to data-dependent
    index expressions.

    ``axes[n] == indices[n]`` holds at every contributing point; ``indices`` mention
    neither their own axis nor another scatter axis. ``free_axes`` are the other output
    axes (in order). ``condition`` is the rest of the ``where`` conjunction; it may mention
    the scatter axes, which then stand for their index expressions (substitute
    ``axes[n] := indices[n]``). ``reduce`` is the sum itself (source, axes, init).
    """

    axes: tuple[IterVar, ...]
    indices: tuple[Expr, ...]
    free_axes: tuple[IterVar, ...]
    condition: Expr
    reduce: Reduce

    def index_of(self, axis: IterVar) -> Expr:
        """The index expression a scatter axis is pinned to."""
        for iv, g in zip(self.axes, self.indices):
            if iv is axis:
                return g
        raise KeyError(axis.name)


def scatter_form(op: Operation) -> ScatterForm | None:
    """The scatter form of ``op``, or None when it has none (a placeholder never has one).

    ``op`` qualifies when it has one output whose body is a ``sum`` (combiner ``+``, one
    slot) and at least one conjunct of its ``where`` is ``p == g`` (either side; ``p`` may
    be widened by a cast) with ``p`` an output axis and ``g`` an integer expression that
    reads a tensor and mentions neither ``p`` nor another scatter axis.
    """
    if not isinstance(op, ComputeOp) or len(op.body) != 1:
        return None
    return scatter_form_of(op.axis, op.body[0])


def scatter_form_of(axes: Sequence[IterVar], body: Expr) -> ScatterForm | None:
    """``scatter_form`` for a body given apart from its op (``tex.lower`` passes the body
    with inlined producers substituted); ``axes`` are the op's output axes."""
    if not isinstance(body, Reduce) or not body.combiner.is_single(Op.ADD):
        return None
    by_var = {iv.var: iv for iv in axes}
    picked: list[tuple[IterVar, Expr]] = []
    rest: list[Expr] = []
    for c in fold.conjuncts(body.condition):
        found = _pin(c, by_var)
        if found is not None:
            iv, g = found
            used = set(collect_vars(g))
            # g may not mention p or another scatter axis (each is then one load away),
            # and the axes already picked may not depend on this one
            if not any(iv is q for q, _ in picked) and \
                    not any(q.var in used for q, _ in picked) and \
                    not any(iv.var in set(collect_vars(h)) for _, h in picked):
                picked.append((iv, g))
                continue
        rest.append(c)
    if not picked:
        return None
    scatter = {iv.var for iv, _ in picked}
    free = tuple(iv for iv in axes if iv.var not in scatter)
    return ScatterForm(tuple(iv for iv, _ in picked), tuple(g for _, g in picked), free,
                       fold.conjoin(rest), body)


def _pin(c: Expr, by_var: dict[Var, IterVar]) -> tuple[IterVar, Expr] | None:
    """``(p, g)`` when ``c`` is ``p == g`` or ``g == p`` with ``p`` an output axis (maybe
    widened by an integer cast, as ``p == I[i]`` over int64 indices is built, or offset by
    a constant, ``p + 1 == g`` pinning ``p`` to ``g - 1``) and ``g`` a data-dependent
    integer expression not mentioning ``p``."""
    if not (isinstance(c, Compare) and c.op is Op.EQ and c.a.dtype.is_int):
        return None
    for side, other in ((c.a, c.b), (c.b, c.a)):
        offset = 0
        if isinstance(side, Binary) and side.op in (Op.ADD, Op.SUB) and \
                isinstance(side.b, Const) and isinstance(side.b.value, int):
            offset = side.b.value if side.op is Op.ADD else -side.b.value
            side = side.a
        v = _axis_var(side)
        iv = by_var.get(v) if v is not None else None
        if iv is None:
            continue
        if iv.var in set(collect_vars(other)) or not any(isinstance(n, TensorRead)
                                            for n in post_order(other)):
            continue
        if offset:
            other = fold.binary(Op.SUB, other, Const(offset, other.dtype))
        return iv, other
    return None


def _axis_var(e: Expr) -> Var | None:
    """``e`` as a plain variable, looking through widening integer casts."""
    while isinstance(e, Cast) and e.dtype.is_int and e.a.dtype.is_int and \
            e.dtype.bits >= e.a.dtype.bits:
        e = e.a
    return e if isinstance(e, Var) else None


