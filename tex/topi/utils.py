"""Shared argument handling for the operator library: tensor checks, broadcasting,
axis normalization, the index arithmetic several ops share
(row-major ravel/unravel), and TVM's ``topi.utils`` helpers for constant shapes
(``get_const_tuple``, ``get_const_int``). Every topi op validates through these, so errors
read the same everywhere: ``topi.add: shapes (2, 3) and (4,) do not broadcast``.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import te
from ..arith.extent import Extent, exceeds_int32, extent_product, same_extent
from ..arith.simplifier import simplify
from ..dtype import DTYPES, int32
from ..ir import fold
from ..ir.expr import Const, Expr, ExprOp, IterVar, Var
from ..ir.tensor import Shape, Tensor

__all__ = [
    "Index",
    "broadcast_indices",
    "broadcast_shape",
    "check_tensor",
    "compute_nd",
    "equal_const_int",
    "get_const_float",
    "get_const_int",
    "get_const_tuple",
    "get_float_tuple",
    "index_names",
    "int_list",
    "is_int",
    "is_scalar",
    "new_axis",
    "normalize_axis",
    "normalize_axis_one",
    "pair",
    "prod",
    "ravel",
    "reduce_axes",
    "unravel",
]

Index = tuple[Expr, ...]  # the index of one element: an expression per dimension

_SCALAR_TYPES = (bool, int, float, np.bool_, np.integer, np.floating)


def check_tensor(x: Any, op: str, arg: str = "x") -> Tensor:
    """``x`` itself if it is a Tensor, else a TypeError naming the op and argument."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: argument '{arg}' must be a tex Tensor, got "
                        f"{type(x).__name__} {x!r}")
    return x


def is_scalar(x: Any) -> bool:
    """Python/NumPy numbers and scalar expressions (not tensors)."""
    return isinstance(x, (_SCALAR_TYPES, ExprOp))


def is_int(value: Any) -> bool:
    """A Python or NumPy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def int_list(value: Any, op: str, arg: str) -> list[int]:
    """An int or a sequence of ints as a list; TypeError naming the argument otherwise."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not all(is_int(v) for v in values):
        raise TypeError(f"{op}: {arg} must be an int or a sequence of ints, got {value!r}")
    return [int(v) for v in values]


def prod(values: Sequence[Extent]) -> Extent:
    """The product of extents (1 for an empty sequence; an expression when one is
    symbolic)."""
    return extent_product(values)


def broadcast_shape(*shapes: Sequence[int], op: str = "broadcast") -> tuple[int, ...]:
    """The NumPy broadcast of the shapes; ValueError naming the op otherwise."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        extent = 1
        for s in shapes:
            k = d - (ndim - len(s))
            if k < 0:
                continue
            e = s[k]
            if isinstance(e, int) and e == 1:
                continue
            if isinstance(extent, int) and extent == 1:
                extent = e
                continue
            if not same_extent(extent, e):
                # TVM's rule for symbolic extents: equal symbols, or 1
                listed = " and ".join(str(Shape(x)) for x in shapes)
                raise ValueError(f"{op}: shapes {listed} do not broadcast (dimension {d} "
                                 f"from the left of the result has extents {extent} and {e})")
            extent = e
        out.append(extent)
    return tuple(out)


def broadcast_indices(indices: Sequence[Expr], in_shape: Sequence[int]) -> tuple[Expr, ...]:
    """Indices into a tensor of ``in_shape`` broadcast against an output indexed by
    ``indices`` (trailing dimensions align; extent-1 dimensions read index 0)."""
    offset = len(indices) - len(in_shape)
    return tuple(Const(0, indices[offset + d].dtype)
                 if isinstance(in_shape[d], int) and in_shape[d] == 1 else indices[offset + d]
                 for d in range(len(in_shape)))


def normalize_axis_one(axis: Any, ndim: int, op: str) -> int:
    """One axis in ``[-ndim, ndim)`` as a non-negative int."""
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__} {axis!r}")
    a = int(axis)
    if not -ndim <= a < ndim:
        raise ValueError(f"{op}: axis {a} is out of range for a tensor with {ndim} "
                         f"dimensions (valid: {-ndim}..{ndim - 1})")
    return a + ndim if a < 0 else a


def normalize_axis(axis: Any, ndim: int, op: str) -> tuple[int, ...]:
    """``None`` (all axes), an int or a sequence of ints → sorted unique axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    out = [normalize_axis_one(a, ndim, op) for a in axes]
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: axis {axis!r} names an axis twice")
    return tuple(sorted(out))


