"""A static cost measure: iteration points of the unscheduled program."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ..arith.extent import as_extent, bind_extent
from ..ir.expr import Expr, Var
from ..ir.scatter import scatter_form
from ..ir.tensor import ExternOp, Operation, PlaceholderOp, ScanOp, Tensor
from ..ir.visit import topo_sort_ops
from ..te.specialize import check_binding

__all__ = ["iteration_count", "op_iterations"]


def iteration_count(*tensors: Tensor, given: Sequence[Tensor] = (),
                    bind: Mapping[Var, int] | None = None) -> int | Expr:
    """Iteration points needed to compute ``tensors`` from placeholders, unscheduled.

    The sum, over every compute operation the tensors depend on (each counted once), of
    (output points) x (reduction points). A reduction guarded by a ``where=`` condition
    counts its full domain; a multi-output operation counts once. This is the measure the
    zero elimination is judged by: a gradient should reach the hand-written count.

    A sum with a scatter form (``tex.ir.scatter``: a one-hot gather over data-dependent
    indices, such as the gradient of ``take`` or of a max) counts what its scatter loop
    nest runs: (output points), for the init, plus (free-axis points) x (reduction
    points), for the update; its scatter axes are not iterated, they are computed. An
    extern call (``te.extern``) counts the elements it writes, a scan its steps' rows.

    With symbolic shapes (``tex.var``/``tex.size_var`` extents) the count is an expression
    in the shape variables; ``bind`` (``{n: 64}``) gives their values, and the count is an
    int once every variable it uses is bound.

    ``given``: tensors already computed, such as a forward pass's output whose tensors a
    tape holds; the operations they depend on are not counted. A gradient's backward cost
    is ``iteration_count(*grads, given=[output])`` (what ``tex.topi.gradient_cost``'s
    hand-written references count).

    Example
    -------
    >>> k = tex.reduce_axis((0, 64), name="k")
    >>> Y = tex.compute((32, 16), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k))
    >>> tex.autodiff.iteration_count(Y)
    32768
    """
    flat: list[Tensor] = []
    for t in tensors:
        if isinstance(t, (list, tuple)):
            flat.extend(t)
        else:
            flat.append(t)
    for t in flat:
        if not isinstance(t, Tensor):
            raise TypeError(f"iteration_count: expected Tensors, got {type(t).__name__} {t!r}")
    given = list(given)
    for t in given:
        if not isinstance(t, Tensor):
            raise TypeError(f"iteration_count: given must hold Tensors, got "
                            f"{type(t).__name__} {t!r}")
    values = check_binding(bind or {}, "iteration_count")
    done = set(topo_sort_ops(given))
    total = sum(op_iterations(op) for op in topo_sort_ops(flat)
                if not isinstance(op, PlaceholderOp) and op not in done)
    return bind_extent(as_extent(total), values) if values else as_extent(total)


def op_iterations(op: Operation) -> int:
    """Iteration points of one compute operation alone, as its loop nest runs them:
    (output points) x (reduction points), or for a scatter form (output points) +
    (free-axis points) x (reduction points). An extern call counts the elements it writes
    (what it does inside is not tex's to count)."""
    if isinstance(op, ExternOp):
        return sum(t.size for t in op.outputs)
    if isinstance(op, ScanOp):  # its inits' rows, then each body operation's row per step
        steps = op.shapes[0][0]
        return sum(math.prod(s[1:]) * op.init_len for s in op.shapes) + sum(
            op_iterations(b) // steps * (steps - op.init_len) for b in op.body_ops)
    reduction = math.prod(iv.dom.extent for iv in op.reduce_axis)
    outputs = math.prod(iv.dom.extent for iv in op.axis)
    form = scatter_form(op)
    if form is None:
        return outputs * reduction
    free = math.prod(iv.dom.extent for iv in form.free_axes)
    return outputs + free * reduction
