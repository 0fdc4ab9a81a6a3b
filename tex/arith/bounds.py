"""Interval bounds of integer index expressions.

``bounds(e, dom)`` returns an ``Interval [lo, hi]`` (inclusive, ``None`` for an unbounded
side) that contains every value ``e`` takes when each variable ranges over its domain.

Invariants and assumptions:

- The result is *sound*, not always tight: every value is inside, but correlations between
  sub-terms are ignored (``i - i`` gets ``[lo - hi, hi - lo]``; the rewrite rules cancel
  such terms first). Each node's interval is computed from its children's intervals only.
- Index arithmetic is assumed not to overflow (as in TVM and every index simplifier):
  ``+ - *`` are evaluated on unbounded Python integers. Only a ``Cast`` clips, to the
  target dtype's range (a narrowing cast whose operand may not fit gives the full range).
- Booleans are 0/1: a comparison the intervals decide is a point (``i < 10`` with ``i`` in
  ``[0, 9]`` is ``[1, 1]``), and ``select`` on a decided condition takes that branch.
- A variable absent from the domain is unbounded (unsigned and bool variables are at least
  0 and at most their dtype's maximum). Tensor reads and reductions of integer dtype span
  their dtype's range.
- Division follows ``tex.ir.semantics``: ``//`` and ``%`` round toward minus infinity,
  ``/`` on integers truncates toward zero. Division by an interval containing 0 gives no
  information (the value is undefined in compiled code).

Evaluation is iterative (an explicit stack, no recursion) and memoized per ``Bounds``
object, so deep expressions and shared sub-terms cost one visit per distinct node.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtype import DTYPES, DType
from ..ir.expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    IterVar,
    Op,
    Range,
    Reduce,
    Select,
    TensorRead,
    Unary,
    Var,
    as_expr,
)
from ..ir.visit import evaluate_bottom_up

__all__ = ["Interval", "SymbolicInterval", "Bounds", "extent_facts", "range_interval",
           "bounds", "dom_of", "normalize_dom", "dtype_interval",
           "DomainLike"]

# Arithmetic on interval ends uses "extended integers": Python ints, or -inf / +inf floats.
_INF = math.inf


def _as_end(value: Any, side: str) -> int | None:
    """Normalize one end of an interval: None/±inf mean unbounded, else an exact int."""
    if value is None:
        return None
    if isinstance(value, Const):
        value = value.value
    if isinstance(value, (float, np.floating)):
        if math.isinf(value):
            if (value < 0) != (side == "lo"):
                raise ValueError(f"Interval: {side} end cannot be {value}")
            return None
        if not float(value).is_integer():
            raise ValueError(f"Interval: {side} end {value!r} is not an integer")
        return int(value)
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    raise TypeError(f"Interval: {side} end must be an int, None or ±inf, "
                    f"got {type(value).__name__} {value!r}")


def _lo(x: int | None) -> int | float:
    return -_INF if x is None else x


def _hi(x: int | None) -> int | float:
    return _INF if x is None else x


def _ext_mul(x: int | float, y: int | float) -> int | float:
    """x * y on extended integers, with 0 * inf = 0 (an interval end times a zero end)."""
    if x == 0 or y == 0:
        return 0
    if isinstance(x, float) or isinstance(y, float):
        return _INF if (x > 0) == (y > 0) else -_INF
    return x * y


def _trunc_div(a: int, b: int) -> int:
    """Integer division rounding toward zero (C semantics)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _ext_div(x: int | float, c: int, floor: bool) -> int | float:
    """x / c rounded (floor or toward zero) for an extended x and a non-zero int c."""
    if isinstance(x, float):
        return x if c > 0 else -x
    return x // c if floor else _trunc_div(x, c)