def new_axis(axis: Any, ndim: int, op: str) -> int:
    """A position in ``[0, ndim]`` at which to insert an axis (negatives count from the
    end of the result, as NumPy)."""
    if not is_int(axis):
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__} {axis!r}")
    a = int(axis)
    if not -ndim - 1 <= a <= ndim:
        raise ValueError(f"{op}: axis {a} is out of range for inserting an axis into a "
                         f"tensor with {ndim} dimensions (valid: {-ndim - 1}..{ndim})")
    return a + ndim + 1 if a < 0 else a


def pair(value: Any, op: str, arg: str) -> tuple[int, int]:
    """An int or a pair of ints → a pair of non-negative ints."""
    vals = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(vals) != 2:
        raise ValueError(f"{op}: {arg} must be an int or a pair of ints, got {value!r}")
    out = []
    for v in vals:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}: {arg} must contain ints, got {value!r}")
        out.append(int(v))
    return out[0], out[1]


# index variables of generated computes: i, j, l, m, ... ("k" is left to reduce axes, "o"
# reads like 0); beyond these, i0, i1, ...
_INDEX_LETTERS = "ijlmnpqrstuvw"


def index_names(ndim: int) -> list[str]:
    """Readable names for the index variables of an ``ndim``-dimensional compute."""
    if ndim <= len(_INDEX_LETTERS):
        return list(_INDEX_LETTERS[:ndim])
    return [f"i{d}" for d in range(ndim)]


def compute_nd(shape: Sequence[int], fbody: Callable[[tuple[Expr, ...]], Any], name: str,
               tag: str = "", names: Sequence[str] | None = None) -> Tensor:
    """``tex.te.compute`` for any rank: ``fbody`` receives the tuple of index variables,
    which are named ``names`` (default :func:`index_names`), so prints read ``T[i, j]``."""
    names = index_names(len(shape)) if names is None else list(names)

    def fcompute(*idx: Expr) -> Any:
        return fbody(tuple(idx))

    # te.compute names the index variables after the signature's parameters
    fcompute.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names])
    return te.compute(tuple(shape), fcompute, name=name, tag=tag)  # type: ignore[no-any-return]


def reduce_axes(extents: Sequence[int], names: Sequence[str] | None = None) -> list[IterVar]:
    """Fresh reduce axes over ``[0, extent)``, named ``k`` (one) or ``k0, k1, ...``."""
    if names is None:
        names = ["k"] if len(extents) == 1 else [f"k{d}" for d in range(len(extents))]
    return [te.reduce_axis((0, e), name=n) for e, n in zip(extents, names)]


# -- row-major flat positions (reshape, take with axis=None) -------------------------------

_INT32_MAX = 2**31 - 1
_INT64 = DTYPES["int64"]


def _strides(shape: Sequence[int]) -> list[int]:
    """Row-major strides, in elements."""
    out = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        out[d] = out[d + 1] * shape[d + 1]
    return out


def ravel(idx: Index, shape: Sequence[int]) -> Expr:
    """The row-major flat position of ``idx`` in ``shape``: ``i*s0 + j*s1 + ...`` (in
    int64 when ``shape`` has more elements than int32 can count)."""
    wide = exceeds_int32(prod(shape))
    flat: Expr = Const(0, _INT64 if wide else int32)
    for ix, stride in zip(idx, _strides(shape)):
        if wide:
            ix = fold.cast(_INT64, ix)
        flat = flat + ix * _extent_expr(stride, flat.dtype)
    return flat


def _extent_expr(value: Any, dtype: Any) -> Expr:
    """An extent (an int, or a symbolic one) as an expression of ``dtype``."""
    return fold.const(value, dtype) if isinstance(value, int) else fold.cast(dtype, value)


def unravel(flat: Expr, shape: Sequence[int]) -> Index:
    """The index of flat position ``flat`` (known to be in range) in ``shape``; with more
    elements than int32 can count, divided in int64 and each index narrowed after."""
    wide = exceeds_int32(prod(shape))
    if wide:
        flat = fold.cast(_INT64, flat)
    out = []
    for d, stride in enumerate(_strides(shape)):
        q = te.floordiv(flat, _extent_expr(stride, flat.dtype))
        ix = q if d == 0 else te.floormod(q, _extent_expr(shape[d], flat.dtype))
        out.append(fold.cast(int32, ix) if ix.dtype is not int32 and not exceeds_int32(shape[d])
                   else ix)  # q < shape[0] already
    return tuple(out)


# -- TVM's topi.utils: constants out of shapes and attributes ------------------------------

