"""What every ``Op`` computes, as NumPy functions: the one definition of scalar semantics.

Used by constant folding (on 0-d arrays) and by the reference interpreter
(``tex.testing.evaluate``, on whole index grids). Both operands of a binary op already
have the node's dtype. Integer semantics follow C/LLVM: wrap-around on overflow, ``DIV``
truncates toward zero; ``FLOORDIV``/``FLOORMOD`` round toward minus infinity; integer
division by zero gives 0 here (it is undefined in compiled code; a constant zero divisor is
refused at construction). Float ``FLOORDIV``/``FLOORMOD`` are NumPy's ``floor_divide`` and
``mod`` (Python's ``//`` and ``%``); float division by zero gives IEEE inf/nan. ``ROUND``
rounds half to even. Callers run these under ``np.errstate(all="ignore")``.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .expr import Op

__all__ = ["NUMPY_UNARY", "NUMPY_BINARY", "numpy_cast"]

Array = np.ndarray


def _int_truncdiv(a: Array, b: Array) -> Array:
    safe_b = np.where(b == 0, 1, b)
    q = np.floor_divide(a, safe_b)
    r = a - q * safe_b
    # floor and truncation differ when the remainder is non-zero and the signs differ
    q = np.where((r != 0) & ((a < 0) != (safe_b < 0)), q + 1, q)
    return np.where(b == 0, 0, q).astype(a.dtype, copy=False)


def _div(a: Array, b: Array) -> Array:
    if a.dtype.kind == "f":
        return np.true_divide(a, b)
    return _int_truncdiv(a, b)


def _floordiv(a: Array, b: Array) -> Array:
    if a.dtype.kind == "f":
        # NumPy's (Python's) definition, not floor(a / b): the quotient is not rounded
        # before the floor (float16 is computed in float32, as the compiled code does)
        return np.floor_divide(a, b)
    safe_b = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.floor_divide(a, safe_b)).astype(a.dtype, copy=False)


def _floormod(a: Array, b: Array) -> Array:
    if a.dtype.kind == "f":
        return np.mod(a, b)
    safe_b = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.mod(a, safe_b)).astype(a.dtype, copy=False)


def _pow(a: Array, b: Array) -> Array:
    if a.dtype.kind == "f":
        # NumPy computes a uniform exponent 0.5 as sqrt: C's pow (compiled code) has
        # pow(-0, 0.5) = +0 and pow(-inf, 0.5) = +inf where sqrt gives -0 and nan
        out = np.power(a, b)
        return np.where((b == 0.5) & ((a == 0) | (a == -np.inf)), np.abs(a), out)
    neg = b < 0
    out = np.power(a, np.where(neg, 0, b))
    # integer a ** negative b truncates 1 / a**|b| toward zero: only |a| == 1 survives
    odd = np.mod(b, 2) != 0
    neg_value = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0))
    return np.where(neg, neg_value, out).astype(a.dtype, copy=False)


def _sigmoid(a: Array) -> Array:
    # evaluated on the side where exp cannot overflow
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1 / (1 + e), e / (1 + e)).astype(a.dtype, copy=False)


def _erf(a: Array) -> Array:
    return np.vectorize(math.erf, otypes=[a.dtype])(a) if a.size else a.copy()


def _int_identity_or(fn: Callable[[Array], Array]) -> Callable[[Array], Array]:
    return lambda a: fn(a) if a.dtype.kind == "f" else a.copy()


NUMPY_UNARY: dict[Op, Callable[[Array], Array]] = {
    Op.NEG: np.negative,
    Op.NOT: np.logical_not,
    Op.EXP: np.exp,
    Op.LOG: np.log,
    Op.LOG2: np.log2,
    Op.LOG10: np.log10,
    Op.SQRT: np.sqrt,
    Op.RSQRT: lambda a: (1 / np.sqrt(a)).astype(a.dtype, copy=False),
    Op.SIN: np.sin,
    Op.COS: np.cos,
    Op.TAN: np.tan,
    Op.TANH: np.tanh,
    Op.SIGMOID: _sigmoid,
    Op.ERF: _erf,
    Op.ABS: np.abs,
    Op.FLOOR: _int_identity_or(np.floor),
    Op.CEIL: _int_identity_or(np.ceil),
    Op.ROUND: _int_identity_or(np.rint),
    Op.TRUNC: _int_identity_or(np.trunc),
}

NUMPY_BINARY: dict[Op, Callable[[Array, Array], Array]] = {
    Op.ADD: np.add,
    Op.SUB: np.subtract,
    Op.MUL: np.multiply,
    Op.DIV: _div,
    Op.FLOORDIV: _floordiv,
    Op.FLOORMOD: _floormod,
    Op.POW: _pow,
    Op.MAX: np.maximum,
    Op.MIN: np.minimum,
    Op.AND: np.logical_and,
    Op.OR: np.logical_or,
    Op.EQ: np.equal,
    Op.NE: np.not_equal,
    Op.LT: np.less,
    Op.LE: np.less_equal,
    Op.GT: np.greater,
    Op.GE: np.greater_equal,
}


def numpy_cast(a: Array, dtype: np.dtype) -> Array:
    """Convert like a C cast: floats to integers truncate toward zero."""
    if a.dtype.kind == "f" and dtype.kind in "iu":
        a = np.trunc(a)
    if dtype.kind == "b":
        return a != 0
    return a.astype(dtype)
