"""Reducers: sum, max, min, prod, and user-defined ones made with ``comm_reducer``.

A reducer called with an expression and ``axis=`` builds a reduction; called with two
expressions and no axis it is the binary combiner (``tex.max(a, b)``, ``tex.sum(a, b)``),
as in TVM. Tuple reducers (argmax) take and return tuples: one ``Reduce`` per slot.
"""
from __future__ import annotations

import builtins
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..dtype import DTYPES, DType
from ..ir import fold
from ..ir.expr import Binary, CommReducer, Const, Expr, IterVar, Op, Reduce, Var, as_expr
from ..ir.tensor import Tensor
from .intrin import extreme_value

__all__ = ["Reducer", "comm_reducer", "sum", "max", "min", "prod", "all", "any"]


def _builtin(name: str, op: Op, identity: Callable[[DType], Const], d: DType) -> CommReducer:
    x, y = Var("x", d), Var("y", d)
    return CommReducer(name, [x], [y], [Binary(op, x, y)], [identity(d)])


# The built-in reducers for every dtype, made once at import (constant tables).
_BUILTINS: dict[str, dict[DType, CommReducer]] = {
    "sum": {d: _builtin("sum", Op.ADD, lambda t: Const(0, t), d) for d in DTYPES.values()
            if not d.is_bool},
    "prod": {d: _builtin("prod", Op.MUL, lambda t: Const(1, t), d) for d in DTYPES.values()
             if not d.is_bool},
    "max": {d: _builtin("max", Op.MAX, lambda t: extreme_value(t, False), d)
            for d in DTYPES.values()},
    "min": {d: _builtin("min", Op.MIN, lambda t: extreme_value(t, True), d)
            for d in DTYPES.values()},
}
_BINARY_OP = {"sum": Op.ADD, "prod": Op.MUL, "max": Op.MAX, "min": Op.MIN}


def _axes(axis: Any, name: str) -> tuple[IterVar, ...]:
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    if not axes:
        raise ValueError(f"{name}: axis is empty; give at least one tex.reduce_axis")
    for a in axes:
        if isinstance(a, Var):
            raise TypeError(f"{name}: axis '{a.name}' is a variable; reduce over a "
                            "tex.reduce_axis((lo, hi)) IterVar")
        if not isinstance(a, IterVar):
            raise TypeError(f"{name}: axis must be a tex.reduce_axis IterVar, got "
                            f"{type(a).__name__} {a!r}")
        if a.kind != "reduce":
            raise ValueError(f"{name}: '{a.name}' is a data axis of a compute, not a "
                             "reduce axis; create one with tex.reduce_axis((lo, hi))")
    return axes


def _is_axis_arg(value: Any) -> bool:
    if isinstance(value, IterVar) or (isinstance(value, Var) and value.kind == "reduce"):
        return True  # a reduce Var is rejected with a hint by _axes
    # a list holding any IterVar is an axis list too (_axes rejects its other entries)
    return isinstance(value, (list, tuple)) and bool(value) and (
        builtins.any(isinstance(v, IterVar) for v in value)
        or builtins.all(isinstance(v, (IterVar, Var)) for v in value))


def _condition(where: Any, name: str) -> Expr:
    if where is None:
        return Const(True, DTYPES["bool"])
    c = as_expr(where, f"{name}: where")
    if not c.dtype.is_bool:
        raise TypeError(f"{name}: where={c} must be a boolean condition, got {c.dtype}")
    return c


