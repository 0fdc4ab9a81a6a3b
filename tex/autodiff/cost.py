"""A static cost measure: iteration points of the unscheduled program."""
from __future__ import annotations

from ..ir.tensor import ComputeOp, Tensor
from ..ir.visit import topo_sort_ops

__all__ = ["iteration_count"]


def iteration_count(*tensors: Tensor) -> int:
    """Iteration points needed to compute ``tensors`` from placeholders, unscheduled.

    The sum, over every compute operation the tensors depend on (each counted once), of
    (output points) x (reduction points). A reduction guarded by a ``where=`` condition
    counts its full domain; a multi-output operation counts once. This is the measure the
    zero elimination is judged by: a gradient should reach the hand-written count.

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
    total = 0
    for op in topo_sort_ops(flat):
        if not isinstance(op, ComputeOp):
            continue
        points = 1
        for iv in op.axis:
            points *= iv.dom.extent
        for iv in op.reduce_axis:
            points *= iv.dom.extent
        total += points
    return total
