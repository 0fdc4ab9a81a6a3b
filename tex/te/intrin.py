"""Scalar intrinsics and expression helpers: exp, log, ..., if_then_else, floordiv,
max_value/min_value. Each accepts an expression or a Python number."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..dtype import as_dtype
from ..ir import fold
from ..ir.expr import Const, Expr, Op
from ..ir.tensor import Tensor

__all__ = [
    "exp", "log", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid",
    "abs", "floor", "ceil", "round", "trunc", "erf", "power", "if_then_else", "select",
    "floordiv", "floormod", "truncdiv", "max_value", "min_value", "extreme_value",
]


def _intrinsic(op: Op, doc: str) -> Any:
    def fn(x: Any) -> Expr:
        if isinstance(x, Tensor):
            raise TypeError(f"tex.{op.value} works on scalar expressions (e.g. "
                            f"tex.{op.value}(A[i])); use topi.{op.value} on the tensor "
                            f"'{x.name}'")
        return fold.unary(op, x)
    fn.__name__ = fn.__qualname__ = op.value
    fn.__doc__ = doc
    return fn


exp = _intrinsic(Op.EXP, "e ** x.")
log = _intrinsic(Op.LOG, "Natural logarithm.")
log2 = _intrinsic(Op.LOG2, "Base-2 logarithm.")
log10 = _intrinsic(Op.LOG10, "Base-10 logarithm.")
sqrt = _intrinsic(Op.SQRT, "Square root.")
rsqrt = _intrinsic(Op.RSQRT, "1 / sqrt(x).")
sin = _intrinsic(Op.SIN, "Sine.")
cos = _intrinsic(Op.COS, "Cosine.")
tan = _intrinsic(Op.TAN, "Tangent.")
tanh = _intrinsic(Op.TANH, "Hyperbolic tangent.")
sigmoid = _intrinsic(Op.SIGMOID, "1 / (1 + exp(-x)).")
erf = _intrinsic(Op.ERF, "The error function.")
abs = _intrinsic(Op.ABS, "Absolute value.")  # noqa: A001
floor = _intrinsic(Op.FLOOR, "Largest integer <= x (identity on integers).")
ceil = _intrinsic(Op.CEIL, "Smallest integer >= x (identity on integers).")
round = _intrinsic(Op.ROUND, "Nearest integer, ties to even (identity on integers).")  # noqa: A001
trunc = _intrinsic(Op.TRUNC, "Integer part, rounding toward zero.")


def power(a: Any, b: Any) -> Expr:
    """``a ** b``."""
    return fold.binary(Op.POW, a, b)


def if_then_else(cond: Any, a: Any, b: Any) -> Expr:
    """``a`` where ``cond`` holds, else ``b`` (alias: ``select``)."""
    return fold.select(cond, a, b)


select = if_then_else


def floordiv(a: Any, b: Any) -> Expr:
    """Division rounding toward minus infinity (``a // b``)."""
    return fold.binary(Op.FLOORDIV, a, b)


def floormod(a: Any, b: Any) -> Expr:
    """The remainder of floordiv, with the sign of ``b`` (``a % b``)."""
    return fold.binary(Op.FLOORMOD, a, b)


def truncdiv(a: Any, b: Any) -> Expr:
    """Integer division rounding toward zero (``/`` on two integers, as in C)."""
    return fold.binary(Op.DIV, a, b)


def _limit(dtype: Any, which: str) -> Const:
    """The largest ("max") or lowest ("min") finite value of ``dtype``."""
    d = as_dtype(dtype, f"{which}_value")
    if d.is_bool:
        return Const(which == "max", d)
    info = np.finfo(d.numpy) if d.is_float else np.iinfo(d.numpy)
    return Const(getattr(info, which), d)


def extreme_value(dtype: Any, highest: bool) -> Const:
    """The value no element beats: +inf/-inf for floats, the dtype's limits otherwise
    (the identity of the max/min reducers)."""
    d = as_dtype(dtype, "extreme_value")
    if d.is_float:
        return Const(float("inf") if highest else float("-inf"), d)
    return _limit(d, "max" if highest else "min")


def max_value(dtype: Any) -> Const:
    """The largest finite value of ``dtype`` (``True`` for bool)."""
    return _limit(dtype, "max")


def min_value(dtype: Any) -> Const:
    """The lowest finite value of ``dtype`` (``False`` for bool); for floats ``-max``,
    not the smallest positive number."""
    return _limit(dtype, "min")
