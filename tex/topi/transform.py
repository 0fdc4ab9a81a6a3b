"""Shape transforms: reshape, transpose, expand_dims, squeeze and flip.

Each is an injective compute: every output element reads one input element at an index
that is an affine function of the output index, with ``floordiv``/``floormod`` where a
flattened position is involved (reshape):

    T_reshape[i, j] = X[(i*4 + j) // 6, (i*4 + j) % 6]          # (2, 4) -> (4, 2) view

Joins and cuts (concatenate, split, stack) are in ``join.py``, ``take`` in ``gather.py``,
contractions (tensordot, matmul, einsum) in ``contract.py``. Outputs are named ``T_<op>``
(``name=`` overrides).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import te
from ..arith.extent import Extent, as_extent, extent_quotient, same_extent
from ..dtype import int32
from ..ir.expr import Const, Expr
from ..ir.tensor import Shape, Tensor
from .tag import INJECTIVE
from .utils import (
    Index,
    check_tensor,
    compute_nd,
    int_list,
    is_int,
    new_axis,
    normalize_axis,
    normalize_axis_one,
    prod,
    ravel,
    unravel,
)

__all__ = ["expand_dims", "flip", "reshape", "squeeze", "transpose"]


def _reshape_target(x: Tensor, newshape: Any) -> tuple[Extent, ...]:
    values = list(newshape) if isinstance(newshape, (list, tuple)) else [newshape]
    dims: list[Extent] = []
    for v in values:
        if is_int(v):
            dims.append(int(v))
            continue
        e = te.symbolic_extent(v, "topi.reshape: newshape") if isinstance(v, Expr) else None
        if e is None:
            raise TypeError(f"topi.reshape: newshape must be an int or a sequence of ints "
                            f"(or extents over tex.var/tex.size_var), got {newshape!r}")
        dims.append(as_extent(e))
    wanted = Shape(dims)
    if sum(1 for d in dims if isinstance(d, int) and d == -1) > 1:
        raise ValueError(f"topi.reshape: newshape {wanted} has more than one -1")
    if any(isinstance(d, int) and (d == 0 or d < -1) for d in dims):
        raise ValueError(f"topi.reshape: newshape {wanted} must hold positive extents "
                         "(and at most one -1)")
    infer = [k for k, d in enumerate(dims) if isinstance(d, int) and d == -1]
    known = prod([d for k, d in enumerate(dims) if k not in infer])
    size = prod(x.shape)
    if infer:
        inferred = extent_quotient(size, known)
        if inferred is None:
            raise ValueError(f"topi.reshape: cannot reshape '{x.name}' of shape {x.shape} "
                             f"({size} elements) into {wanted}: {size} is not a "
                             f"multiple of {known}")
        dims[infer[0]] = inferred
    if not same_extent(prod(dims), size):
        raise ValueError(f"topi.reshape: cannot reshape '{x.name}' of shape {x.shape} "
                         f"({size} elements) into {wanted} ({prod(dims)} elements)")
    return tuple(dims)


def reshape(x: Tensor, newshape: Any, name: str | None = None) -> Tensor:
    """``x`` with a new shape and the same elements in row-major order.

    Parameters
    ----------
    x : Tensor
    newshape : int or tuple of int
        One extent may be -1: it is inferred from the size.
    name : str, optional
        Output name (default ``T_reshape``).

    Returns
    -------
    Tensor
        ``T[idx] = x[unravel(ravel(idx))]``, written with floordiv/floormod.

    Raises
    ------
    TypeError
        ``newshape`` is not ints.
    ValueError
        The sizes differ, more than one -1, or a non-positive extent.
    """
    check_tensor(x, "topi.reshape")
    shape = _reshape_target(x, newshape)
    return compute_nd(shape, lambda idx: x[unravel(ravel(idx, shape), x.shape)],
                      name or "T_reshape", INJECTIVE)


def transpose(x: Tensor, axes: Sequence[int] | None = None, name: str | None = None
              ) -> Tensor:
    """``x`` with permuted axes: output axis ``d`` is input axis ``axes[d]``.

    Parameters
    ----------
    x : Tensor
    axes : sequence of int, optional
        A permutation of the axes (negatives allowed); default reverses them.
    name : str, optional
        Output name (default ``T_transpose``).

    Returns
    -------
    Tensor

    Raises
    ------
    ValueError
        ``axes`` is not a permutation of ``range(x.ndim)``.
    """
    check_tensor(x, "topi.transpose")
    if axes is None:
        perm = list(range(x.ndim))[::-1]
    else:
        given = int_list(axes, "topi.transpose", "axes")
        perm = [normalize_axis_one(a, x.ndim, "topi.transpose") for a in given]
        if sorted(perm) != list(range(x.ndim)):
            raise ValueError(f"topi.transpose: axes {tuple(given)} are not a permutation of "
                             f"the {x.ndim} axes of '{x.name}' (shape {x.shape})")

    def body(idx: Index) -> Expr:
        src: list[Expr] = [Const(0, int32)] * x.ndim
        for d, a in enumerate(perm):
            src[a] = idx[d]
        return x[tuple(src)]

    return compute_nd(tuple(x.shape[a] for a in perm), body, name or "T_transpose",
                      INJECTIVE)


def expand_dims(x: Tensor, axis: int, num_newaxis: int = 1, name: str | None = None
                ) -> Tensor:
    """``x`` with ``num_newaxis`` extent-1 axes inserted at ``axis`` (TVM's expand_dims).

    Parameters
    ----------
    x : Tensor
    axis : int
        In ``[-x.ndim - 1, x.ndim]``.
    num_newaxis : int
        How many axes to insert (default 1).
    name : str, optional
        Output name (default ``T_expand_dims``).

    Returns
    -------
    Tensor
    """
    check_tensor(x, "topi.expand_dims")
    a = new_axis(axis, x.ndim, "topi.expand_dims")
    if not is_int(num_newaxis) or num_newaxis < 0:
        raise ValueError(f"topi.expand_dims: num_newaxis must be a non-negative int, got "
                         f"{num_newaxis!r}")
    n = int(num_newaxis)
    shape = (*x.shape[:a], *([1] * n), *x.shape[a:])
    return compute_nd(shape, lambda idx: x[(*idx[:a], *idx[a + n:])],
                      name or "T_expand_dims", INJECTIVE)


def squeeze(x: Tensor, axis: Any = None, name: str | None = None) -> Tensor:
    """``x`` without extent-1 axes (``numpy.squeeze``).

    Parameters
    ----------
    x : Tensor
    axis : None, int or tuple of int
        The axes to remove (default: every extent-1 axis).
    name : str, optional
        Output name (default ``T_squeeze``).

    Returns
    -------
    Tensor

    Raises
    ------
    ValueError
        A named axis does not have extent 1, or is out of range.
    """
    check_tensor(x, "topi.squeeze")
    if axis is None:
        axes = tuple(d for d, e in enumerate(x.shape) if e == 1)
    else:
        axes = normalize_axis(axis, x.ndim, "topi.squeeze")
        for d in axes:
            if x.shape[d] != 1:
                raise ValueError(f"topi.squeeze: cannot squeeze axis {d} of '{x.name}' "
                                 f"(shape {x.shape}): its extent is {x.shape[d]}, not 1")
    kept = [d for d in range(x.ndim) if d not in axes]

    def body(idx: Index) -> Expr:
        src: list[Expr] = [Const(0, int32)] * x.ndim
        for d, ix in zip(kept, idx):
            src[d] = ix
        return x[tuple(src)]

    return compute_nd(tuple(x.shape[d] for d in kept), body, name or "T_squeeze", INJECTIVE)


def flip(x: Tensor, axis: Any = 0, name: str | None = None) -> Tensor:
    """``x`` with the order of elements reversed along ``axis`` (TVM's ``flip``).

    Parameters
    ----------
    x : Tensor
    axis : None, int or tuple of int
        Default 0, as TVM; None flips every axis, as ``numpy.flip``.
    name : str, optional
        Output name (default ``T_flip``).

    Returns
    -------
    Tensor
    """
    check_tensor(x, "topi.flip")
    axes = normalize_axis(axis, x.ndim, "topi.flip")

    def body(idx: Index) -> Expr:
        return x[tuple(x.shape[d] - 1 - ix if d in axes else ix for d, ix in enumerate(idx))]

    return compute_nd(x.shape, body, name or "T_flip", INJECTIVE)

