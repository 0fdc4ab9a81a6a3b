"""tex.arith.sympy_bridge: conversion both ways, symbol naming, errors, the fallbacks and
their memo, and a round-trip property test (strategies from test_arith_simplify.py)."""
from __future__ import annotations

import gc

import numpy as np
import pytest
import sympy
from hypothesis import given

from tex.arith import Interval, SympyBridge, from_sympy, sympy_bridge, to_sympy
from tex.arith.sympy_bridge import is_structural, sympy_prove, sympy_simplify
from tex.dtype import DTYPES, boolean, float32, int32
from tex.ir import fold
from tex.ir.expr import Const, Expr, Op, Var
from tex.ir.tensor import PlaceholderOp

from test_arith_simplify import (
    DOM,
    PROPERTY,
    conditions,
    evaluate,
    int_exprs,
    same_everywhere,
)

i, j = Var("i"), Var("j")


def roundtrip(e: Expr, dom: dict | None = None) -> tuple[object, Expr]:
    b = SympyBridge(dom)
    s = b.to_sympy(e)
    return s, b.from_sympy(s, e.dtype if e.dtype.is_int else None)


@pytest.mark.parametrize("expr, text", [
    (i + j * 2 - 3, "i + 2*j - 3"),
    (i // 4, "floor(i/4)"),
    (i % 4, "Mod(i, 4)"),
    (fold.binary(Op.MIN, i, j), "Min(i, j)"),
    (fold.binary(Op.MAX, i, 3), "Max(3, i)"),
    (fold.unary(Op.ABS, i), "Abs(i)"),
    (fold.binary(Op.POW, i, 2), "i**2"),
    (i < j, "i < j"),
    ((i < j) & (j != 3), "(i < j) & Ne(j, 3)"),
    ((i < j) | fold.logical_not(Var("b", boolean)), "~b | (i < j)"),
    (fold.select(i < 3, i, j), "Piecewise((i, i < 3), (j, True))"),
    (fold.cast(int32, i < 3), "Piecewise((1, i < 3), (0, True))"),
    (fold.cast(DTYPES["int64"], i), "i"),
    (fold.cast(boolean, i), "Ne(i, 0)"),
])
def test_to_sympy(expr: Expr, text: str) -> None:
    assert str(to_sympy(expr)) == text


@pytest.mark.parametrize("expr", [
    i + j * 2 - 3, i // 4 + i % -3, (i * 4 + j) // 8, fold.binary(Op.MIN, i, j - 1),
    fold.select(i < 3, i, j), (i <= j) & (j > 0), fold.binary(Op.DIV, i - 7, 2),
    fold.binary(Op.DIV, i, j), fold.binary(Op.POW, i, 3), fold.compare(Op.EQ, i < 1, j < 1),
])
def test_roundtrip_is_exact(expr: Expr) -> None:
    _, back = roundtrip(expr)
    assert same_on_small_grid(expr, back)


def same_on_small_grid(a: Expr, b: Expr) -> bool:
    g = np.meshgrid(np.arange(-6, 7), np.arange(-5, 6), indexing="ij")
    env = {i: g[0], j: g[1]}
    return bool(np.array_equal(evaluate(a, env), evaluate(b, env)))


def test_from_sympy() -> None:
    x, y = sympy.Symbol("x", integer=True), sympy.Symbol("y", integer=True)
    syms = {x: i, y: j}
    assert str(from_sympy(sympy.floor((2 * x + 3) / 4), syms)) == "(i * 2 + 3) // 4"
    assert str(from_sympy(sympy.floor(x / 2 + sympy.Rational(1, 2)), syms)) == "(i + 1) // 2"
    assert str(from_sympy(sympy.ceiling(x / 3), syms)) == "-(-i // 3)"
    assert str(from_sympy(sympy.Mod(x, 4) - 2 * y, syms)) == "i % 4 - j * 2"
    assert str(from_sympy(sympy.Max(x, y, 0), syms)) == "max(max(i, 0), j)"
    assert str(from_sympy(x**2, syms)) == "i * i"
    assert str(from_sympy(sympy.Piecewise((x, x < y), (y, True)), syms)) == \
        "select(i < j, i, j)"
    assert str(from_sympy(sympy.And(x < 3, sympy.Not(sympy.Eq(y, 1))), syms)) == \
        "i < 3 && j != 1"
    assert str(from_sympy(sympy.Integer(5), syms, DTYPES["int64"])) == "int64(5)"
    assert from_sympy(sympy.true, syms) is Const(True, boolean)
    assert str(from_sympy(sympy.Implies(x < 0, y > 0), syms)) == "i >= 0 || j > 0"


def test_from_sympy_errors() -> None:
    x = sympy.Symbol("x", integer=True)
    with pytest.raises(NotImplementedError, match="non-integer coefficient 1/2"):
        from_sympy(x / 2, {x: i})
    with pytest.raises(NotImplementedError, match="rational 1/3"):
        from_sympy(sympy.Rational(1, 3), {x: i})
    with pytest.raises(ValueError, match="symbol z is not in the symbol map"):
        from_sympy(sympy.Symbol("z") + x, {x: i})
    with pytest.raises(NotImplementedError, match="sin"):
        from_sympy(sympy.sin(x), {x: i})
    with pytest.raises(NotImplementedError, match="undefined where no condition holds"):
        from_sympy(sympy.Piecewise((x, x < 0)), {x: i})


def test_to_sympy_errors() -> None:
    x = Var("x", float32)
    with pytest.raises(TypeError, match="'x' is float32"):
        to_sympy(x)
    with pytest.raises(TypeError, match="float32"):
        to_sympy(fold.cast(int32, x * 2.0) + i)  # the float operand is named
    with pytest.raises(NotImplementedError, match="'pow'"):
        to_sympy(fold.binary(Op.POW, i, j))
    int8 = DTYPES["int8"]
    y = Var("y", int8)
    with pytest.raises(NotImplementedError, match="int8 arithmetic 'y \\+ int8\\(100\\)'"):
        to_sympy(y + Const(100, int8))
    with pytest.raises(NotImplementedError, match="may wrap around"):
        to_sympy(fold.cast(int8, i))
    assert str(to_sympy(fold.cast(int32, y) * 2)) == "2*y"  # widening is exact


def test_same_name_vars_get_distinct_symbols() -> None:
    twin = Var("i")
    b = SympyBridge()
    s = b.to_sympy(i - twin)
    assert str(s) == "i - i_1"
    assert b.from_sympy(s) is fold.binary(Op.SUB, i, twin)
    # naming depends only on this bridge: a fresh one starts again
    assert str(SympyBridge().to_sympy(twin - i)) == "i - i_1"


def test_assumptions_from_domain() -> None:
    b = SympyBridge({i: Interval(0, 9), j: Interval(1, 5)})
    si, sj = b.symbol(i), b.symbol(j)
    assert si.is_nonnegative and si.is_integer and sj.is_positive
    assert SympyBridge({i: Interval(-5, -1)}).symbol(i).is_negative
    assert SympyBridge().symbol(Var("u", DTYPES["uint8"])).is_nonnegative


def test_tensor_reads_are_opaque_symbols() -> None:
    idx = PlaceholderOp("idx", (8,), int32).output(0)
    b = SympyBridge()
    s = b.to_sympy(idx[i] * 2 + 1)
    assert str(s) == "2*idx[i] + 1"
    assert str(b.from_sympy(s)) == "idx[i] * 2 + 1"


def test_fallback_structure() -> None:
    assert is_structural(i + j) and is_structural(i // 4) and is_structural(i < j)
    assert not is_structural(i // j) and not is_structural(fold.binary(Op.MIN, i, j))
    assert not is_structural(fold.select(i < 3, i, j))
    # opaque atoms keep their sign assumptions from the bounds
    e = fold.binary(Op.MAX, i, 0) * 2 - fold.binary(Op.MAX, i, 0)
    assert str(sympy_simplify(e, {})) == "max(i, 0)"
    assert sympy_prove(fold.binary(Op.MAX, i, 0) * j >= 0, {j: Interval(0, 5)}) is True


def test_sympy_prove() -> None:
    d = {i: Interval(0, 9)}
    assert sympy_prove(i * i < 100, d) is True       # solveset over the integer range
    assert sympy_prove(i * i > 100, d) is False
    assert sympy_prove(i * i < 50, d) is None
    assert sympy_prove(i * j >= 0, {i: Interval(0, 9), j: Interval(0, 3)}) is True  # signs
    assert sympy_prove((i < 3) & (j < 3), d) is None  # not a comparison: unknown


def test_memo_is_pure_and_weak() -> None:
    d = {i: Interval(0, 9)}
    e = (i + 1) * (i + 1) - i * i
    first = sympy_simplify(e, d)
    assert str(first) == "i * 2 + 1"
    assert sympy_simplify(e, d) is first              # memo hit, same answer
    assert sympy_simplify(e, {i: Interval(-3, 3)}) is first  # other domain, same result
    tmp = Var("t")
    key = (tmp + 1) * (tmp + 2)
    sympy_simplify(key, {})
    assert key in sympy_bridge._MEMO
    count = len(sympy_bridge._MEMO)
    del key, tmp
    gc.collect()
    assert len(sympy_bridge._MEMO) < count  # entries die with their node


@PROPERTY
@given(int_exprs)
def test_roundtrip_property(e: Expr) -> None:
    s, back = roundtrip(e, DOM)
    assert same_everywhere(back, e), f"{e} -> {s} -> {back}"


@PROPERTY
@given(conditions)
def test_roundtrip_conditions(c: Expr) -> None:
    s, back = roundtrip(c, DOM)
    assert back.dtype is boolean
    assert same_everywhere(back, c), f"{c} -> {s} -> {back}"


def test_every_integer_op_has_a_sympy_rule() -> None:
    """The conversion tables cover every Op, except the float-only intrinsics, which never
    appear in integer index expressions (listed here as the explicit exclusion)."""
    from tex.arith import sympy_bridge as sb
    from tex.ir import FLOAT_ONLY_OPS, Op

    covered = set(sb.SYMPY_UNARY) | set(sb.SYMPY_BINARY) | set(sb.SYMPY_COMPARE)
    assert covered | FLOAT_ONLY_OPS == set(Op)
    assert not covered & FLOAT_ONLY_OPS
    assert set(sb.SYMPY_BOOL_COMPARE) == set(sb.SYMPY_COMPARE)