@dataclass(frozen=True, slots=True)
class Interval:
    """The integers ``lo <= v <= hi``; ``None`` (or ±inf on input) marks an unbounded side.

    Never empty: ``lo > hi`` raises ValueError (``intersect`` returns None instead).
    """

    lo: int | None = None
    hi: int | None = None

    def __post_init__(self) -> None:
        lo, hi = _as_end(self.lo, "lo"), _as_end(self.hi, "hi")
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"Interval: empty interval [{lo}, {hi}] (lo > hi)")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    # -- constructors -------------------------------------------------------------------
    @staticmethod
    def everything() -> Interval:
        """The unbounded interval."""
        return _EVERYTHING

    @staticmethod
    def point(value: int) -> Interval:
        """The single integer ``value``."""
        return Interval(value, value)

    @staticmethod
    def _ext(lo: int | float, hi: int | float) -> Interval:
        """From extended ends (ints or ±inf), skipping validation: the hot path of the
        interval arithmetic below, whose results are non-empty by construction."""
        out = object.__new__(Interval)
        object.__setattr__(out, "lo", None if isinstance(lo, float) else lo)
        object.__setattr__(out, "hi", None if isinstance(hi, float) else hi)
        return out

    # -- queries ------------------------------------------------------------------------
    @property
    def is_point(self) -> bool:
        """Whether the interval holds exactly one integer."""
        return self.lo is not None and self.lo == self.hi

    @property
    def is_bounded(self) -> bool:
        return self.lo is not None and self.hi is not None

    def contains(self, other: int | Interval) -> bool:
        """Whether a value (or every value of another interval) lies inside."""
        if isinstance(other, Interval):
            return _lo(self.lo) <= _lo(other.lo) and _hi(other.hi) <= _hi(self.hi)
        return _lo(self.lo) <= other <= _hi(self.hi)

    def __contains__(self, value: int) -> bool:
        return self.contains(value)

    # -- lattice ------------------------------------------------------------------------
    def union(self, other: Interval) -> Interval:
        """The smallest interval holding both (the convex hull)."""
        return Interval._ext(min(_lo(self.lo), _lo(other.lo)), max(_hi(self.hi), _hi(other.hi)))

    def intersect(self, other: Interval) -> Interval | None:
        """The common part, or None when the intervals are disjoint."""
        lo, hi = max(_lo(self.lo), _lo(other.lo)), min(_hi(self.hi), _hi(other.hi))
        return None if lo > hi else Interval._ext(lo, hi)

    # -- arithmetic ---------------------------------------------------------------------
    def neg(self) -> Interval:
        return Interval._ext(-_hi(self.hi), -_lo(self.lo))

    def add(self, other: Interval) -> Interval:
        return Interval._ext(_lo(self.lo) + _lo(other.lo), _hi(self.hi) + _hi(other.hi))

    def sub(self, other: Interval) -> Interval:
        return self.add(other.neg())

    def mul(self, other: Interval) -> Interval:
        corners = [_ext_mul(x, y) for x in (_lo(self.lo), _hi(self.hi))
                   for y in (_lo(other.lo), _hi(other.hi))]
        return Interval._ext(min(corners), max(corners))

    def scale(self, k: int) -> Interval:
        """Every value times the integer ``k``."""
        return self.mul(Interval(k, k))

    def abs(self) -> Interval:
        lo, hi = _lo(self.lo), _hi(self.hi)
        if lo >= 0:
            return self
        if hi <= 0:
            return self.neg()
        return Interval._ext(0, max(-lo, hi))

    def max(self, other: Interval) -> Interval:
        return Interval._ext(max(_lo(self.lo), _lo(other.lo)), max(_hi(self.hi), _hi(other.hi)))

    def min(self, other: Interval) -> Interval:
        return Interval._ext(min(_lo(self.lo), _lo(other.lo)), min(_hi(self.hi), _hi(other.hi)))

    def div_const(self, c: int, floor: bool = True) -> Interval:
        """Values divided by the non-zero int ``c``, rounded down (or toward zero)."""
        if c == 0:
            raise ValueError("Interval.div_const: division by zero")
        a, b = _ext_div(_lo(self.lo), c, floor), _ext_div(_hi(self.hi), c, floor)
        return Interval._ext(min(a, b), max(a, b))  # monotone in the dividend

    def mod_const(self, c: int) -> Interval:
        """Values ``floormod`` the non-zero int ``c``: within [0, c-1] (c > 0) or
        [c+1, 0] (c < 0), and exactly shifted when the range does not wrap."""
        if c == 0:
            raise ValueError("Interval.mod_const: modulo by zero")
        lo, hi = self.lo, self.hi
        if lo is not None and hi is not None and lo // c == hi // c:
            q = lo // c  # one period: x mod c = x - c*q, increasing in x
            return Interval(lo - c * q, hi - c * q)
        return Interval(0, c - 1) if c > 0 else Interval(c + 1, 0)

    def __str__(self) -> str:
        lo = "(-inf" if self.lo is None else f"[{self.lo}"
        hi = "inf)" if self.hi is None else f"{self.hi}]"
        return f"{lo}, {hi}"


