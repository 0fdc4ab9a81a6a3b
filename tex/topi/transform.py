"""Shape transforms and contractions.

Transforms (reshape, transpose, expand_dims, squeeze, concatenate, split, stack, flip, take)
are injective computes: every output element reads one input element at an index that is
an affine function of the output index, with ``floordiv``/``floormod`` where a flattened
position is involved (reshape, take with ``axis=None``) and nested ``select``s where the
element comes from one of several tensors (concatenate, stack):

    T_reshape[i, j] = X[(i*4 + j) // 6, (i*4 + j) % 6]          # (2, 4) -> (4, 2) view
    T_concatenate[i, j] = select(j < 2, A[i, j], B[i, j - 2])

Contractions (tensordot, matmul, einsum) are one sum over a product of reads, with one
reduce axis per contracted dimension:

    T_matmul[i, j] = sum(A[i, k] * B[k, j], k in [0, 5))

Outputs are named ``T_<op>`` (``name=`` overrides); ``split`` names its pieces
``<name>_0, <name>_1, ...``.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import te
from ..dtype import DTYPES, int32
from ..ir import fold
from ..ir.expr import Const, Expr, Op, as_expr
from ..ir.tensor import Tensor, register_tensor_operators
from .broadcast import INJECTIVE
from .utils import (
    broadcast_indices,
    broadcast_shape,
    check_tensor,
    compute_nd,
    is_scalar,
    normalize_axis,
    normalize_axis_one,
    prod,
    reduce_axes,
)

__all__ = [
    "MATMUL",
    "concatenate",
    "einsum",
    "expand_dims",
    "flip",
    "matmul",
    "reshape",
    "split",
    "squeeze",
    "stack",
    "take",
    "tensordot",
    "transpose",
]

MATMUL = "matmul"  # tag of the contractions

Index = tuple[Expr, ...]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _int_list(value: Any, op: str, arg: str) -> list[int]:
    """An int or a sequence of ints as a list; TypeError naming the argument otherwise."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not all(_is_int(v) for v in values):
        raise TypeError(f"{op}: {arg} must be an int or a sequence of ints, got {value!r}")
    return [int(v) for v in values]


def _strides(shape: Sequence[int]) -> list[int]:
    """Row-major strides, in elements."""
    out = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        out[d] = out[d + 1] * shape[d + 1]
    return out


def _ravel(idx: Index, shape: Sequence[int]) -> Expr:
    """The row-major flat position of ``idx`` in ``shape``: ``i*s0 + j*s1 + ...`` (in
    int64 when ``shape`` has more elements than int32 can count)."""
    wide = prod(shape) > _INT32_MAX
    flat: Expr = Const(0, int64 if wide else int32)
    for ix, stride in zip(idx, _strides(shape)):
        if wide:
            ix = fold.cast(int64, ix)
        flat = flat + ix * fold.const(stride, flat.dtype)
    return flat


def _unravel(flat: Expr, shape: Sequence[int]) -> Index:
    """The index of flat position ``flat`` (known to be in range) in ``shape``; with more
    elements than int32 can count, divided in int64 and each index narrowed after."""
    wide = prod(shape) > _INT32_MAX
    if wide:
        flat = fold.cast(int64, flat)
    out = []
    for d, stride in enumerate(_strides(shape)):
        q = te.floordiv(flat, fold.const(stride, flat.dtype))
        ix = q if d == 0 else te.floormod(q, fold.const(shape[d], flat.dtype))
        out.append(fold.cast(int32, ix) if ix.dtype is not int32 and shape[d] <= _INT32_MAX
                   else ix)  # q < shape[0] already
    return tuple(out)


_INT32_MAX = 2**31 - 1
int64 = DTYPES["int64"]


def _replace(idx: Index, dim: int, value: Expr) -> Index:
    return (*idx[:dim], value, *idx[dim + 1:])


def _tensor_list(tensors: Any, op: str) -> list[Tensor]:
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: tensors must be a list or tuple of Tensors, got "
                        f"{type(tensors).__name__} {tensors!r}")
    if not tensors:
        raise ValueError(f"{op}: needs at least one tensor, got an empty sequence")
    return [check_tensor(t, op, f"tensors[{p}]") for p, t in enumerate(tensors)]


