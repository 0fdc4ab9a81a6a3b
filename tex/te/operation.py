"""User builders for tensors: placeholder, compute, reduce_axis, var, const.

Every argument is checked here, so a mistake is reported where it is made, naming the
tensor and saying what was expected.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtype import as_dtype
from ..ir import fold
from ..ir.expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    IterVar,
    Range,
    Select,
    Unary,
    Var,
    as_expr,
)
from ..ir.tensor import ComputeOp, PlaceholderOp, Tensor, TensorSlice
from ..ir.verify import check_compute_body

__all__ = ["placeholder", "compute", "reduce_axis", "var", "size_var", "const", "check_shape",
           "symbolic_extent"]


_INT32_MAX = 2**31 - 1  # index variables and loop counters are int32


def _int_value(value: Any) -> int | None:
    """An extent or bound as an int: ints, integer constants, and floats that hold an
    integer (TVM's tutorials write ``(N / bn, K, bn)``, a float in Python 3)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    if isinstance(value, Const) and value.dtype.is_int:
        return int(value.value)
    return None


def _is_symbolic(value: Any) -> bool:
    """Whether ``value`` is a tex expression or iteration variable (a symbolic extent)."""
    return isinstance(value, (Expr, IterVar))


_SHAPE_VAR_KINDS = ("var", "size")


def symbolic_extent(value: Any, what: str) -> Expr | None:
    """``value`` as a symbolic extent, or None when it is not an expression: an integer
    expression over ``tex.var``/``tex.size_var`` variables and constants (no tensor reads,
    reductions or index variables), simplified so that equal sizes are the same node."""
    from ..arith import simplify
    from ..ir.visit import post_order

    if isinstance(value, IterVar):
        raise TypeError(f"{what}: the index variable '{value.name}' cannot be an extent; "
                        "extents are ints or expressions over tex.var/tex.size_var")
    if not isinstance(value, Expr):
        return None
    if not value.dtype.is_int:
        raise TypeError(f"{what}: extent {value} has dtype {value.dtype}; extents are integers")
    for node in post_order(value):
        if isinstance(node, Var) and node.kind not in _SHAPE_VAR_KINDS:
            raise TypeError(f"{what}: extent {value} uses the index variable '{node.name}'; "
                            "extents are ints or expressions over tex.var/tex.size_var")
        if not isinstance(node, (Var, Const, Binary, Unary, Select, Compare, Cast)):
            raise TypeError(f"{what}: extent {value} reads {node}; extents are ints or "
                            "expressions over tex.var/tex.size_var")
    return simplify(value)


def _extent(value: Any, what: str) -> int | Expr | None:
    """An int extent as an int, a symbolic one as its simplified expression (a constant
    one as an int), anything else None."""
    got = _int_value(value)
    if got is not None:
        return got
    e = symbolic_extent(value, what)
    if isinstance(e, Const):
        return int(e.value)
    return e


def check_shape(shape: Any, what: str) -> tuple[int | Expr, ...]:
    """A shape as a tuple of positive Python ints and symbolic extents (integer
    expressions over ``tex.var``/``tex.size_var``; a single int or expression means 1-D)."""
    if _int_value(shape) is not None or isinstance(shape, Expr):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"{what}: shape must be a tuple of ints, got {type(shape).__name__} "
                        f"{shape!r}")
    dims: list[int | Expr] = []
    for d, extent in enumerate(shape):
        value = _extent(extent, f"{what}: dimension {d}")
        if value is None:
            raise TypeError(f"{what}: dimension {d} of shape {_show(shape)} is "
                            f"{type(extent).__name__} {extent!r}; expected an int or an "
                            "integer expression over tex.var/tex.size_var")
        if isinstance(value, int):
            if value <= 0:
                raise ValueError(f"{what}: dimension {d} of shape {_show(shape)} is {value}; "
                                 "extents must be positive")
            if value > _INT32_MAX:
                raise ValueError(f"{what}: dimension {d} of shape {_show(shape)} is {value}; "
                                 f"extents must fit in int32 (at most {_INT32_MAX}), the "
                                 "dtype of index variables")
        dims.append(value)
    return tuple(dims)


def _show(shape: Any) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what}: name must be a non-empty string, got {name!r}")
    return name


