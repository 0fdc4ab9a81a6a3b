"""Is a float expression identically zero? sympy decides (``float_is_zero``, for
``tex.autodiff.zero_proofs``): a one-way conversion of float expressions to sympy.

Conversion (one way, never converted back):

    a + b, a - b, a * b, a / b   Add, Mul, Pow(b, -1)   -a          -a
    exp, log, log2, log10, sqrt  exp, log, log(a)/log(2), log(a)/log(10), sqrt
    rsqrt, sigmoid               1/sqrt(a), 1/(1 + exp(-a))
    sin, cos, tan, tanh, erf     the sympy functions    abs         Abs
    floor, ceil, min, max, a**b  floor, ceiling, Min, Max, Pow
    float constants              exact Rationals (0.1 -> 3602879701896397/2**55); inf/nan:
                                 refused (the answer is None)
    select(c, a, b)              Piecewise((a, c), (b, True))
    float casts                  the operand (real numbers have no width)
    T[i, j], reductions, vars,   an opaque *real* Symbol per distinct (interned) node,
    round, trunc, float // and %, named after the printed node; so is a cast from an
    casts from integers          integer or bool expression
    conditions                   !, &&, || kept; any other bool node (a comparison, a
                                 bool read) an opaque boolean Symbol

Before converting, a float screen evaluates the expression itself on Python floats at a
few points of its atoms (``_float_screen``): values that differ between points mean it is
neither zero nor a constant, the answer None, without sympy. Most expressions the zero
proofs ask about are such, and the conversion was most of what sympy cost them.

Invariant:

- ``float_is_zero`` answers True only on a proof. Opaque atoms are independent real
  symbols, so a zero it proves holds whatever values they take (it misses zeros that need
  a relation between atoms, never claims a false one); the algebra is that of the reals
  (``x - x`` is 0, though IEEE gives nan at ``x = inf``). It keeps no memo.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, TypeVar

import sympy

from ..ir.expr import Binary, Cast, Const, Expr, Op, Select, Unary
from ..ir.visit import post_order
from .sympy_bridge import SympyExpr, convert_post_order

__all__ = ["float_is_zero", "FLOAT_SIMPLIFY_MAX_OPS", "FLOAT_EXPAND_MAX_OPS",
           "FLOAT_EXPAND_MAX_TERMS", "FLOAT_MAX_PIECEWISE", "SYMPY_FLOAT_UNARY",
           "SYMPY_FLOAT_BINARY", "FloatOp"]

class FloatOp(NamedTuple):
    """A float operator's sympy form, and its value on Python floats (the float screen)."""

    sympy: Callable[..., SympyExpr]
    value: Callable[..., float]


# one entry per float operator with a sympy meaning; any other float operator is an atom
SYMPY_FLOAT_UNARY: dict[Op, FloatOp] = {
    Op.NEG: FloatOp(lambda a: -a, lambda a: -a),
    Op.EXP: FloatOp(sympy.exp, math.exp),
    Op.LOG: FloatOp(sympy.log, math.log),
    Op.LOG2: FloatOp(lambda a: sympy.log(a) / sympy.log(2), math.log2),
    Op.LOG10: FloatOp(lambda a: sympy.log(a) / sympy.log(10), math.log10),
    Op.SQRT: FloatOp(sympy.sqrt, math.sqrt),
    Op.RSQRT: FloatOp(lambda a: 1 / sympy.sqrt(a), lambda a: 1 / math.sqrt(a)),
    Op.SIN: FloatOp(sympy.sin, math.sin),
    Op.COS: FloatOp(sympy.cos, math.cos),
    Op.TAN: FloatOp(sympy.tan, math.tan),
    Op.TANH: FloatOp(sympy.tanh, math.tanh),
    Op.SIGMOID: FloatOp(lambda a: 1 / (1 + sympy.exp(-a)), lambda a: 1 / (1 + math.exp(-a))),
    Op.ERF: FloatOp(sympy.erf, math.erf),
    Op.ABS: FloatOp(sympy.Abs, abs),
    Op.FLOOR: FloatOp(sympy.floor, math.floor),
    Op.CEIL: FloatOp(sympy.ceiling, math.ceil),
}
SYMPY_FLOAT_BINARY: dict[Op, FloatOp] = {
    Op.ADD: FloatOp(lambda a, b: a + b, lambda a, b: a + b),
    Op.SUB: FloatOp(lambda a, b: a - b, lambda a, b: a - b),
    Op.MUL: FloatOp(lambda a, b: a * b, lambda a, b: a * b),
    Op.DIV: FloatOp(lambda a, b: a / b, lambda a, b: a / b),
    Op.POW: FloatOp(lambda a, b: a ** b, math.pow),
    Op.MAX: FloatOp(lambda a, b: sympy.Max(a, b), max),
    Op.MIN: FloatOp(lambda a, b: sympy.Min(a, b), min),
}