@dataclass(frozen=True, slots=True)
class SymbolicInterval(Interval):
    """The domain of a variable whose range is symbolic (``[0, n)`` for a ``tex.var``
    ``n``): ``lo``/``hi`` are int ends that hold for every value of the shape variables,
    ``sym_lo``/``sym_hi`` the exact ends as expressions over them (None: the int end is
    exact). Only domains hold these; interval arithmetic gives plain ``Interval``s, and
    ``Analyzer.linear_bounds`` substitutes the symbolic ends (``i - n`` for ``i`` in
    ``[0, n - 1]`` is at most ``-1``)."""

    sym_lo: Expr | None = None
    sym_hi: Expr | None = None

    def __str__(self) -> str:
        lo = self.sym_lo if self.sym_lo is not None else self.lo
        hi = self.sym_hi if self.sym_hi is not None else self.hi
        return f"[{lo}, {hi}]"


_EVERYTHING = Interval(None, None)
_BOOL = Interval(0, 1)
_TRUE = Interval(1, 1)
_FALSE = Interval(0, 0)


def _dtype_range(dtype: DType) -> Interval:
    if dtype.is_bool:
        return _BOOL
    if dtype.is_int:
        info = np.iinfo(dtype.numpy)
        return Interval(int(info.min), int(info.max))
    return _EVERYTHING


_DTYPE_RANGES: dict[str, Interval] = {name: _dtype_range(d) for name, d in DTYPES.items()}


def dtype_interval(dtype: DType) -> Interval:
    """Every value of an integral dtype (bool: [0, 1]); unbounded for floats."""
    return _DTYPE_RANGES[dtype.name]


# --------------------------------------------------------------------------------------
# Domains
# --------------------------------------------------------------------------------------

DomainLike = Any  # Mapping[Var | IterVar, Interval | Range | IterVar] | Iterable[IterVar] | None


def _range_interval(r: Range, what: str) -> Interval:
    lo, ext = r.min, r.extent
    lo = lo.value if isinstance(lo, Const) else lo
    ext = ext.value if isinstance(ext, Const) else ext
    if not isinstance(lo, (int, np.integer)) or not isinstance(ext, (int, np.integer)):
        return symbolic_range_interval(r)
    if ext < 1:
        raise ValueError(f"domain of {what}: range {r} is empty (extent {ext}); an index "
                         "expression over an empty range is never evaluated")
    return Interval(int(lo), int(lo) + int(ext) - 1)


def range_interval(r: Range) -> Interval:
    """The domain ``[min, min + extent - 1]`` of a range (a ``SymbolicInterval`` when the
    range is symbolic)."""
    return _range_interval(r, "range")


def symbolic_range_interval(r: Range) -> Interval:
    """The domain ``[min, min + extent - 1]`` of a symbolic range: int ends that hold for
    every value of its variables (an extent is at least 1), and the exact ends as
    expressions."""
    lo_e, hi_e = as_expr(r.min), as_expr(r.min + r.extent - 1)
    if not (lo_e.dtype.is_int and hi_e.dtype.is_int):
        return _EVERYTHING
    b = Bounds(_extent_facts(r.extent))
    lo, hi = b(lo_e).lo, b(hi_e).hi
    if lo is not None and hi is not None and lo > hi:
        return _EVERYTHING  # (no integer satisfies both: never evaluated)
    return SymbolicInterval(lo, hi, None if isinstance(lo_e, Const) else lo_e,
                            None if isinstance(hi_e, Const) else hi_e)