def _new_axis(axis: Any, ndim: int, op: str) -> int:
    """A position in ``[0, ndim]`` at which to insert an axis (negatives count from the
    end of the result, as NumPy)."""
    if not _is_int(axis):
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__} {axis!r}")
    a = int(axis)
    if not -ndim - 1 <= a <= ndim:
        raise ValueError(f"{op}: axis {a} is out of range for inserting an axis into a "
                         f"tensor with {ndim} dimensions (valid: {-ndim - 1}..{ndim})")
    return a + ndim + 1 if a < 0 else a


# -- reshape, transpose, expand_dims, squeeze -----------------------------------------

def _reshape_target(x: Tensor, newshape: Any) -> tuple[int, ...]:
    dims = _int_list(newshape, "topi.reshape", "newshape")
    wanted = tuple(dims)
    if dims.count(-1) > 1:
        raise ValueError(f"topi.reshape: newshape {wanted} has more than one -1")
    if any(d == 0 or d < -1 for d in dims):
        raise ValueError(f"topi.reshape: newshape {wanted} must hold positive extents "
                         "(and at most one -1)")
    known = prod(d for d in dims if d != -1)
    if -1 in dims:
        if x.size % known:
            raise ValueError(f"topi.reshape: cannot reshape '{x.name}' of shape {x.shape} "
                             f"({x.size} elements) into {wanted}: {x.size} is not a "
                             f"multiple of {known}")
        dims[dims.index(-1)] = x.size // known
    if prod(dims) != x.size:
        raise ValueError(f"topi.reshape: cannot reshape '{x.name}' of shape {x.shape} "
                         f"({x.size} elements) into {wanted} ({prod(dims)} elements)")
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
    return compute_nd(shape, lambda idx: x[_unravel(_ravel(idx, shape), x.shape)],
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
        given = _int_list(axes, "topi.transpose", "axes")
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
    a = _new_axis(axis, x.ndim, "topi.expand_dims")
    if not _is_int(num_newaxis) or num_newaxis < 0:
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


# -- concatenate, split, stack, flip ----------------------------------------------------

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
    if _is_int(sections):
        s = int(sections)
        if s <= 0 or n % s:
            raise ValueError(f"{op}: {s} sections do not divide axis {a} of '{x.name}' "
                             f"(extent {n}, shape {x.shape}) into equal pieces")
        return [n // s * p for p in range(1, s)]
    points = _int_list(sections, op, "indices_or_sections")
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
        ``select(s == 0, A[..], select(s == 1, B[..], ...))``.
    """
    op = "topi.stack"
    parts = _tensor_list(tensors, op)
    shape0 = parts[0].shape
    if any(t.shape != shape0 for t in parts):
        raise ValueError(f"{op}: all tensors must have one shape, got "
                         f"{', '.join(str(t.shape) for t in parts)}")
    a = _new_axis(axis, len(shape0), op)

    def body(idx: Index) -> Expr:
        s, rest = idx[a], (*idx[:a], *idx[a + 1:])
        out = parts[-1][rest]
        for p in range(len(parts) - 2, -1, -1):
            out = te.if_then_else(fold.compare(Op.EQ, s, p), parts[p][rest], out)
        return out

    return compute_nd((*shape0[:a], len(parts), *shape0[a:]), body, name or "T_stack",
                      INJECTIVE)


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


# -- take --------------------------------------------------------------------------------

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

    def index_at(pos: Index) -> Expr:
        ix = indices[pos] if isinstance(indices, Tensor) else indices
        return ix if ix.dtype.bits >= 32 else fold.cast(int32, ix)

    if axis is None:
        return compute_nd(index_shape,
                          lambda idx: a[_unravel(into_range(index_at(idx), a.size), a.shape)],
                          name or "T_take", INJECTIVE)
    if a.ndim == 0:
        raise ValueError(f"{op}: cannot take along an axis of the 0-d tensor '{a.name}'")
    ax = normalize_axis_one(axis, a.ndim, op)
    m = len(index_shape)

    def body(idx: Index) -> Expr:
        ix = into_range(index_at(idx[ax:ax + m]), a.shape[ax])
        return a[(*idx[:ax], ix, *idx[ax + m:])]

    return compute_nd((*a.shape[:ax], *index_shape, *a.shape[ax + 1:]), body,
                      name or "T_take", INJECTIVE)


# -- contractions -----------------------------------------------------------------------

def _contract(shape: Sequence[int], reduce_extents: Sequence[int],
              factors: Callable[[Index, Index], list[Expr]], name: str,
              names: Sequence[str] | None = None,
              reduce_names: Sequence[str] | None = None) -> Tensor:
    """``T[idx] = sum(prod(factors(idx, ks)), ks)`` (no sum when nothing is contracted)."""
    def body(idx: Index) -> Expr:
        ks = reduce_axes(reduce_extents, reduce_names)
        terms = factors(idx, tuple(k.var for k in ks))
        out = terms[0]
        for t in terms[1:]:
            out = out * t
        return te.sum(out, axis=ks) if ks else out  # type: ignore[no-any-return]

    return compute_nd(shape, body, name, MATMUL, names)


def _tensordot_axes(a: Tensor, b: Tensor, axes: Any) -> tuple[list[int], list[int]]:
    op = "topi.tensordot"
    if _is_int(axes):
        n = int(axes)
        if not 0 <= n <= min(a.ndim, b.ndim):
            raise ValueError(f"{op}: axes={n} needs 0 <= axes <= min(a.ndim, b.ndim) = "
                             f"{min(a.ndim, b.ndim)} (shapes {a.shape} and {b.shape})")
        return list(range(a.ndim - n, a.ndim)), list(range(n))
    if not isinstance(axes, (list, tuple)) or len(axes) != 2:
        raise TypeError(f"{op}: axes must be an int or a pair of axis lists, got {axes!r}")
    a_axes = [normalize_axis_one(d, a.ndim, op) for d in _int_list(axes[0], op, "axes[0]")]
    b_axes = [normalize_axis_one(d, b.ndim, op) for d in _int_list(axes[1], op, "axes[1]")]
    if len(a_axes) != len(b_axes):
        raise ValueError(f"{op}: axes {axes!r} pair {len(a_axes)} axes of a with "
                         f"{len(b_axes)} axes of b")
    if len(set(a_axes)) != len(a_axes) or len(set(b_axes)) != len(b_axes):
        raise ValueError(f"{op}: axes {axes!r} repeat an axis")
    return a_axes, b_axes


def tensordot(a: Tensor, b: Tensor, axes: Any = 2, name: str | None = None) -> Tensor:
    """The sum of products over paired axes of ``a`` and ``b`` (``numpy.tensordot``).

    Parameters
    ----------
    a, b : Tensor
    axes : int or (sequence of int, sequence of int)
        ``N``: the last N axes of ``a`` with the first N of ``b``; or the two lists of
        axes to pair.
    name : str, optional
        Output name (default ``T_tensordot``).

    Returns
    -------
    Tensor
        Shape: the free axes of ``a``, then those of ``b``.

    Raises
    ------
    ValueError
        Paired axes differ in extent, repeat, or are out of range.
    """
    op = "topi.tensordot"
    check_tensor(a, op, "a")
    check_tensor(b, op, "b")
    a_axes, b_axes = _tensordot_axes(a, b, axes)
    for da, db in zip(a_axes, b_axes):
        if a.shape[da] != b.shape[db]:
            raise ValueError(f"{op}: axis {da} of a (shape {a.shape}) and axis {db} of b "
                             f"(shape {b.shape}) differ in extent")
    a_free = [d for d in range(a.ndim) if d not in a_axes]
    b_free = [d for d in range(b.ndim) if d not in b_axes]

    def place(ndim: int, free: list[int], contracted: list[int], free_idx: Index,
              ks: Index) -> Index:
        src: list[Expr] = [Const(0, int32)] * ndim
        for d, ix in zip(free, free_idx):
            src[d] = ix
        for d, k in zip(contracted, ks):
            src[d] = k
        return tuple(src)

    def factors(idx: Index, ks: Index) -> list[Expr]:
        n = len(a_free)
        return [a[place(a.ndim, a_free, a_axes, idx[:n], ks)],
                b[place(b.ndim, b_free, b_axes, idx[n:], ks)]]

    shape = (*(a.shape[d] for d in a_free), *(b.shape[d] for d in b_free))
    return _contract(shape, [a.shape[d] for d in a_axes], factors, name or "T_tensordot")


def matmul(a: Tensor, b: Tensor, name: str | None = None) -> Tensor:
    """The matrix product with NumPy's ``matmul`` semantics.

    A 1-D ``a`` is a row vector and a 1-D ``b`` a column vector (that axis is removed
    from the result); leading (batch) axes broadcast.

    Parameters
    ----------
    a, b : Tensor
        At least 1-D; the last axis of ``a`` pairs with the second-to-last of ``b`` (the
        only axis of a 1-D ``b``).
    name : str, optional
        Output name (default ``T_matmul``).

    Returns
    -------
    Tensor
        ``T[..., i, j] = sum(a[..., i, k] * b[..., k, j], k)``.

    Raises
    ------
    ValueError
        A 0-d operand, contracted extents differ, or batch shapes do not broadcast.
    """
    op = "topi.matmul"
    check_tensor(a, op, "a")
    check_tensor(b, op, "b")
    for arg, t in (("a", a), ("b", b)):
        if t.ndim == 0:
            raise ValueError(f"{op}: argument '{arg}' ('{t.name}') is 0-d; matmul needs "
                             "at least 1-D operands (use topi.multiply for scalars)")
    a_shape = (1, *a.shape) if a.ndim == 1 else a.shape
    b_shape = (*b.shape, 1) if b.ndim == 1 else b.shape
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(f"{op}: shapes {a.shape} and {b.shape} do not match: the last "
                         f"axis of a ({a_shape[-1]}) must equal the "
                         f"{'only' if b.ndim == 1 else 'second-to-last'} axis of b "
                         f"({b_shape[-2]})")
    batch = broadcast_shape(a_shape[:-2], b_shape[:-2], op=op)
    nb = len(batch)
    rows = (a_shape[-2],) if a.ndim > 1 else ()
    cols = (b_shape[-1],) if b.ndim > 1 else ()

    def factors(idx: Index, ks: Index) -> list[Expr]:
        (k,) = ks
        batch_idx, rest = idx[:nb], idx[nb:]
        i, j = rest[:len(rows)], rest[len(rows):]
        a_idx = (*broadcast_indices(batch_idx, a.shape[:-2]), *i, k) if a.ndim > 1 else (k,)
        b_idx = (*broadcast_indices(batch_idx, b.shape[:-2]), k, *j) if b.ndim > 1 else (k,)
        return [a[a_idx], b[b_idx]]

    return _contract((*batch, *rows, *cols), [a_shape[-1]], factors, name or "T_matmul")


_ELLIPSIS = "..."


def _split_term(term: str, subscripts: str) -> list[str]:
    """A term as a list of labels: one letter each, ``...`` as one ``_ELLIPSIS`` item."""
    op = "topi.einsum"
    if term.count(_ELLIPSIS) > 1 or term.replace(_ELLIPSIS, "").count(".") > 0:
        raise ValueError(f"{op}: subscripts {subscripts!r}: each term may hold one '...' "
                         "and no other '.'")
    labels: list[str] = []
    rest = term
    while rest:
        if rest.startswith(_ELLIPSIS):
            labels.append(_ELLIPSIS)
            rest = rest[3:]
            continue
        c, rest = rest[0], rest[1:]
        if not (c.isascii() and c.isalpha()):
            raise ValueError(f"{op}: subscripts {subscripts!r} contain {c!r}; use "
                             "letters a-z, A-Z, '...', ',' and '->'")
        labels.append(c)
    return labels


def _parse_einsum(subscripts: Any, operands: Sequence[Tensor]
                  ) -> tuple[list[list[str]], list[str], dict[str, int]]:
    """Input terms and output term as label lists, and the extent of every label.

    ``...`` expands to labels ``...0, ...1`` for the broadcast dimensions (aligned at the
    right, extent-1 dimensions broadcasting, as in NumPy); without ``->`` the output is
    the ``...`` dimensions followed by the letters used once, alphabetically.
    """
    op = "topi.einsum"
    if not isinstance(subscripts, str):
        raise TypeError(f"{op}: subscripts must be a string such as 'ij,jk->ik', got "
                        f"{type(subscripts).__name__} {subscripts!r}")
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    if "->" in rhs:
        raise ValueError(f"{op}: subscripts {subscripts!r} contain '->' twice")
    raw_terms = [_split_term(t, subscripts) for t in lhs.split(",")]
    if len(raw_terms) != len(operands):
        raise ValueError(f"{op}: subscripts {subscripts!r} name {len(raw_terms)} operands, "
                         f"{len(operands)} were given")
    # expand each '...' into the operand's broadcast dimensions, aligned at the right
    ell_shapes: list[tuple[int, ...]] = []
    for p, (term, t) in enumerate(zip(raw_terms, operands)):
        named = len(term) - (1 if _ELLIPSIS in term else 0)
        if _ELLIPSIS in term and t.ndim < named or _ELLIPSIS not in term and t.ndim != named:
            raise ValueError(f"{op}: term {''.join(term)!r} has {named} letters but operand "
                             f"{p} ('{t.name}') has {t.ndim} dimensions {t.shape}")
        if _ELLIPSIS in term:
            start = term.index(_ELLIPSIS)
            ell_shapes.append(t.shape[start:start + t.ndim - named])
    ell = broadcast_shape(*ell_shapes, op=op) if ell_shapes else ()
    ell_labels = [f"{_ELLIPSIS}{d}" for d in range(len(ell))]
    extent = dict(zip(ell_labels, ell))
    terms: list[list[str]] = []
    for p, (term, t) in enumerate(zip(raw_terms, operands)):
        labels = list(term)
        if _ELLIPSIS in term:
            start = term.index(_ELLIPSIS)
            m = t.ndim - (len(term) - 1)
            labels[start:start + 1] = ell_labels[len(ell) - m:]
        for c, e in zip(labels, t.shape):
            if c.startswith(_ELLIPSIS):
                continue  # broadcast dimensions may be 1 here and larger elsewhere
            if extent.setdefault(c, e) != e:
                raise ValueError(f"{op}: letter {c!r} has extents {extent[c]} and {e} "
                                 f"(operand {p}, '{t.name}', shape {t.shape})")
        terms.append(labels)
    letters = [c for term in terms for c in term if not c.startswith(_ELLIPSIS)]
    if arrow:
        out_raw = _split_term(rhs, subscripts)
        if ell and _ELLIPSIS not in out_raw:
            raise ValueError(f"{op}: the inputs of {subscripts!r} have '...' dimensions "
                             f"{ell} but the output has no '...' to receive them")
        out: list[str] = []
        for c in out_raw:
            out.extend(ell_labels if c == _ELLIPSIS else [c])
    else:  # implicit output: the '...' dimensions, then the letters used once, sorted
        out = ell_labels + sorted(c for c in set(letters) if letters.count(c) == 1)
    for c in out:
        if out.count(c) > 1:
            raise ValueError(f"{op}: output subscripts {rhs!r} repeat {c!r}")
        if c not in extent:
            raise ValueError(f"{op}: output subscript {c!r} of {subscripts!r} does not "
                             "appear in any input")
    return terms, out, extent


def einsum(subscripts: str, *operands: Tensor, name: str | None = None) -> Tensor:
    """Einstein summation (``numpy.einsum``).

    Each letter names an axis; letters missing from the output are summed (one reduce
    axis per letter, named after it); a letter repeated within one operand takes its
    diagonal. ``...`` stands for broadcast leading dimensions (extent-1 dimensions
    broadcast, as in NumPy). Without ``->`` the output is the ``...`` dimensions, then the
    letters used once, alphabetically.

    Parameters
    ----------
    subscripts : str
        E.g. ``"ij,jk->ik"``, ``"bij,bjk->bik"``, ``"ii->i"``, ``"ij->"``, ``"i,i"``,
        ``"...ij,...jk->...ik"``.
    *operands : Tensor
        One per input term; a letter must have one extent everywhere.
    name : str, optional
        Output name (default ``T_einsum``).

    Returns
    -------
    Tensor
        Its index variables are named by the output letters (``e0, e1, ...`` for ``...``
        dimensions): ``T_einsum[i, k] = sum(A[i, j] * B[j, k], j in [0, 3))``.

    Raises
    ------
    TypeError
        ``subscripts`` is not a string or an operand is not a tensor.
    ValueError
        Malformed subscripts, wrong operand count or rank, inconsistent extents.
    """
    op = "topi.einsum"
    for p, t in enumerate(operands):
        check_tensor(t, op, f"operands[{p}]")
    if not operands:
        raise ValueError(f"{op}: needs at least one operand")
    terms, out, extent = _parse_einsum(subscripts, operands)
    summed = [c for c in dict.fromkeys(c for term in terms for c in term) if c not in out]

    def factors(idx: Index, ks: Index) -> list[Expr]:
        var = {**dict(zip(out, idx)), **dict(zip(summed, ks))}
        reads = []
        for term, t in zip(terms, operands):
            # a broadcast ('...') dimension of extent 1 reads index 0
            index = tuple(Const(0, int32) if t.shape[d] == 1 and extent[c] > 1 else var[c]
                          for d, c in enumerate(term))
            reads.append(t[index])
        return reads

    def readable(label: str) -> str:
        return "e" + label[len(_ELLIPSIS):] if label.startswith(_ELLIPSIS) else label

    return _contract([extent[c] for c in out], [extent[c] for c in summed], factors,
                     name or "T_einsum", names=[readable(c) for c in out],
                     reduce_names=[readable(c) for c in summed])


register_tensor_operators({"matmul": matmul})
