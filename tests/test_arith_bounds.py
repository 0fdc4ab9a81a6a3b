"""tex.arith.bounds: the Interval type, bounds of every node kind, domains, and a property
test that the bounds contain every value (strategies from test_arith_simplify.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given

from tex.arith import Analyzer, Bounds, Interval, bounds, dom_of
from tex.dtype import DTYPES, boolean, float32, int32
from tex.ir import fold
from tex.ir.expr import Binary, Cast, Const, Expr, IterVar, Op, Range, Unary, Var
from tex.ir.tensor import PlaceholderOp

from test_arith_simplify import DOM, PROPERTY, conditions, evaluate, int_exprs

i, j, n = Var("i"), Var("j"), Var("n")
D = {i: Interval(0, 9), j: Interval(-3, 3)}


def iv(lo: int | None, hi: int | None) -> Interval:
    return Interval(lo, hi)


# --------------------------------------------------------------------------------------
# Interval
# --------------------------------------------------------------------------------------

def test_interval_normalizes_ends() -> None:
    assert Interval(-math.inf, math.inf) == Interval(None, None) == Interval.everything()
    assert Interval(0.0, 3.0) == Interval(0, 3) and isinstance(Interval(0.0, 3.0).lo, int)
    assert Interval(Const(2, int32), 5).lo == 2
    with pytest.raises(ValueError, match="empty"):
        Interval(3, 2)
    with pytest.raises(ValueError, match="not an integer"):
        Interval(0.5, 2)
    with pytest.raises(ValueError, match="lo end"):
        Interval(math.inf, None)
    with pytest.raises(TypeError, match="int, None"):
        Interval("0", 1)  # type: ignore[arg-type]


def test_interval_helpers() -> None:
    a, b = Interval(0, 9), Interval(-3, 3)
    assert a.add(b) == iv(-3, 12) and a.sub(b) == iv(-3, 12) and a.neg() == iv(-9, 0)
    assert a.mul(b) == iv(-27, 27) and b.mul(b) == iv(-9, 9)
    assert a.union(iv(20, 30)) == iv(0, 30)
    assert a.intersect(b) == iv(0, 3) and a.intersect(iv(10, 11)) is None
    assert a.contains(9) and not a.contains(10) and 5 in a and a.contains(iv(2, 3))
    assert not a.contains(iv(None, 3)) and Interval.everything().contains(iv(None, 3))
    assert Interval.point(4).is_point and not a.is_point and a.is_bounded
    assert not iv(0, None).is_bounded
    assert str(iv(None, 3)) == "(-inf, 3]" and str(a) == "[0, 9]"
    assert b.abs() == iv(0, 3) and iv(-5, -2).abs() == iv(2, 5)
    assert a.max(b) == iv(0, 9) and a.min(b) == iv(-3, 3)


def test_interval_unbounded_arithmetic() -> None:
    up = iv(0, None)
    assert up.add(iv(1, 2)) == iv(1, None)
    assert up.mul(iv(-2, -1)) == iv(None, 0)
    assert up.mul(iv(0, 0)) == iv(0, 0)  # 0 * unbounded end is 0
    assert up.scale(-3) == iv(None, 0)
    assert up.div_const(4) == iv(0, None) and up.div_const(-4) == iv(None, 0)
    assert up.mod_const(4) == iv(0, 3)


def test_interval_division() -> None:
    a = iv(-7, 9)
    assert a.div_const(4) == iv(-2, 2)                 # floor: -7 // 4 == -2
    assert a.div_const(4, floor=False) == iv(-1, 2)    # trunc: -7 / 4 == -1
    assert a.div_const(-4) == iv(-3, 1)                # 9 // -4 == -3, -7 // -4 == 1
    assert a.mod_const(4) == iv(0, 3)
    assert a.mod_const(-4) == iv(-3, 0)
    assert iv(5, 6).mod_const(4) == iv(1, 2)           # one period: no wrap
    assert iv(5, 8).mod_const(4) == iv(0, 3)           # wraps at 8
    assert iv(5, 6).mod_const(-4) == iv(-3, -2)        # 5 % -4 == -3
    with pytest.raises(ValueError, match="zero"):
        a.div_const(0)


# --------------------------------------------------------------------------------------
# bounds() per node kind
# --------------------------------------------------------------------------------------

A8 = PlaceholderOp("A8", (4,), DTYPES["int8"]).output(0)


@pytest.mark.parametrize("expr, expected", [
    (Const(7, int32), iv(7, 7)),
    (Const(True, boolean), iv(1, 1)),
    (i, iv(0, 9)),
    (n, iv(None, None)),                                  # not in the domain: unbounded
    (i + j, iv(-3, 12)),
    (i - j * 2, iv(-6, 15)),
    (i * -3 + 1, iv(-26, 1)),
    (i * j, iv(-27, 27)),
    (i // 4, iv(0, 2)),
    (i // -4, iv(-3, 0)),
    (j // 2, iv(-2, 1)),
    (i % 4, iv(0, 3)),
    (i % -4, iv(-3, 0)),
    ((i % 4 + 4) % 8, iv(4, 7)),                          # tightened: no wrap
    (fold.binary(Op.FLOORMOD, i + 2, n), iv(None, None)),  # divisor may be 0: no info
    (fold.binary(Op.DIV, j, 2), iv(-1, 1)),               # truncating
    (fold.binary(Op.DIV, i - 9, 4), iv(-2, 0)),
    (fold.binary(Op.MAX, i, j), iv(0, 9)),
    (fold.binary(Op.MIN, i, j), iv(-3, 3)),
    (fold.select(i < 10, i, j + 100), iv(0, 9)),         # condition decided by bounds
    (fold.select(i < 5, i, j + 100), iv(0, 103)),        # union
    (-i, iv(-9, 0)),
    (fold.unary(Op.ABS, j), iv(0, 3)),
    (i < 10, iv(1, 1)),
    (i < 5, iv(0, 1)),
    (i > 9, iv(0, 0)),
    (fold.logical_not(i > 9), iv(1, 1)),
    ((i < 10) & (j < 5), iv(1, 1)),
    ((i < 5) | (j > 5), iv(0, 1)),
    (fold.cast(DTYPES["int8"], i * 100), iv(-128, 127)),  # may not fit: the dtype's range
    (fold.cast(DTYPES["int8"], i * 10), iv(0, 90)),
    (fold.cast(boolean, i + 1), iv(1, 1)),
    (fold.cast(DTYPES["int64"], n), iv(-2**31, 2**31 - 1)),
    (fold.cast(int32, Var("x", float32)), iv(-2**31, 2**31 - 1)),
    (A8[i], iv(-128, 127)),
    (fold.binary(Op.POW, j, 2), iv(0, 9)),
    (fold.binary(Op.POW, j, 3), iv(-27, 27)),
])
def test_bounds_per_node(expr: Expr, expected: Interval) -> None:
    assert bounds(expr, D) == expected


def test_bounds_divisor_ranges() -> None:
    d = {i: Interval(0, 9), n: Interval(2, 4)}
    assert bounds(fold.binary(Op.FLOORDIV, i, n), d) == iv(0, 4)
    assert bounds(fold.binary(Op.FLOORMOD, i, n), d) == iv(0, 3)
    assert bounds(fold.binary(Op.FLOORMOD, i, n), {i: Interval(0, 1), n: Interval(2, 4)}) \
        == iv(0, 1)
    assert bounds(fold.binary(Op.FLOORMOD, i, n), {i: Interval(0, 9), n: Interval(-4, -2)}) \
        == iv(-3, 0)


def test_narrow_dtypes_wrap() -> None:
    # int8 + int8 wraps around: bounds fall back to the dtype's range when it may overflow
    y = Var("y", DTYPES["int8"])
    e = Binary(Op.ADD, y, Const(100, DTYPES["int8"]))
    assert bounds(e, {y: Interval(0, 100)}) == iv(-128, 127)
    assert bounds(e, {y: Interval(0, 20)}) == iv(100, 120)
    u = Var("u", DTYPES["uint8"])
    assert bounds(u) == iv(0, 255) and bounds(Var("b", boolean)) == iv(0, 1)


def test_domains() -> None:
    ax = IterVar(Var("ax", kind="axis"), Range(2, 5))
    assert dom_of([ax]) == {ax.var: iv(2, 6)}
    assert dom_of(ax, [IterVar(j, Range(0, 3))]) == {ax.var: iv(2, 6), j: iv(0, 2)}
    assert bounds(ax.var + 1, [ax]) == iv(3, 7)
    assert bounds(ax.var + 1, {ax: ax}) == iv(3, 7)
    assert bounds(ax.var + 1, {ax.var: Range(0, 10)}) == iv(1, 10)
    with pytest.raises(ValueError, match="empty"):
        bounds(i, {i: Range(0, 0)})
    with pytest.raises(TypeError, match="Interval, Range or IterVar"):
        bounds(i, {i: (0, 3)})
    with pytest.raises(TypeError, match="keys must be Var"):
        bounds(i, {"i": Interval(0, 3)})
    with pytest.raises(TypeError, match="list of IterVars"):
        bounds(i, 3)
    with pytest.raises(TypeError, match="float32"):
        bounds(Var("x", float32))


def test_deep_expression_is_iterative() -> None:
    e: Expr = i
    for step in range(20000):
        e = Binary(Op.ADD, e, j if step % 2 else Unary(Op.NEG, i))
    assert bounds(e, D) == iv(-90000 - 30000, 30000 + 9)  # 10000 * -i, 10000 * j, i


def test_memo_shared_nodes() -> None:
    b = Bounds(D)
    shared = i * 2 + j
    e = Cast(int32, fold.binary(Op.MAX, shared, shared + 1) > 0)
    assert b(e) == iv(0, 1) and b(shared) == iv(-3, 21)


def test_analyzer_try_forms_are_none_only_without_a_form() -> None:
    """``Analyzer.try_bounds``/``try_linear``: None for a float expression (no interval, no
    linear form over the integers: ``bounds`` raises, ``linear`` truncates or raises), the
    form itself otherwise; they catch nothing, so internal errors still propagate."""
    an = Analyzer(D)
    x = Var("x", float32)
    for e in (x * 2.0 + 1.0, Const(math.inf, float32), x + Const(math.nan, float32)):
        assert an.try_bounds(e) is None and an.try_linear(e) is None
    assert an.try_bounds(i * 2 + j) == an.bounds(i * 2 + j) == iv(-3, 21)
    assert an.try_bounds(i < 3) == iv(0, 1)
    lf = an.try_linear(i * 2 + 1)
    assert lf is not None and lf.terms == {i: 2} and lf.const == 1
    u = Var("u", DTYPES["uint8"])
    assert an.try_bounds(u) == iv(0, 255) and an.try_linear(u * 2) is not None


# --------------------------------------------------------------------------------------
# property: bounds contain every value
# --------------------------------------------------------------------------------------

def _contains_values(e: Expr) -> None:
    values = evaluate(e)
    b = bounds(e, DOM)
    assert b.contains(int(np.min(values))) and b.contains(int(np.max(values))), \
        f"{e}: bounds {b}, values [{values.min()}, {values.max()}]"


@PROPERTY
@given(int_exprs)
def test_bounds_contain_every_value(e: Expr) -> None:
    _contains_values(e)


@PROPERTY
@given(conditions)
def test_bounds_of_conditions(c: Expr) -> None:
    _contains_values(c)