def _extent_facts(extent: Any) -> dict[Var, Interval]:
    """What an extent being positive says: a variable that is an extent is at least 1
    (and an int32 extent at most int32's maximum)."""
    if isinstance(extent, Var) and extent.kind in ("var", "size") and extent.dtype.is_int:
        return {extent: Interval(1, dtype_interval(extent.dtype).hi)}
    return {}


def extent_facts(*axes: IterVar | Iterable[IterVar]) -> dict[Var, Interval]:
    """The domains of the shape variables that are the extents of ``axes`` (at least 1)."""
    out: dict[Var, Interval] = {}
    for group in axes:
        for iv in ([group] if isinstance(group, IterVar) else list(group)):
            out.update(_extent_facts(iv.dom.extent))
    return out


def dom_of(*axes: IterVar | Iterable[IterVar]) -> dict[Var, Interval]:
    """A domain map from iteration variables: each ``var`` to ``[min, min + extent - 1]``.

    Example: ``dom_of(op.axis, op.reduce_axis)``.
    """
    out: dict[Var, Interval] = {}
    for group in axes:
        items = [group] if isinstance(group, IterVar) else list(group)
        for iv in items:
            if not isinstance(iv, IterVar):
                raise TypeError(f"dom_of: expected IterVars, got {type(iv).__name__} {iv!r}")
            out[iv.var] = _range_interval(iv.dom, iv.var.name)
            if not isinstance(iv.dom.extent, int):
                for v, fact in _extent_facts(iv.dom.extent).items():
                    out.setdefault(v, fact)
    return out


def normalize_dom(dom: DomainLike) -> dict[Var, Interval]:
    """``dom`` as a ``{Var: Interval}`` dict (see ``bounds`` for the accepted forms)."""
    if dom is None:
        return {}
    if not isinstance(dom, Mapping):
        if isinstance(dom, IterVar):
            return dom_of(dom)
        if isinstance(dom, (list, tuple)):
            return dom_of(dom)
        raise TypeError(f"domain: expected a mapping from variables to ranges or a list of "
                        f"IterVars, got {type(dom).__name__}")
    out: dict[Var, Interval] = {}
    for key, value in dom.items():
        var = key.var if isinstance(key, IterVar) else key
        if not isinstance(var, Var):
            raise TypeError(f"domain: keys must be Var or IterVar, got {type(key).__name__} "
                            f"{key!r}")
        if isinstance(value, Interval):
            iv = value
        elif isinstance(value, Range):
            iv = _range_interval(value, var.name)
        elif isinstance(value, IterVar):
            iv = _range_interval(value.dom, var.name)
        else:
            raise TypeError(f"domain of {var.name}: expected an Interval, Range or IterVar, "
                            f"got {type(value).__name__} {value!r}")
        out[var] = iv
    return out


# --------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------

def _default_var(v: Var) -> Interval:
    if v.kind == "size":  # (a size: never negative, within its dtype)
        return Interval(0, dtype_interval(v.dtype).hi)
    return _EVERYTHING if v.dtype.kind == "int" else dtype_interval(v.dtype)


def _integral(e: Expr) -> bool:
    return e.dtype.is_integral


def _compare(op: Op, a: Interval, b: Interval) -> Interval:
    """Decide ``a op b`` from the operands' intervals: [1,1], [0,0] or [0,1]."""
    alo, ahi, blo, bhi = _lo(a.lo), _hi(a.hi), _lo(b.lo), _hi(b.hi)
    if op is Op.LT:
        true, false = ahi < blo, alo >= bhi
    elif op is Op.LE:
        true, false = ahi <= blo, alo > bhi
    elif op is Op.GT:
        true, false = alo > bhi, ahi <= blo
    elif op is Op.GE:
        true, false = alo >= bhi, ahi < blo
    else:
        same = a.is_point and b.is_point and a.lo == b.lo
        disjoint = ahi < blo or bhi < alo
        true, false = (same, disjoint) if op is Op.EQ else (disjoint, same)
    return _TRUE if true else _FALSE if false else _BOOL