class Reducer:
    """A commutative reducer usable as ``r(expr, axis=k, where=None, init=None)``."""

    def __init__(self, name: str, fcombine: Callable[..., Any] | None,
                 fidentity: Callable[..., Any] | None) -> None:
        self.name = name
        self._fcombine = fcombine
        self._fidentity = fidentity

    def __repr__(self) -> str:
        return f"Reducer({self.name})"

    def __call__(self, expr: Any, axis: Any = None, where: Any = None, init: Any = None,
                 *args: Any) -> Any:
        if args:
            raise TypeError(f"tex.{self.name}: too many positional arguments")
        if axis is None or not _is_axis_arg(axis):
            if axis is None:
                raise ValueError(f"tex.{self.name}: give axis= (the tex.reduce_axis to "
                                 "reduce over), or two operands for the binary form")
            if where is not None or init is not None:
                raise ValueError(f"tex.{self.name}: the binary form takes no where/init")
            return self._binary(expr, axis)
        return self._reduce(expr, _axes(axis, f"tex.{self.name}"), where, init)

    # -- the binary form: tex.max(a, b) ------------------------------------------------
    def _binary(self, a: Any, b: Any) -> Any:
        if isinstance(a, Tensor) or isinstance(b, Tensor):
            raise TypeError(f"tex.{self.name}: operands must be scalar expressions, not "
                            f"tensors; use topi.{'maximum' if self.name == 'max' else self.name}"
                            " for whole tensors")
        if self._fcombine is None:
            return fold.binary(_BINARY_OP[self.name], a, b)
        return self._fcombine(a, b)

    # -- the reduction -----------------------------------------------------------------
    def _reduce(self, expr: Any, axes: tuple[IterVar, ...], where: Any, init: Any) -> Any:
        name = f"tex.{self.name}"
        is_tuple = isinstance(expr, (tuple, list))
        if isinstance(expr, (Tensor,)):
            raise TypeError(f"{name}: expected an element expression such as A[i, k], got "
                            f"the tensor '{expr.name}'")
        source = [as_expr(e, f"{name}: value") for e in (expr if is_tuple else [expr])]
        if not source:
            raise ValueError(f"{name}: empty tuple of values")
        for s in source:
            if isinstance(s, Reduce):
                raise ValueError(f"{name}: value {s} is itself a reduction; nested "
                                 "reductions must be computed as separate tensors")
        combiner = self._combiner([s.dtype for s in source])
        source = [fold.cast(d, s) for s, d in zip(source, combiner.dtypes)]
        cond = _condition(where, name)
        inits: tuple[Expr, ...] = ()
        if init is not None:
            values = init if isinstance(init, (tuple, list)) else [init]
            if len(values) != len(source):
                raise ValueError(f"{name}: init has {len(values)} values, the reducer "
                                 f"has {len(source)} slots")
            inits = tuple(fold.cast(d, as_expr(v, f"{name}: init"))
                          for v, d in zip(values, combiner.dtypes))
        outs = tuple(Reduce(combiner, source, axes, cond, inits, i)
                     for i in range(len(source)))
        return outs if is_tuple else outs[0]

    def _combiner(self, dtypes: list[DType]) -> CommReducer:
        if self._fcombine is None:
            (d,) = dtypes if len(dtypes) == 1 else (None,)
            if d is None:
                raise ValueError(f"tex.{self.name} reduces one value, got {len(dtypes)}")
            table = _BUILTINS[self.name]
            if d not in table:
                raise TypeError(f"tex.{self.name} of a {d} expression is not supported; "
                                "cast it first (e.g. x.astype('int32'))")
            return table[d]
        return _make_combiner(self.name, self._fcombine, self._fidentity, dtypes)