T = TypeVar("T")

# sympy.simplify is tried only on expressions with at most this many operations (it is slow)
FLOAT_SIMPLIFY_MAX_OPS = 120
# larger expressions are not expanded (not proved): expand and cancel grow with the product
# of the term counts of the factors, which fuzzed programs can make exhaust the memory
FLOAT_EXPAND_MAX_OPS = 400
FLOAT_EXPAND_MAX_TERMS = 2_000
FLOAT_MAX_PIECEWISE = 6


class _NonFinite(Exception):
    """A float constant inf or nan: real algebra says nothing about it."""


class _FloatToSympy:
    """One float conversion: interned node -> sympy, opaque nodes -> fresh symbols named
    after the printed node in the order met (so results never depend on ids)."""

    def __init__(self) -> None:
        self.memo: dict[Expr, SympyExpr] = {}
        self.names: set[str] = set()

    def _symbol(self, node: Expr, boolean_valued: bool) -> sympy.Symbol:
        base, name, n = str(node), str(node), 0
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        # a condition is a Boolean symbol; a value is a real one (tex floats are reals here)
        return sympy.Symbol(name) if boolean_valued else sympy.Symbol(name, real=True)

    @staticmethod
    def _is_atom(node: Expr) -> bool:
        match node:
            case Const():
                return False
            case Unary(op, _) if node.dtype.is_bool:
                return op is not Op.NOT
            case Binary(op, _, _) if node.dtype.is_bool:
                return op not in (Op.AND, Op.OR)
            case _ if node.dtype.is_bool:
                return True  # comparisons, bool reads, bool selects and casts
            case _ if not node.dtype.is_float:
                return True  # an integer reached through a cast (the cast is an atom too)
            case Unary(op, _):
                return op not in SYMPY_FLOAT_UNARY
            case Binary(op, _, _):
                return op not in SYMPY_FLOAT_BINARY
            case Cast(_, a):
                return not a.dtype.is_float
            case Select():
                return False
        return True  # reads, variables, reductions

    def convert(self, expr: Expr) -> SympyExpr:
        return convert_post_order(expr, self.memo, self._is_atom, self._convert)

    def _convert(self, node: Expr) -> SympyExpr:
        m = self.memo
        if not self._is_atom(node):
            match node:
                case Const(value, dtype):
                    if dtype.is_bool:
                        return sympy.true if value else sympy.false
                    if not math.isfinite(value):
                        raise _NonFinite(str(node))
                    return sympy.Rational(value)  # exact: 0.1 is the binary fraction it holds
                case Unary(Op.NOT, a):
                    return sympy.Not(m[a])
                case Binary(Op.AND, a, b):
                    return sympy.And(m[a], m[b])
                case Binary(Op.OR, a, b):
                    return sympy.Or(m[a], m[b])
                case Unary(op, a):
                    return SYMPY_FLOAT_UNARY[op].sympy(m[a])
                case Binary(op, a, b):
                    return SYMPY_FLOAT_BINARY[op].sympy(m[a], m[b])
                case Select(c, a, b):
                    return sympy.Piecewise((m[a], m[c]), (m[b], True))
                case Cast(_, a):
                    return m[a]
        # atoms (reads, variables, reductions, conditions...) are opaque symbols
        return self._symbol(node, node.dtype.is_bool)


# the screen: points tried, digits evaluated, and what counts as "clearly not zero"
_SCREEN_POINTS = 3
_SCREEN_DIGITS = 30
_SCREEN_TOLERANCE = sympy.Float("1e-12", _SCREEN_DIGITS)


