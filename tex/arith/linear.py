"""Linear forms of integer index expressions, normalized comparisons (``Constraint``), and
the small integer helpers the analyzer and the rule families share.

See ``tex.arith.rules`` for the canonical form these represent and its invariants.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..dtype import DType
from ..ir.expr import (
    Binary,
    Const,
    Expr,
    Op,
    Unary,
)

if TYPE_CHECKING:
    from .rules import Analyzer

__all__ = ["AS_LE", "Constraint", "INF", "LINEAR_OPS", "LinearForm", "Rule", "SWAP", "const_int",
           "decide_const", "div_exact", "fits", "is_const_value", "is_index", "is_index_dtype",
           "is_linear_node", "is_term", "linear_inputs", "wrapped"]


Rule = Callable[[Expr, "Analyzer"], "Expr | None"]

INF = math.inf


def is_index_dtype(dtype: DType) -> bool:
    """Whether the linear rules apply: signed integers of 32 or 64 bits."""
    return dtype.kind == "int" and dtype.bits >= 32


def _wrap(value: int, bits: int) -> int:
    """``value`` reduced to the signed range of ``bits`` bits (two's complement)."""
    half = 1 << (bits - 1)
    return ((value + half) % (half << 1)) - half


# integer comparison -> (sign, c0): ``a op b`` holds iff ``sign * (a - b) <= c0`` (the
# table guards and loop partitioning use to read comparisons as linear facts)
AS_LE = {Op.LT: (1, -1), Op.LE: (1, 0), Op.GT: (-1, -1), Op.GE: (-1, 0)}


# --------------------------------------------------------------------------------------
# Linear forms
# --------------------------------------------------------------------------------------

class LinearForm:
    """``sum(coef * atom) + const`` over one integer dtype; immutable once built.

    ``terms`` maps atoms to non-zero coefficients in insertion order (the order is only
    used to break ties between atoms with equal sort keys).
    """

    __slots__ = ("terms", "const", "dtype")
    terms: dict[Expr, int]
    const: int
    dtype: DType

    def __init__(self, terms: dict[Expr, int], const: int, dtype: DType) -> None:
        # exact integers: comparisons and bounds need the mathematical values; rebuild
        # wraps them into the dtype (two's complement) when it writes the expression
        self.terms = {t: c for t, c in terms.items() if c != 0}
        self.const = const
        self.dtype = dtype

    @staticmethod
    def constant(value: int, dtype: DType) -> LinearForm:
        return LinearForm({}, value, dtype)

    @staticmethod
    def atom(e: Expr, coef: int = 1) -> LinearForm:
        return LinearForm({e: coef}, 0, e.dtype)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def single(self) -> tuple[Expr, int] | None:
        """``(atom, coef)`` when the form is one term without constant."""
        if len(self.terms) == 1 and self.const == 0:
            return next(iter(self.terms.items()))
        return None

    def add(self, other: LinearForm) -> LinearForm:
        terms = dict(self.terms)
        for t, c in other.terms.items():
            terms[t] = terms.get(t, 0) + c
        return LinearForm(terms, self.const + other.const, self.dtype)

    def sub(self, other: LinearForm) -> LinearForm:
        return self.add(other.scale(-1))

    def scale(self, k: int) -> LinearForm:
        return LinearForm({t: c * k for t, c in self.terms.items()}, self.const * k, self.dtype)

    def with_const(self, const: int) -> LinearForm:
        return LinearForm(self.terms, const, self.dtype)

    def __repr__(self) -> str:
        parts = [f"{c}*{t}" for t, c in self.terms.items()]
        return f"LinearForm({' + '.join(parts + [str(self.const)])})"


@dataclass(frozen=True, slots=True)
class Constraint:
    """A normalized integer comparison: ``part`` lies in ``[lo, hi]`` (kind "range",
    ±inf for an open side), or ``part != lo`` (kind "ne"). ``part`` has no constant, a gcd
    of 1 and a positive first atom; ``key`` identifies it across comparisons."""

    part: LinearForm
    key: tuple
    kind: str
    lo: int | float
    hi: int | float


SWAP = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE, Op.EQ: Op.EQ, Op.NE: Op.NE}
LINEAR_OPS = frozenset({Op.ADD, Op.SUB, Op.MUL})


def is_linear_node(e: Expr) -> bool:
    """Nodes the linear form looks through (the rest are atoms)."""
    if isinstance(e, Binary):
        return e.op in LINEAR_OPS
    if isinstance(e, Unary):
        return e.op is Op.NEG
    return isinstance(e, Const)


def linear_inputs(e: Expr) -> tuple[Expr, ...]:
    return e.children() if is_linear_node(e) else ()


def is_const_value(e: Expr, value: int) -> bool:
    return isinstance(e, Const) and e.value == value


def is_term(e: Expr, atom: Expr, c: int) -> bool:
    """Whether ``e`` is the term ``atom * c`` as ``rebuild`` writes it."""
    if c == 1:
        return e is atom
    return isinstance(e, Binary) and e.op is Op.MUL and e.a is atom and is_const_value(e.b, c)


def wrapped(lf: LinearForm) -> LinearForm:
    """``lf`` with coefficients and constant reduced into the dtype (two's complement)."""
    bits = lf.dtype.bits
    terms = {t: _wrap(c, bits) for t, c in lf.terms.items()}
    const = _wrap(lf.const, bits)
    if const == lf.const and all(terms[t] == c for t, c in lf.terms.items()):
        return lf
    return LinearForm(terms, const, lf.dtype)


def fits(value: int, dtype: DType) -> bool:
    return _wrap(value, dtype.bits) == value


def decide_const(op: Op, v: int) -> bool:
    """``v op 0`` for an integer v."""
    return {Op.LT: v < 0, Op.LE: v <= 0, Op.GT: v > 0, Op.GE: v >= 0,
            Op.EQ: v == 0, Op.NE: v != 0}[op]


def is_index(e: Expr) -> bool:
    return is_index_dtype(e.dtype)


def const_int(e: Expr) -> int | None:
    return int(e.value) if isinstance(e, Const) and e.dtype.is_int else None


def div_exact(lf: LinearForm, g: int) -> LinearForm:
    return LinearForm({t: a // g for t, a in lf.terms.items()}, lf.const // g, lf.dtype)