def _div_interval(a: Interval, b: Interval, floor: bool) -> Interval | None:
    """a / b (floor or truncating) when b excludes 0; None when nothing can be said."""
    if b.lo is None or b.hi is None or b.contains(0):
        return None
    if b.lo == b.hi:
        return a.div_const(b.lo, floor)
    # monotone in each argument for a divisor of fixed sign: extremes sit at the corners
    corners = [_ext_div(x, y, floor) for x in (_lo(a.lo), _hi(a.hi)) for y in (b.lo, b.hi)]
    return Interval._ext(min(corners), max(corners))


def _mod_interval(a: Interval, b: Interval) -> Interval | None:
    """floormod(a, b) for a divisor interval excluding 0."""
    if b.contains(0):
        return None
    if b.lo is not None and b.lo == b.hi:
        return a.mod_const(b.lo)
    if _lo(b.lo) > 0:  # result in [0, b - 1], and equal to a when 0 <= a < b
        out = Interval._ext(0, _hi(b.hi) - 1)
        if _lo(a.lo) >= 0:
            out = Interval._ext(0, min(_hi(a.hi), _hi(b.hi) - 1))
            if _hi(a.hi) < _lo(b.lo):
                out = a
        return out
    out = Interval._ext(_lo(b.lo) + 1, 0)  # negative divisor: result in [b + 1, 0]
    if _hi(a.hi) <= 0:
        out = Interval._ext(max(_lo(a.lo), _lo(b.lo) + 1), 0)
        if _lo(a.lo) > _hi(b.hi):
            out = a
    return out


def _pow_interval(a: Interval, k: int) -> Interval | None:
    """a ** k for a constant exponent."""
    if k == 0:
        return _TRUE
    if k < 0:  # integer a ** -k truncates 1 / a**k: only a = ±1 survive
        return Interval(-1, 1)
    lo, hi = _lo(a.lo), _hi(a.hi)

    def p(x: int | float) -> int | float:
        if isinstance(x, float):
            return x if (k % 2 or x > 0) else _INF
        return x ** k

    if lo >= 0 or k % 2:
        return Interval._ext(p(lo), p(hi))
    top = max(p(lo), p(hi))
    return Interval._ext(0 if hi >= 0 else p(hi), top)


class Bounds:
    """Interval bounds over one domain, memoized per instance (one per analysis).

    Calling the object on an integer or bool expression gives its ``Interval``.
    """

    def __init__(self, dom: DomainLike = None) -> None:
        self.dom: dict[Var, Interval] = normalize_dom(dom)
        self._memo: dict[Expr, Interval] = {}

    def __call__(self, expr: Expr) -> Interval:
        memo = self._memo
        hit = memo.get(expr)
        if hit is not None:
            return hit
        if not _integral(expr):
            raise TypeError(f"bounds: expected an integer or bool expression, got {expr} "
                            f"of dtype {expr.dtype}")
        return evaluate_bottom_up(expr, memo, _inputs, self._compute)

    def _compute(self, node: Expr) -> Interval:
        memo = self._memo
        # nothing known: unbounded for signed integers (no overflow), else the dtype's range
        fallback = _EVERYTHING if node.dtype.kind == "int" else _DTYPE_RANGES[node.dtype.name]
        match node:
            case Const(value):
                return Interval.point(int(value))
            case Var():
                return self.dom.get(node) or _default_var(node)
            case TensorRead() | Reduce():
                return dtype_interval(node.dtype)
            case Unary(op, a):
                rule = UNARY_BOUNDS.get(op)
                return fallback if rule is None else _wrap_check(rule(memo[a]), node.dtype)
            case Binary(Op.POW, a, b):
                out = _pow_interval(memo[a], int(b.value)) if isinstance(b, Const) else None
                return _wrap_check(out or fallback, node.dtype)
            case Binary(op, a, b):
                return _wrap_check(_binary(op, memo[a], memo[b]) or fallback, node.dtype)
            case Compare(op, a, b):
                if not _integral(a):
                    return _BOOL
                return _compare(op, memo[a], memo[b])
            case Select(c, a, b):
                cond = memo[c]
                if cond == _TRUE:
                    return memo[a]
                if cond == _FALSE:
                    return memo[b]
                return memo[a].union(memo[b])
            case Cast(dtype, a):
                if not _integral(a):
                    return dtype_interval(dtype)
                x = memo[a]
                if dtype.is_bool:  # nonzero -> True
                    return _FALSE if x == _FALSE else _TRUE if not x.contains(0) else _BOOL
                # the operand's own dtype holds its value: int64(i) of an int32 i fits
                x = x.intersect(dtype_interval(a.dtype)) or x
                rng = dtype_interval(dtype)
                return x if rng.contains(x) else rng
        return fallback