def _screen_points(atoms: Sequence[T], is_condition: Callable[[T], bool]
                   ) -> Iterator[dict[T, int | bool]]:
    """The points both screens try (``_SCREEN_POINTS``): each real atom's value as ``k``,
    the rational ``k / 7`` in [1/7, 3]; each condition's truth: all true, all false, then
    mixed. A deterministic local generator picks them."""
    rng = random.Random(0)
    for point in range(_SCREEN_POINTS):
        yield {a: (point == 0 or (point == 2 and rng.random() < 0.5)) if is_condition(a)
               else rng.randint(1, 21) for a in atoms}


def _screen_nonzero(e: SympyExpr) -> bool:
    """Whether ``e`` is clearly not identically zero: it evaluates (to 30 digits) to a
    real number away from 0 at a point of its atoms (rationals in [1/7, 3], conditions all
    true, all false, then mixed). A deterministic local generator picks the points; an
    evaluation that fails or is not real (a log of a negative...) proves nothing."""
    symbols = sorted(e.free_symbols, key=lambda x: x.name)
    for point in _screen_points(symbols, lambda x: not x.is_real):
        values = {x: sympy.Rational(k, 7) if not isinstance(k, bool) else sympy.sympify(k)
                  for x, k in point.items()}
        try:
            v = e.xreplace(values).evalf(_SCREEN_DIGITS)
        except Exception:  # sympy raises many kinds on odd values; nothing is learnt
            continue
        if v.is_real and v.is_number and v.is_finite and abs(v) > _SCREEN_TOLERANCE:
            return True
    return False


# the float screen's "clearly not zero": the value against the largest magnitude met while
# evaluating (an identity leaves a few rounding errors of that size)
_FLOAT_SCREEN_RELATIVE = 1e-9


def _float_screen(expr: Expr) -> bool | None:
    """The screen of ``_screen_nonzero`` on the expression itself, in Python floats, before
    the (much slower) conversion to sympy: the atoms as ``_FloatToSympy`` makes them, each
    given the values of ``_screen_points``.

    True: not a constant (two points give clearly different values), so neither zero nor
    a non-zero constant; False: no atoms, and clearly not zero; None: nothing learnt (the
    same value at every point, which may be a constant the atoms cancel out of, ``x / x``;
    or zero within rounding; or undefined: a log of a negative, an overflow)."""
    nodes = list(post_order(expr))
    is_atom = _FloatToSympy._is_atom
    atoms = [n for n in nodes if is_atom(n)]
    seen: list[tuple[float, float]] = []  # (value, the largest magnitude met) per point
    for point in _screen_points(atoms, lambda a: a.dtype.is_bool):
        values: dict[Expr, Any] = {a: k if isinstance(k, bool) else k / 7
                                   for a, k in point.items()}
        top = 1.0
        try:
            for n in nodes:
                if n in values:
                    continue
                v = _float_value(n, values)
                values[n] = v
                if not isinstance(v, bool):
                    top = max(top, abs(v))
        except (ArithmeticError, ValueError, _NonFinite):
            continue
        v = values[expr]
        if not (math.isfinite(v) and math.isfinite(top)):
            continue
        if not atoms:
            return False if abs(v) > _FLOAT_SCREEN_RELATIVE * top else None
        for w, top2 in seen:
            if abs(v - w) > _FLOAT_SCREEN_RELATIVE * max(top, top2):
                return True
        seen.append((v, top))
    return None


def _float_value(node: Expr, values: dict[Expr, Any]) -> Any:
    """A node that is not an atom, on its operands' values."""
    match node:
        case Const(value, dtype):
            if not dtype.is_bool and not math.isfinite(value):
                raise _NonFinite(str(node))
            return bool(value) if dtype.is_bool else float(value)
        case Unary(Op.NOT, a):
            return not values[a]
        case Binary(Op.AND, a, b):
            return values[a] and values[b]
        case Binary(Op.OR, a, b):
            return values[a] or values[b]
        case Unary(op, a):
            return float(SYMPY_FLOAT_UNARY[op].value(values[a]))
        case Binary(op, a, b):
            return float(SYMPY_FLOAT_BINARY[op].value(values[a], values[b]))
        case Select(c, a, b):
            return values[a] if values[c] else values[b]
        case Cast(_, a):
            return values[a]
    raise ValueError(f"no float value for {node}")  # not reached: atoms have values