def _folded(value: Any) -> Any:
    """``value`` with an expression simplified (a constant one becomes a Const)."""
    if isinstance(value, IterVar):
        value = value.var
    return simplify(value) if isinstance(value, Expr) and not isinstance(value, Const) \
        else value


def get_const_int(expr: Any) -> int:
    """The int value of ``expr``: a Python/NumPy int, or an integer expression that
    simplifies to a constant (TVM's ``topi.utils.get_const_int``).

    Raises
    ------
    TypeError
        ``expr`` is neither an int nor an integer expression (a bool, a float, a string).
    ValueError
        ``expr`` is an integer expression that is not constant (it holds a variable).

    Example
    -------
    >>> topi.utils.get_const_int(tex.const(3) * 4)
    12
    """
    op = "topi.utils.get_const_int"
    if is_int(expr):
        return int(expr)
    value = _folded(expr)
    if not isinstance(value, Expr) or not value.dtype.is_int:
        raise TypeError(f"{op}: expr must be an int or an integer expression, got "
                        f"{type(expr).__name__} {expr!r}")
    if not isinstance(value, Const):
        raise ValueError(f"{op}: expr {expr} is not a constant (it simplifies to {value})")
    return int(value.value)


def get_const_float(expr: Any) -> float:
    """The float value of ``expr``: a Python number or an expression that simplifies to a
    constant (TVM's ``topi.utils.get_const_float``); TypeError/ValueError as
    :func:`get_const_int`."""
    op = "topi.utils.get_const_float"
    if isinstance(expr, (int, float, np.integer, np.floating)) and \
            not isinstance(expr, (bool, np.bool_)):
        return float(expr)
    value = _folded(expr)
    if not isinstance(value, Expr) or value.dtype.is_bool:
        raise TypeError(f"{op}: expr must be a number or a numeric expression, got "
                        f"{type(expr).__name__} {expr!r}")
    if not isinstance(value, Const):
        raise ValueError(f"{op}: expr {expr} is not a constant (it simplifies to {value})")
    return float(value.value)


def equal_const_int(expr: Any, value: int) -> bool:
    """Whether ``expr`` is a constant integer equal to ``value`` (False for anything that
    is not constant), as TVM's ``topi.utils.equal_const_int``."""
    folded = _folded(expr)
    if is_int(folded):
        return int(folded) == value
    return isinstance(folded, Const) and folded.dtype.is_int and folded.value == value


def get_const_tuple(in_tuple: Any) -> tuple[Any, ...]:
    """A shape as a tuple of ints, as TVM's ``topi.utils.get_const_tuple``: each int or
    constant expression becomes an int; a shape variable stays itself, and any other
    integer expression its simplified form (symbolic shapes, API.md §7).

    Parameters
    ----------
    in_tuple : tuple or list
        Ints, ``tex.const`` integers, shape variables or integer expressions (a tensor's
        ``shape``).

    Returns
    -------
    tuple

    Raises
    ------
    TypeError
        ``in_tuple`` is not a sequence, or an element is not an integer.

    Example
    -------
    >>> A = tex.placeholder((2, 3), name="A")
    >>> topi.utils.get_const_tuple(A.shape)
    (2, 3)
    >>> topi.utils.get_const_tuple((tex.const(4), 2 * tex.const(5)))
    (4, 10)
    """
    op = "topi.utils.get_const_tuple"
    if not isinstance(in_tuple, (tuple, list)):
        raise TypeError(f"{op}: in_tuple must be a tuple or list (a shape), got "
                        f"{type(in_tuple).__name__} {in_tuple!r}")
    out: list[Any] = []
    for d, elem in enumerate(in_tuple):
        if is_int(elem):
            out.append(int(elem))
            continue
        value = _folded(elem)
        if not isinstance(value, Expr) or not value.dtype.is_int:
            raise TypeError(f"{op}: element {d} of {in_tuple!r} must be an int or an integer "
                            f"expression, got {type(elem).__name__} {elem!r}")
        out.append(int(value.value) if isinstance(value, Const) else
                   elem if isinstance(elem, Var) else value)
    return tuple(out)


def get_float_tuple(in_tuple: Any) -> tuple[float, ...]:
    """A tuple of floats from numbers or constant expressions (TVM's
    ``topi.utils.get_float_tuple``)."""
    if not isinstance(in_tuple, (tuple, list)):
        raise TypeError("topi.utils.get_float_tuple: in_tuple must be a tuple or list, got "
                        f"{type(in_tuple).__name__} {in_tuple!r}")
    return tuple(get_const_float(e) for e in in_tuple)
