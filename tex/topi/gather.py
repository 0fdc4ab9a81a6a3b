"""Gathers: ``take``, the elements of a tensor at data-dependent indices.

``T_take[i] = a[clip(indices[i], 0, n - 1)]`` (or the index modulo ``n``): an index tensor
read inside the index of another read. With ``axis=None`` the flat position is unraveled
with ``floordiv``/``floormod``, as ``reshape`` does.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import te
from ..arith.extent import exceeds_int32
from ..dtype import DTYPES, int32
from ..ir import fold
from ..ir.expr import Expr, as_expr
from ..ir.tensor import Tensor
from .tag import INJECTIVE
from .utils import Index, check_tensor, compute_nd, is_scalar, normalize_axis_one, unravel

__all__ = ["take"]

int64 = DTYPES["int64"]
_INT32_MAX = 2**31 - 1

# how an index outside [0, n) is brought into range
_TAKE_MODES: dict[str, Callable[[Expr, int], Expr]] = {
    "clip": lambda ix, n: te.max(te.min(ix, n - 1), 0),  # to the nearest end (TVM default)
    "wrap": lambda ix, n: te.floormod(ix, n),  # modulo n, as numpy.take(mode="wrap")
}


def take(a: Tensor, indices: Any, axis: int | None = None, mode: str = "clip",
         name: str | None = None) -> Tensor:
    """Elements of ``a`` at ``indices`` along ``axis`` (``numpy.take``; TVM's ``take``).

    Parameters
    ----------
    a : Tensor
    indices : Tensor, int or integer expression
        An integer tensor (its shape replaces axis ``axis`` of ``a``), or one index (the
        axis disappears).
    axis : int, optional
        None takes from the flattened ``a``: the result has the shape of ``indices``.
    mode : {"clip", "wrap"}
        Out-of-range indices are clipped into ``[0, n)`` (default, as TVM; so -1 reads
        element 0, unlike NumPy's negative indexing) or wrapped modulo ``n``.
    name : str, optional
        Output name (default ``T_take``).

    Returns
    -------
    Tensor
        Of ``a``'s dtype.

    Raises
    ------
    TypeError
        ``indices`` is not integer.
    ValueError
        ``axis`` out of range, unknown ``mode``.
    """
    op = "topi.take"
    check_tensor(a, op, "a")
    if isinstance(indices, Tensor):
        index_dtype, index_shape = indices.dtype, indices.shape
    elif is_scalar(indices):
        indices = as_expr(indices, f"{op}: indices")
        index_dtype, index_shape = indices.dtype, ()
    else:
        raise TypeError(f"{op}: indices must be an integer Tensor or an integer, got "
                        f"{type(indices).__name__} {indices!r}")
    if not index_dtype.is_int:
        raise TypeError(f"{op}: indices must be integers, got dtype {index_dtype}")
    if mode not in _TAKE_MODES:
        raise ValueError(f"{op}: mode must be one of {', '.join(map(repr, _TAKE_MODES))}, "
                         f"got {mode!r}")
    into_range = _TAKE_MODES[mode]

    def index_at(pos: Index, n: int) -> Expr:
        """The index, widened to hold ``n - 1`` (int64 past 2**31 - 1 elements) and to at
        least int32, so that clipping or wrapping into ``[0, n)`` is exact."""
        ix = indices[pos] if isinstance(indices, Tensor) else indices
        wide = int64 if exceeds_int32(n - 1) else int32
        return ix if ix.dtype.bits >= wide.bits else fold.cast(wide, ix)

    if axis is None:
        return compute_nd(index_shape, lambda idx: a[unravel(
            into_range(index_at(idx, a.size), a.size), a.shape)], name or "T_take", INJECTIVE)
    if a.ndim == 0:
        raise ValueError(f"{op}: cannot take along an axis of the 0-d tensor '{a.name}'")
    ax = normalize_axis_one(axis, a.ndim, op)
    m = len(index_shape)

    def body(idx: Index) -> Expr:
        ix = into_range(index_at(idx[ax:ax + m], a.shape[ax]), a.shape[ax])
        return a[(*idx[:ax], ix, *idx[ax + m:])]

    return compute_nd((*a.shape[:ax], *index_shape, *a.shape[ax + 1:]), body,
                      name or "T_take", INJECTIVE)

