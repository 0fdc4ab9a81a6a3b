"""Reductions over axes, with NumPy's ``axis``/``keepdims`` conventions.

``axis`` is None (every axis: the result is 0-d), an int or a tuple of ints; ``keepdims``
keeps reduced axes with extent 1. A reduction over no axis (a 0-d input, or ``axis=()``)
or over a single point (every reduced extent 1) is a copy: no reduction loop, and a
gradient that is one pass (a product's or a max's over one point needs no extra pass).
Each reduction is one compute whose whole body is the reduction (a reduction cannot sit
inside arithmetic), so ops that post-process a reduction are several computes:

    mean      = X_red_sum (sum)             -> X_red = X_red_sum / count
    argmax    = X_red_temp (index, value)   -> X_red = X_red_temp.v0
    logsumexp = X_red_max (max) -> X_red_sum (sum of exp(x - max)) -> X_red = log(sum) + max

Outputs are named ``<input>_red`` as in TVM's topi (``name=`` overrides; intermediates
are ``<name>_<part>``); reduce axes are ``k`` (one) or ``k0, k1, ...``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import te
from ..dtype import DType, float32, int32
from ..ir import fold
from ..ir.expr import Const, Expr, IterVar, Op
from ..ir.tensor import Tensor
from .tag import COMM_REDUCE, COMM_REDUCE_IDX, ELEMWISE
from .utils import check_tensor, compute_nd, normalize_axis, reduce_axes
from .utils import prod as product  # `prod` is the reduction op defined below

__all__ = [
    "all",
    "any",
    "argmax",
    "arg_reducer",
    "argmin",
    "logsumexp",
    "max",
    "mean",
    "min",
    "prod",
    "sum",
]

Index = tuple[Expr, ...]


@dataclass(frozen=True)
class _Plan:
    """Which axes of ``x`` a reduction removes, and how output indices map to input ones."""

    x: Tensor
    axes: tuple[int, ...]
    keepdims: bool

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(1 if d in self.axes else e for d, e in enumerate(self.x.shape)
                     if self.keepdims or d not in self.axes)

    @property
    def reduced_extents(self) -> list[int]:
        return [self.x.shape[d] for d in self.axes]

    def kept(self, idx: Index) -> Index:
        """Output indices without the reduced axes (indices into a keepdims=False result)."""
        if not self.keepdims:
            return idx
        return tuple(ix for d, ix in enumerate(idx) if d not in self.axes)

    @property
    def single_point(self) -> bool:
        """Whether each output reduces one input point (a copy)."""
        return product(self.reduced_extents) == 1

    def source(self, idx: Index, reduced: list[Expr]) -> Index:
        """The input index read at output ``idx`` and position ``reduced`` (one index per
        reduced axis)."""
        free = iter(self.kept(idx))
        by_axis = dict(zip(self.axes, reduced))
        return tuple(by_axis[d] if d in by_axis else next(free) for d in range(self.x.ndim))


def _plan(op: str, x: Any, axis: Any, keepdims: Any) -> _Plan:
    what = f"topi.{op}"
    check_tensor(x, what)
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"{what}: keepdims must be a bool, got {type(keepdims).__name__} "
                        f"{keepdims!r}")
    return _Plan(x, normalize_axis(axis, x.ndim, what), bool(keepdims))


def _reduce_compute(plan: _Plan, value: Callable[[Expr, Index], Expr],
                    reducer: Callable[[Expr, list[IterVar]], Expr], name: str) -> Tensor:
    """``name[idx] = reducer(value(x[source], idx), ks)`` over fresh reduce axes ``ks``
    (just ``value(x[source], idx)`` when nothing is reduced or a single point is)."""
    def body(idx: Index) -> Expr:
        if plan.single_point:
            return value(plan.x[plan.source(idx, [Const(0, int32)] * len(plan.axes))], idx)
        ks = reduce_axes(plan.reduced_extents)
        return reducer(value(plan.x[plan.source(idx, [k.var for k in ks])], idx), ks)

    return compute_nd(plan.out_shape, body, name, COMM_REDUCE)


# -- sum, prod, max, min, all, any ----------------------------------------------------

def _source_dtype(accept_bool_as: DType | None, need_bool: bool) -> Callable[[str, DType], DType]:
    """The dtype a reduction accumulates in, given the input dtype (or a TypeError)."""
    def pick(op: str, d: DType) -> DType:
        if need_bool and not d.is_bool:
            raise TypeError(f"topi.{op}: expects a bool tensor, got {d}; compare first "
                            "(e.g. topi.not_equal(x, 0))")
        if d.is_bool and accept_bool_as is not None:
            return accept_bool_as
        return d
    return pick


_ALL = te.comm_reducer(lambda x, y: x & y, lambda t: te.const(True, t), name="all")
_ANY = te.comm_reducer(lambda x, y: x | y, lambda t: te.const(False, t), name="any")

# op -> (reducer, accumulation dtype for an input dtype, what it computes)
_REDUCTIONS: dict[str, tuple[Any, Callable[[str, DType], DType], str]] = {
    "sum": (te.sum, _source_dtype(int32, False), "The sum (bool counts as int32)"),
    "prod": (te.prod, _source_dtype(int32, False), "The product (bool as int32)"),
    "max": (te.max, _source_dtype(None, False), "The maximum"),
    "min": (te.min, _source_dtype(None, False), "The minimum"),
    "all": (_ALL, _source_dtype(None, True), "Whether every element is true (bool input)"),
    "any": (_ANY, _source_dtype(None, True), "Whether some element is true (bool input)"),
}


def _make_reduction(op: str) -> Callable[..., Tensor]:
    reducer, pick_dtype, doc = _REDUCTIONS[op]

    def fn(x: Tensor, axis: Any = None, keepdims: bool = False,
           name: str | None = None) -> Tensor:
        plan = _plan(op, x, axis, keepdims)
        d = pick_dtype(op, x.dtype)
        return _reduce_compute(plan, lambda v, idx: fold.cast(d, v),
                               lambda v, ks: reducer(v, axis=ks), name or f"{x.name}_red")

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"""{doc} of ``x`` over ``axis`` (``numpy.{op}``).

    Parameters
    ----------
    x : Tensor
    axis : None, int or tuple of int
        The axes to reduce (None: all, giving a 0-d tensor); negative values count from
        the end.
    keepdims : bool
        Keep the reduced axes with extent 1.
    name : str, optional
        Output name (default ``<x.name>_red``).

    Returns
    -------
    Tensor
        With ``x``'s dtype{" (int32 for bool input)" if op in ("sum", "prod") else ""}.

    Raises
    ------
    TypeError
        ``x`` is not a tensor{" or not bool" if op in ("all", "any") else ""}, an axis is
        not an int, ``keepdims`` is not a bool.
    ValueError
        An axis is out of range or repeated.
    """
    return fn


sum = _make_reduction("sum")
prod = _make_reduction("prod")
max = _make_reduction("max")
min = _make_reduction("min")
all = _make_reduction("all")
any = _make_reduction("any")


def _float_dtype(d: DType) -> DType:
    return d if d.is_float else float32


def mean(x: Tensor, axis: Any = None, keepdims: bool = False,
         name: str | None = None) -> Tensor:
    """The arithmetic mean over ``axis``: a sum, then a division by the count.

    Parameters
    ----------
    x : Tensor
    axis : None, int or tuple of int
    keepdims : bool
    name : str, optional
        Output name (default ``<x.name>_red``; the sum is ``<name>_sum``).

    Returns
    -------
    Tensor
        Float inputs keep their dtype; integer and bool inputs give float32.
    """
    plan = _plan("mean", x, axis, keepdims)
    name = name or f"{x.name}_red"
    d = _float_dtype(x.dtype)
    total = _reduce_compute(plan, lambda v, idx: fold.cast(d, v),
                            lambda v, ks: te.sum(v, axis=ks), f"{name}_sum")
    count = product(plan.reduced_extents)
    # (a symbolic count: its expression, converted to the float dtype)
    divisor = Const(count, d) if isinstance(count, int) else fold.cast(d, count)
    return compute_nd(total.shape, lambda idx: total[idx] / divisor, name, ELEMWISE)


# -- argmax, argmin --------------------------------------------------------------------

def arg_reducer(op: str, better: Op) -> Any:
    """(index, value) pairs: keep the better value, the smaller index on ties (so the
    result is the first extreme whatever the order of combination). The identity's index
    is INT32_MAX so that any real element wins a tie with it."""
    def fcombine(acc: tuple[Expr, Expr], new: tuple[Expr, Expr]) -> tuple[Expr, Expr]:
        (i0, v0), (i1, v1) = acc, new
        take = fold.compare(better, v1, v0) | (fold.compare(Op.EQ, v1, v0) & (i1 < i0))
        return te.if_then_else(take, i1, i0), te.if_then_else(take, v1, v0)

    def fidentity(index_dtype: str, value_dtype: str) -> tuple[Expr, Expr]:
        return (te.max_value(index_dtype),
                te.extreme_value(value_dtype, highest=better is Op.LT))

    return te.comm_reducer(fcombine, fidentity, name=op)


def _make_arg(op: str, better: Op) -> Callable[..., Tensor]:
    reducer = arg_reducer(op, better)
    extreme = "maximum" if better is Op.GT else "minimum"

    def fn(x: Tensor, axis: Any = None, keepdims: bool = False,
           name: str | None = None) -> Tensor:
        plan = _plan(op, x, axis, keepdims)
        name = name or f"{x.name}_red"
        if not plan.axes:  # nothing reduced: every element is its own first extreme
            return compute_nd(plan.out_shape, lambda idx: Const(0, int32), name,
                              COMM_REDUCE_IDX)
        extents = plan.reduced_extents

        def body(idx: Index) -> Any:
            ks = reduce_axes(extents)
            flat: Expr = Const(0, int32)
            for k, e in zip(ks, extents):  # row-major position within the reduced axes
                flat = flat * e + k.var
            return reducer((flat, x[plan.source(idx, [k.var for k in ks])]), axis=ks)

        index, _ = compute_nd(plan.out_shape, body, f"{name}_temp", COMM_REDUCE_IDX)
        return compute_nd(plan.out_shape, lambda idx: index[idx], name, COMM_REDUCE_IDX)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"""The int32 index of the {extreme} of ``x`` over ``axis``
    (``numpy.{op}``; the first one on ties).

    Over several axes (or ``axis=None``) the index is the row-major position within the
    reduced axes, as NumPy's flat index for ``axis=None``. NaN is not treated specially.

    Parameters
    ----------
    x : Tensor
    axis : None, int or tuple of int
    keepdims : bool
    name : str, optional
        Output name (default ``<x.name>_red``; the (index, value) reduction is
        ``<name>_temp``).

    Returns
    -------
    Tensor
        int32.
    """
    return fn


argmax = _make_arg("argmax", Op.GT)
argmin = _make_arg("argmin", Op.LT)


# -- logsumexp -------------------------------------------------------------------------

def logsumexp(x: Tensor, axis: Any = None, keepdims: bool = False,
              name: str | None = None) -> Tensor:
    """``log(sum(exp(x)))`` over ``axis``, computed stably as
    ``m + log(sum(exp(x - m)))`` with ``m`` the maximum (``scipy.special.logsumexp``).

    An infinite maximum is not subtracted (the shift is 0 then), so all ``-inf`` inputs
    give ``-inf`` and a ``+inf`` input gives ``+inf``.

    Parameters
    ----------
    x : Tensor
    axis : None, int or tuple of int
    keepdims : bool
    name : str, optional
        Output name (default ``<x.name>_red``; intermediates ``<name>_max``,
        ``<name>_sum``).

    Returns
    -------
    Tensor
        Float inputs keep their dtype; integer and bool inputs give float32.
    """
    plan = _plan("logsumexp", x, axis, keepdims)
    name = name or f"{x.name}_red"
    d = _float_dtype(x.dtype)
    inner = _Plan(x, plan.axes, keepdims=False)
    big = _reduce_compute(inner, lambda v, idx: fold.cast(d, v),
                          lambda v, ks: te.max(v, axis=ks), f"{name}_max")
    inf = Const(float("inf"), d)

    def shift(idx: Index) -> Expr:  # the max, or 0 where it is infinite
        m = big[idx]
        return te.if_then_else(te.abs(m) < inf, m, Const(0, d))

    total = _reduce_compute(inner, lambda v, idx: te.exp(fold.cast(d, v) - shift(idx)),
                            lambda v, ks: te.sum(v, axis=ks), f"{name}_sum")
    return compute_nd(plan.out_shape,
                      lambda idx: te.log(total[plan.kept(idx)]) + shift(plan.kept(idx)),
                      name, ELEMWISE)