def _wrap_check(x: Interval, dtype: DType) -> Interval:
    """Narrow types (int8, int16, uint8) wrap around in practice: outside the dtype's range,
    fall back to the whole range. int32/int64 index arithmetic is assumed not to overflow."""
    if dtype.bits >= 32 or dtype.is_bool:
        return x
    rng = dtype_interval(dtype)
    return x if rng.contains(x) else rng


def _not_interval(x: Interval) -> Interval:
    return _FALSE if x == _TRUE else _TRUE if x == _FALSE else _BOOL


# operator -> the interval of ``op a`` from the operand's (integer and bool operands; the
# float-only intrinsics have none, their nodes get the dtype's range)
UNARY_BOUNDS: dict[Op, Callable[[Interval], Interval]] = {
    Op.NEG: Interval.neg,
    Op.ABS: Interval.abs,
    Op.NOT: _not_interval,
    # rounding is the identity on integers
    Op.FLOOR: lambda x: x, Op.CEIL: lambda x: x, Op.ROUND: lambda x: x, Op.TRUNC: lambda x: x,
}

# operator -> the interval of ``a op b`` from the operand intervals (bool intervals are
# finite subsets of [0, 1]: && is their min, || their max); other operators: no information
BINARY_BOUNDS: dict[Op, Callable[[Interval, Interval], Interval | None]] = {
    Op.ADD: Interval.add,
    Op.SUB: Interval.sub,
    Op.MUL: Interval.mul,
    Op.FLOORDIV: lambda a, b: _div_interval(a, b, floor=True),
    Op.DIV: lambda a, b: _div_interval(a, b, floor=False),
    Op.FLOORMOD: _mod_interval,
    Op.MAX: Interval.max,
    Op.MIN: Interval.min,
    Op.AND: Interval.min,
    Op.OR: Interval.max,
}


def _binary(op: Op, a: Interval, b: Interval) -> Interval | None:
    """The interval of ``a op b`` from the operand intervals (None: no information)."""
    rule = BINARY_BOUNDS.get(op)
    return None if rule is None else rule(a, b)


def _inputs(node: Expr) -> tuple[Expr, ...]:
    """The children whose intervals ``Bounds._compute`` reads."""
    match node:
        case Compare(_, a, _) | Cast(_, a) if not _integral(a):
            return ()
        case TensorRead() | Reduce():
            return ()
        case Binary(Op.POW, a, _):
            return (a,)
    return node.children()


def bounds(expr: Expr, dom: DomainLike = None) -> Interval:
    """Interval bounds of an integer or bool expression.

    Parameters
    ----------
    expr : Expr
        An integer or bool expression (bools are 0/1).
    dom : mapping or list, optional
        Variable domains: ``{Var | IterVar: Interval | Range | IterVar}``, or a list of
        IterVars (each var ranges over its ``dom``). Variables not listed are unbounded.

    Returns
    -------
    Interval
        Inclusive bounds containing every value of ``expr`` over the domain.

    Raises
    ------
    TypeError
        If ``expr`` is a float expression or ``dom`` is malformed.

    Example
    -------
    >>> i = tex.var("i")
    >>> bounds(i % 4 + 1, {i: Interval(0, 100)})
    Interval(lo=1, hi=4)
    """
    return Bounds(dom)(as_expr(expr, "bounds"))