def _check_arity(fn: Callable[..., Any], count: int, name: str, what: str, takes: str) -> None:
    """A TypeError naming the reducer when ``fn`` cannot be called with ``count`` args."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # no signature to check (a builtin): let the call speak
    try:
        sig.bind(*([None] * count))
    except TypeError:
        raise TypeError(f"comm_reducer '{name}': {what} must take {takes}, but its "
                        f"signature is {sig}") from None


def _make_combiner(name: str, fcombine: Callable[..., Any], fidentity: Callable[..., Any] | None,
                   dtypes: Sequence[DType]) -> CommReducer:
    n = len(dtypes)
    _check_arity(fcombine, 2, name, "fcombine", "two arguments (x, y)")
    suffix = (lambda i: "") if n == 1 else (lambda i: str(i))
    lhs = [Var(f"x{suffix(i)}", d) for i, d in enumerate(dtypes)]
    rhs = [Var(f"y{suffix(i)}", d) for i, d in enumerate(dtypes)]
    raw = fcombine(lhs[0], rhs[0]) if n == 1 else fcombine(tuple(lhs), tuple(rhs))
    results = list(raw) if isinstance(raw, (tuple, list)) else [raw]
    if len(results) != n:
        raise ValueError(f"comm_reducer '{name}': fcombine returned {len(results)} values "
                         f"for {n} slots")
    if fidentity is None:
        raise ValueError(f"comm_reducer '{name}': fidentity is required")
    _check_arity(fidentity, n, name, "fidentity",
                 f"{n} dtype name{'s' if n > 1 else ''} (one per reduced value)")
    raw_id = fidentity(*(d.name for d in dtypes))
    ids = list(raw_id) if isinstance(raw_id, (tuple, list)) else [raw_id]
    if len(ids) != n:
        raise ValueError(f"comm_reducer '{name}': fidentity returned {len(ids)} values "
                         f"for {n} slots")
    result = []
    identity = []
    for i, d in enumerate(dtypes):
        r = as_expr(results[i], f"comm_reducer '{name}': fcombine result {i}")
        if r.dtype is not d:
            raise ValueError(f"comm_reducer '{name}': fcombine result {i} ({r}) is {r.dtype}, "
                             f"expected {d} like the reduced value")
        e = fold.cast(d, as_expr(ids[i], f"comm_reducer '{name}': identity {i}"))
        result.append(r)
        identity.append(e)
    return CommReducer(name, lhs, rhs, result, identity)


def comm_reducer(fcombine: Callable[..., Any], fidentity: Callable[..., Any],
                 name: str = "reduce") -> Reducer:
    """Make a commutative reducer.

    Parameters
    ----------
    fcombine : callable
        ``fcombine(x, y)`` combines an accumulator with a value; for a tuple reducer ``x``
        and ``y`` are tuples and it returns a tuple.
    fidentity : callable
        ``fidentity(*dtype_names)`` returns the identity (a tuple for tuple reducers).
    name : str

    Notes
    -----
    The gradient of a reduction depends on its combiner (``tex.autodiff.building_block``):
    ``x + y`` is a sum (each point's derivative, one pass); one that picks one of its
    operands (``max``, ``min``, argmax/argmin tuples) sends the gradient to the selected
    point (one extra pass to find it); ``x * y`` is a product (two extra passes: the count
    of zero factors and the product of the others). Any other combiner is differentiated
    by forward mode inside it, which builds the Jacobian: ``|out| * |in| * |reduction|``
    iterations.

    Example
    -------
    >>> def fcombine(x, y):
    ...     keep = x[1] >= y[1]
    ...     return tex.select(keep, x[0], y[0]), tex.select(keep, x[1], y[1])
    >>> argmax = tex.comm_reducer(fcombine, lambda t0, t1: (tex.const(-1, t0),
    ...                           tex.min_value(t1)), name="argmax")
    >>> idx, val = tex.compute((m,), lambda i: argmax((k.var, A[i, k]), axis=k))
    """
    if not callable(fcombine) or not callable(fidentity):
        raise TypeError("comm_reducer: fcombine and fidentity must be callables")
    if not isinstance(name, str) or not name:
        raise TypeError(f"comm_reducer: name must be a non-empty string, got {name!r}")
    return Reducer(name, fcombine, fidentity)


sum = Reducer("sum", None, None)  # noqa: A001
prod = Reducer("prod", None, None)
max = Reducer("max", None, None)  # noqa: A001
min = Reducer("min", None, None)  # noqa: A001


def all(*conds: Any) -> Expr:  # noqa: A001
    """The conjunction of boolean conditions: ``tex.all(i > 0, i < n)``."""
    return _fold_logical(Op.AND, conds, "all")


def any(*conds: Any) -> Expr:  # noqa: A001
    """The disjunction of boolean conditions: ``tex.any(i < 0, i >= n)``."""
    return _fold_logical(Op.OR, conds, "any")


def _fold_logical(op: Op, conds: Sequence[Any], name: str) -> Expr:
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = conds[0]
    if not conds:
        raise ValueError(f"tex.{name}: give at least one condition")
    out = as_expr(conds[0], f"tex.{name}")
    if not out.dtype.is_bool:
        raise TypeError(f"tex.{name}: condition {out} is {out.dtype}, expected bool")
    for c in conds[1:]:
        out = fold.binary(op, out, c)
    return out