def _expanded_terms(e: SympyExpr, cap: int) -> int:
    """An upper bound on the number of terms ``sympy.expand(e)`` makes (capped at ``cap``):
    expanding a product of sums multiplies their term counts, and that is what can exhaust
    the memory (a product of ten binomials has 1,024 terms)."""
    if isinstance(e, sympy.Add):
        return min(cap, sum(_expanded_terms(a, cap) for a in e.args))
    if isinstance(e, sympy.Mul):
        n = 1
        for a in e.args:
            n = min(cap, n * _expanded_terms(a, cap))
        return n
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0:
        return min(cap, _expanded_terms(e.base, cap) ** min(int(e.exp), 64))
    return 1


def _zero_verdict(e: SympyExpr) -> bool | None:
    """True: ``e`` is 0; False: a non-zero constant; None: not decided (also when ``e`` is
    too big to expand within bounded time and memory)."""
    if sympy.count_ops(e) > FLOAT_EXPAND_MAX_OPS or \
            _expanded_terms(e, FLOAT_EXPAND_MAX_TERMS + 1) > FLOAT_EXPAND_MAX_TERMS or \
            len(e.atoms(sympy.Piecewise)) > FLOAT_MAX_PIECEWISE:
        return None  # folding k Piecewise makes up to 2**k branches
    if e.has(sympy.Piecewise):
        # one Piecewise outside, then each branch on its own (the conditions are atoms)
        folded = sympy.piecewise_fold(e)
        if isinstance(folded, sympy.Piecewise):
            verdicts = [_zero_verdict(branch.expr) for branch in folded.args]
            if all(v is True for v in verdicts):
                return True
            return False if all(v is False for v in verdicts) else None
        e = folded
    steps: list[Callable[[SympyExpr], SympyExpr]] = [
        lambda x: x, sympy.expand, lambda x: sympy.cancel(sympy.together(x))]
    for step in steps:
        e = step(e)
        if e == 0:
            return True
    if sympy.count_ops(e) <= FLOAT_SIMPLIFY_MAX_OPS:
        e = sympy.simplify(e)
        if e == 0:
            return True
    if e.is_number and e.is_zero is False:
        return False
    return None


def float_is_zero(expr: Expr) -> bool | None:
    """Whether a float expression is identically zero, decided with sympy.

    Tensor reads, variables, reductions, casts from integers and operators without a sympy
    form become opaque real symbols (one per distinct node), conditions opaque booleans,
    ``select`` a ``Piecewise`` (see the module docstring's float table). The expression is
    then evaluated at a few rational points (one clearly non-zero value settles it: not
    an identity), and only otherwise expanded, put over a common denominator and, when
    small, simplified: the proof.

    Parameters
    ----------
    expr : Expr
        A float expression.

    Returns
    -------
    bool or None
        True when it is 0 for every real value of its atoms where it is defined (a
        proof: ``x / x - 1`` is 0 although x = 0 gives nan); False when it is a non-zero
        constant; None when sympy decides neither (a zero that needs a relation
        between atoms, such as ``x[i] - x[j]`` with ``i == j``, stays None) or when it
        holds a constant inf or nan.

    Raises
    ------
    TypeError
        ``expr`` is not a float expression.

    Example
    -------
    >>> e = x[i] * y[i] / y[i] - x[i]     # -> True
    """
    if not isinstance(expr, Expr) or not expr.dtype.is_float:
        raise TypeError(f"float_is_zero: expects a float expression, got {expr!r}")
    screened = _float_screen(expr)
    if screened is not None:
        # the answer below, without sympy: most expressions asked about are not zero, and
        # the conversion is most of what sympy costs them
        return None if screened else False
    try:
        e = _FloatToSympy().convert(expr)
    except (_NonFinite, NotImplementedError):  # inf/nan, or too deep for sympy
        return None
    if e == 0:
        return True
    if _screen_nonzero(e):
        # not zero at some point: not an identity of the atoms. Only a constant is
        # non-zero everywhere; anything else may still vanish through relations between
        # atoms the conversion does not see
        return False if e.is_number else None
    try:
        return _zero_verdict(e)
    except Exception:  # sympy's algebra raises many kinds (PolynomialError...): not proved
        return None
