"""Joins and cuts along an axis: concatenate, split and stack.

Injective computes; an element that comes from one of several tensors is a chain of nested
``select``s on the joined axis:

    T_concatenate[i, j] = select(j < 2, A[i, j], B[i, j - 2])
    T_stack[s, i] = select(s < 1, A[i], B[i])

Outputs are named ``T_<op>`` (``name=`` overrides); ``split`` names its pieces
``<name>_0, <name>_1, ...``.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from .. import te
from ..ir.expr import Expr
from ..ir.tensor import Tensor
from .tag import INJECTIVE
from .utils import (
    Index,
    check_tensor,
    compute_nd,
    int_list,
    is_int,
    new_axis,
    normalize_axis_one,
)

__all__ = ["concatenate", "split", "stack"]


def _replace(idx: Index, dim: int, value: Expr) -> Index:
    return (*idx[:dim], value, *idx[dim + 1:])


def _tensor_list(tensors: Any, op: str) -> list[Tensor]:
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: tensors must be a list or tuple of Tensors, got "
                        f"{type(tensors).__name__} {tensors!r}")
    if not tensors:
        raise ValueError(f"{op}: needs at least one tensor, got an empty sequence")
    return [check_tensor(t, op, f"tensors[{p}]") for p, t in enumerate(tensors)]


def concatenate(tensors: Sequence[Tensor], axis: int = 0, name: str | None = None
                ) -> Tensor:
    """The tensors joined along ``axis`` (``numpy.concatenate``).

    Parameters
    ----------
    tensors : sequence of Tensor
        Equal shapes except along ``axis``; dtypes are promoted to a common one.
    axis : int
    name : str, optional
        Output name (default ``T_concatenate``).

    Returns
    -------
    Tensor
        ``select(j < n0, A[.., j, ..], select(j < n0 + n1, B[.., j - n0, ..], ...))``.

    Raises
    ------
    ValueError
        No tensors, 0-d tensors, or shapes that differ off ``axis``.
    """
    op = "topi.concatenate"
    parts = _tensor_list(tensors, op)
    first = parts[0]
    if first.ndim == 0:
        raise ValueError(f"{op}: cannot concatenate 0-d tensors ('{first.name}'); use "
                         "topi.stack")
    a = normalize_axis_one(axis, first.ndim, op)
    for t in parts[1:]:
        if t.ndim != first.ndim or any(
                e != f for d, (e, f) in enumerate(zip(t.shape, first.shape)) if d != a):
            shapes = ", ".join(str(p.shape) for p in parts)
            raise ValueError(f"{op}: shapes {shapes} differ outside axis {a}")
    offsets = [0]
    for t in parts:
        offsets.append(offsets[-1] + t.shape[a])
    shape = _replace_shape(first.shape, a, offsets[-1])

    def body(idx: Index) -> Expr:
        j = idx[a]

        def piece(p: int) -> Expr:
            return parts[p][_replace(idx, a, j - offsets[p])]

        out = piece(len(parts) - 1)
        for p in range(len(parts) - 2, -1, -1):
            out = te.if_then_else(j < offsets[p + 1], piece(p), out)
        return out

    return compute_nd(shape, body, name or "T_concatenate", INJECTIVE)


def _replace_shape(shape: Sequence[int], dim: int, extent: int) -> tuple[int, ...]:
    return (*shape[:dim], extent, *shape[dim + 1:])


def _split_points(x: Tensor, sections: Any, a: int) -> list[int]:
    op = "topi.split"
    n = x.shape[a]
    if is_int(sections):
        s = int(sections)
        if s <= 0 or n % s:
            raise ValueError(f"{op}: {s} sections do not divide axis {a} of '{x.name}' "
                             f"(extent {n}, shape {x.shape}) into equal pieces")
        return [n // s * p for p in range(1, s)]
    points = int_list(sections, op, "indices_or_sections")
    bounds = [0, *points, n]
    if any(lo >= hi for lo, hi in itertools.pairwise(bounds)):
        raise ValueError(f"{op}: split points {points} must increase strictly within "
                         f"(0, {n}) for axis {a} of '{x.name}' (shape {x.shape}); tex "
                         "tensors cannot be empty")
    return points


def split(x: Tensor, indices_or_sections: Any, axis: int = 0, name: str | None = None
          ) -> list[Tensor]:
    """``x`` cut along ``axis`` into pieces (``numpy.split``).

    Parameters
    ----------
    x : Tensor
    indices_or_sections : int or sequence of int
        A number of equal sections (it must divide the extent), or the increasing split
        points.
    axis : int
    name : str, optional
        Base name of the pieces (default ``T_split``; pieces ``T_split_0``, ...).

    Returns
    -------
    list of Tensor

    Raises
    ------
    ValueError
        The sections do not divide the extent, or the points give an empty piece.
    """
    check_tensor(x, "topi.split")
    if x.ndim == 0:
        raise ValueError(f"topi.split: cannot split the 0-d tensor '{x.name}'")
    a = normalize_axis_one(axis, x.ndim, "topi.split")
    bounds = [0, *_split_points(x, indices_or_sections, a), x.shape[a]]
    base = name or "T_split"

    def piece(p: int, lo: int, hi: int) -> Tensor:
        return compute_nd(_replace_shape(x.shape, a, hi - lo),
                          lambda idx: x[_replace(idx, a, idx[a] + lo)], f"{base}_{p}",
                          INJECTIVE)

    return [piece(p, lo, hi) for p, (lo, hi) in enumerate(itertools.pairwise(bounds))]


def stack(tensors: Sequence[Tensor], axis: int = 0, name: str | None = None) -> Tensor:
    """The tensors joined along a new axis (``numpy.stack``).

    Parameters
    ----------
    tensors : sequence of Tensor
        All of one shape; dtypes are promoted to a common one.
    axis : int
        Position of the new axis in the result, in ``[-ndim - 1, ndim]``.
    name : str, optional
        Output name (default ``T_stack``).

    Returns
    -------
    Tensor
        ``select(s < 1, A[..], select(s < 2, B[..], ...))``.
    """
    op = "topi.stack"
    parts = _tensor_list(tensors, op)
    shape0 = parts[0].shape
    if any(t.shape != shape0 for t in parts):
        raise ValueError(f"{op}: all tensors must have one shape, got "
                         f"{', '.join(str(t.shape) for t in parts)}")
    a = new_axis(axis, len(shape0), op)

    def body(idx: Index) -> Expr:
        # s < p + 1, as concatenate's ranges: a piece's gradient then solves its condition
        # to one position (the last piece's "s != 0 && s != 1 && ..." did not, and summed
        # the head over every earlier position)
        s, rest = idx[a], (*idx[:a], *idx[a + 1:])
        out = parts[-1][rest]
        for p in range(len(parts) - 2, -1, -1):
            out = te.if_then_else(s < p + 1, parts[p][rest], out)
        return out

    return compute_nd((*shape0[:a], len(parts), *shape0[a:]), body, name or "T_stack",
                      INJECTIVE)