def placeholder(shape: Any, dtype: Any = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor.

    Parameters
    ----------
    shape : tuple of int
        Positive extents; ``()`` makes a 0-d (scalar) tensor.
    dtype : str
        One of the dtypes in ``tex.dtype.DTYPES`` (default ``"float32"``).
    name : str
        Used in printing, errors and as the argument name of built functions.

    Returns
    -------
    Tensor

    Example
    -------
    >>> X = tex.placeholder((32, 100), name="X")
    """
    name = _check_name(name, "placeholder")
    what = f"placeholder '{name}'"
    return PlaceholderOp(name, check_shape(shape, what), as_dtype(dtype, what)).output(0)


def reduce_axis(dom: Any, name: str = "rv") -> IterVar:
    """A reduction axis over ``[lo, hi)``.

    Parameters
    ----------
    dom : (int, int) or Range
        Lower bound (inclusive) and upper bound (exclusive); the extent must be positive.
    name : str

    Example
    -------
    >>> k = tex.reduce_axis((0, 100), name="k")
    """
    name = _check_name(name, "reduce_axis")
    what = f"reduce_axis '{name}'"
    if isinstance(dom, Range):
        lo, hi = dom.min, dom.stop
    elif isinstance(dom, (tuple, list)) and len(dom) == 2:
        lo, hi = dom
    else:
        raise TypeError(f"{what}: expected a (lo, hi) pair, got {dom!r}")
    lo_, hi_ = _extent(lo, f"{what}: lower bound"), _extent(hi, f"{what}: upper bound")
    if lo_ is None or hi_ is None:
        raise TypeError(f"{what}: bounds must be ints, got ({lo!r}, {hi!r}); a symbolic "
                        "bound is an integer expression over tex.var/tex.size_var")
    if isinstance(lo_, int) and isinstance(hi_, int):
        if hi_ <= lo_:
            raise ValueError(f"{what}: empty range [{lo_}, {hi_}); need lo < hi")
        if lo_ < -_INT32_MAX - 1 or hi_ - lo_ > _INT32_MAX or hi_ > _INT32_MAX + 1:
            raise ValueError(f"{what}: range [{lo_}, {hi_}) does not fit in int32, "
                             "the dtype of index variables")
        return IterVar(Var(name, "int32", kind="reduce"), Range(lo_, hi_ - lo_))
    extent = _extent(hi_ - lo_, f"{what}: extent")
    if isinstance(extent, int) and extent <= 0:
        raise ValueError(f"{what}: empty range [{lo_}, {hi_}); need lo < hi")
    return IterVar(Var(name, "int32", kind="reduce"), Range(lo_, extent))


def var(name: str = "v", dtype: Any = "int32") -> Var:
    """A free scalar variable (every call makes a new one, even with an equal name)."""
    return Var(_check_name(name, "var"), as_dtype(dtype, f"var '{name}'"), kind="var")


def size_var(name: str = "size", dtype: Any = "int32") -> Var:
    """A free integer variable known to be non-negative (TVM's ``size_var``): bounds and
    the simplifier use it, and a built function refuses a negative value for it."""
    d = as_dtype(dtype, f"size_var '{name}'")
    if not d.is_integral or d.is_bool:
        raise TypeError(f"size_var '{name}': a size is an integer, got dtype {d}")
    return Var(_check_name(name, "size_var"), d, kind="size")


def const(value: Any, dtype: Any = None) -> Const:
    """A constant of ``dtype`` (default: int32 for ints, float32 for floats, bool)."""
    return fold.const(value, dtype)


def _index_names(fcompute: Callable[..., Any], ndim: int, name: str,
                 shape: tuple[int, ...]) -> list[str]:
    """The lambda's parameter names (TVM prints T[i, j], not T[ax0, ax1])."""
    try:
        sig = inspect.signature(fcompute)
    except (TypeError, ValueError):
        return [f"ax{d}" for d in range(ndim)]
    names: list[str] = []
    required: list[str] = []
    variadic = False
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
            if p.default is p.empty:
                required.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            variadic = True
    if variadic and len(names) <= ndim:
        return names + [f"ax{d}" for d in range(len(names), ndim)]
    if len(names) != ndim and len(required) == ndim:
        return required  # `lambda i, j, w=w: ...`: defaults are captured values, not indices
    if len(names) != ndim:
        arg = "argument" if len(names) == 1 else "arguments"
        raise ValueError(f"compute '{name}': fcompute takes {len(names)} index {arg} "
                         f"but shape {shape} has {ndim} dimensions")
    return names


def _as_body(value: Any, name: str) -> Expr:
    if isinstance(value, (Tensor, TensorSlice)):
        raise TypeError(f"compute '{name}': fcompute returned the tensor '{value.name}'; "
                        "return an element expression such as A[i, j]")
    return as_expr(value, f"compute '{name}': fcompute result")


def compute(shape: Any, fcompute: Callable[..., Any], name: str = "compute", tag: str = "",
            attrs: dict[str, Any] | None = None) -> Any:
    """A tensor whose elements are given by ``fcompute(*indices)``.

    Parameters
    ----------
    shape : tuple of int
        The output shape; fcompute takes one index variable per dimension.
    fcompute : callable
        Returns an expression (or a tuple of them: a multi-output compute). A reduction
        (``tex.sum`` etc.) must be the whole expression.
    name, tag : str
    attrs : dict, optional

    Returns
    -------
    Tensor, or a tuple of Tensors for a multi-output compute.

    Raises
    ------
    ValueError
        wrong fcompute arity, a reduction nested in arithmetic, a reduce axis used outside
        its reduction, invalid shape.

    Example
    -------
    >>> k = tex.reduce_axis((0, 100), name="k")
    >>> T = tex.compute((32, 10), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k), name="T")
    """
    name = _check_name(name, "compute")
    if not callable(fcompute):
        raise TypeError(f"compute '{name}': fcompute must be callable, got "
                        f"{type(fcompute).__name__}")
    dims = check_shape(shape, f"compute '{name}'")
    names = _index_names(fcompute, len(dims), name, dims)
    axis = [IterVar(Var(n, "int32", kind="axis"), Range(0, d)) for n, d in zip(names, dims)]
    result = fcompute(*(iv.var for iv in axis))
    multi = isinstance(result, (tuple, list))
    body = [_as_body(v, name) for v in (result if multi else [result])]
    if not body:
        raise ValueError(f"compute '{name}': fcompute returned an empty tuple")
    check_compute_body(name, axis, body)
    op = ComputeOp(name, axis, body, tag=tag, attrs=attrs)
    return op.outputs if multi else op.output(0)
