"""Legalization: rewrite the intrinsics a backend lacks into operations it has.

One loop-IR pass, ``legalize(func, target)``, run by ``tex.build`` just before code
generation. It rewrites expressions only (statements keep their shape); every rule is a
small function ``Expr -> Expr | None`` in a per-target ``RuleTable`` (node type -> rules,
each marked with the operators it handles), and the pass applies the table bottom-up to
a fixed point.

Decisions for the CPU (``target="llvm"``), each chosen for accuracy first, then for
vectorization (LLVM scalarizes a libm call inside vector code, lane by lane):

========  =========================================================================
op        CPU lowering
========  =========================================================================
sigmoid   ``e = exp(-|x|); x >= 0 ? 1 / (1 + e) : e / (1 + e)`` (exp never overflows,
          exactly the formula of ``tex.ir.semantics``); both sides are cheap and
          load-free, so the select is eager
rsqrt     ``1 / sqrt(x)`` (x86 ``rsqrtps`` has 12-bit accuracy: not used)
tanh      kept: float32 is emitted by the code generator as vectorizable IR
          (``tex.codegen.vecmath``: 1 - 2 / (exp(2|x|) + 1), an odd polynomial near 0;
          within 3 ulp); float64 calls libm ``tanh`` through ``llvm.tanh``
erf       float32: ``x * P(x²) / Q(x²)`` on ``x`` clamped to [-4, 4] (degree 6/5),
          result clamped to [-1, 1]: max relative error 4.2e-7. float64: kept; the code
          generator calls libm ``erf`` (resolved by the JIT from the process)
tan       kept: ``llvm.tan`` (libm ``tanf``/``tan``)
log10     kept: ``llvm.log10`` (libm ``log10f``/``log10``)
float16   x86 without AVX512-FP16 has no half arithmetic: every unary (but neg and abs,
          which are exact) and binary arithmetic op on float16 is computed in float32
          and rounded back after each op, as NumPy does (max/min swap their operands:
          NumPy's float16 maximum returns the first of two equal values, its float32
          maximum the second); comparisons, selects, loads, stores and casts stay in
          float16
========  =========================================================================

The rational coefficients were fitted for this module (weighted least squares on the
relative error over Chebyshev-spaced points, iterated to equal ripple) and checked on
2·10⁶ float32 points against ``math.erf``/``numpy.tanh`` in float64.

Example (float32)::

    sigmoid(x)  ->  select(x >= 0.0, 1.0 / (1.0 + exp(-abs(x))),
                           exp(-abs(x)) / (1.0 + exp(-abs(x))))
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..dtype import DType, float32
from ..ir import fold
from ..ir.expr import Binary, Cast, Const, Expr, Op, Select, Unary
from ..ir.visit import RuleTable, fixed_point_rewrite, for_ops
from ..target import target_kind
from .stmt import LoweredFunc, map_exprs

__all__ = ["legalize", "TARGET_RULES"]

Rule = Callable[[Expr], "Expr | None"]


# --------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------

def _c(value: float, dtype: DType) -> Const:
    return Const(value, dtype)


def _horner(t: Expr, coeffs: Sequence[float], dtype: DType) -> Expr:
    """c0 + t*(c1 + t*(c2 + ...)), coefficients lowest degree first."""
    acc: Expr = _c(coeffs[-1], dtype)
    for c in reversed(coeffs[:-1]):
        acc = fold.binary(Op.ADD, fold.binary(Op.MUL, acc, t), _c(c, dtype))
    return acc


def _clamp(x: Expr, lo: float, hi: float) -> Expr:
    """min(max(x, lo), hi) that lets NaN through (comparisons with NaN are false)."""
    d = x.dtype
    return Select(fold.compare(Op.GT, x, _c(hi, d)), _c(hi, d),
                  Select(fold.compare(Op.LT, x, _c(lo, d)), _c(lo, d), x))


def _odd_rational(x: Expr, bound: float, p: Sequence[float], q: Sequence[float]) -> Expr:
    """clamp(xc * P(xc²) / Q(xc²), -1, 1) with xc = clamp(x, -bound, bound)."""
    d = x.dtype
    xc = _clamp(x, -bound, bound)
    t = fold.binary(Op.MUL, xc, xc)
    r = fold.binary(Op.DIV, fold.binary(Op.MUL, xc, _horner(t, p, d)), _horner(t, q, d))
    return _clamp(r, -1.0, 1.0)


# erf(x) ~ x * P(x²) / Q(x²) on [-4, 4]; |erf(x)| rounds to 1.0f beyond
_ERF_P = (1.1283791693748817, 0.18520313563630025, 0.054316891089267044,
          0.0038496069182215047, 0.0003796083815470006, 4.684766780470306e-06,
          -1.3202171106341254e-08)
_ERF_Q = (1.0, 0.4974654193122757, 0.11395837274625364, 0.015462078721668333,
          0.0013075682836901181, 6.311047580268535e-05)


# --------------------------------------------------------------------------------------
# Rules (each: one node in, its replacement or None out)
# --------------------------------------------------------------------------------------

@for_ops(Op.SIGMOID)
def _sigmoid(e: Expr) -> Expr | None:
    # sigmoid(x) -> x >= 0 ? 1/(1+exp(-|x|)) : exp(-|x|)/(1+exp(-|x|))
    if not (isinstance(e, Unary) and e.op is Op.SIGMOID):
        return None
    x, d = e.a, e.dtype
    ex = fold.unary(Op.EXP, fold.unary(Op.NEG, fold.unary(Op.ABS, x)))
    den = fold.binary(Op.ADD, _c(1.0, d), ex)
    return Select(fold.compare(Op.GE, x, _c(0.0, d)),
                  fold.binary(Op.DIV, _c(1.0, d), den), fold.binary(Op.DIV, ex, den))


@for_ops(Op.RSQRT)
def _rsqrt(e: Expr) -> Expr | None:
    # rsqrt(x) -> 1 / sqrt(x)
    if not (isinstance(e, Unary) and e.op is Op.RSQRT):
        return None
    return fold.binary(Op.DIV, _c(1.0, e.dtype), fold.unary(Op.SQRT, e.a))


@for_ops(Op.ERF)
def _erf_f32(e: Expr) -> Expr | None:
    # erf(x: float32) -> clamp(xc * P(xc²) / Q(xc²)), xc = clamp(x, -4, 4)
    if not (isinstance(e, Unary) and e.op is Op.ERF and e.dtype is float32):
        return None
    return _odd_rational(e.a, 4.0, _ERF_P, _ERF_Q)


_HALF_EXACT = frozenset({Op.NEG, Op.ABS})
_HALF_BINARY = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.FLOORDIV, Op.FLOORMOD,
                          Op.POW, Op.MAX, Op.MIN})


def _half_via_float32(e: Expr) -> Expr | None:
    # a + b (float16) -> float16(float32(a) + float32(b)); same for unary intrinsics
    if e.dtype.name != "float16":
        return None
    if isinstance(e, Unary) and e.op not in _HALF_EXACT:
        return Cast(e.dtype, Unary(e.op, Cast(float32, e.a)))
    if isinstance(e, Binary) and e.op in (Op.MAX, Op.MIN):
        # NumPy's float16 maximum/minimum return the first operand on ties (-0.0 vs 0.0),
        # float32's the second: swap the operands to keep NumPy's choice
        return Cast(e.dtype, Binary(e.op, Cast(float32, e.b), Cast(float32, e.a)))
    if isinstance(e, Binary) and e.op in _HALF_BINARY:
        return Cast(e.dtype, Binary(e.op, Cast(float32, e.a), Cast(float32, e.b)))
    return None


# target -> its rules (float16 through float32 first, then the intrinsics it lacks)
TARGET_RULES: dict[str, RuleTable] = {
    "llvm": RuleTable("legalize.llvm", {
        Unary: (_half_via_float32, _sigmoid, _rsqrt, _erf_f32),
        Binary: (_half_via_float32,)}),
}
# NVIDIA GPUs: the same decisions (float16 through float32 as NumPy, erf's rational for
# float32, sigmoid from exp); the PTX backend calls libdevice for the other functions
TARGET_RULES["cuda"] = TARGET_RULES["llvm"]


def legalize(func: LoweredFunc, target: str = "llvm") -> LoweredFunc:
    """``func`` with the intrinsics ``target`` lacks rewritten into core operations.

    Parameters
    ----------
    func : LoweredFunc
        A lowered function (loop IR).
    target : str
        ``"llvm"`` (alias ``"cpu"``): the decisions in this module's docstring.

    Returns
    -------
    LoweredFunc
        A new function with the same name, parameters and loop structure.

    Raises
    ------
    ValueError
        For a target without a rule table.
    """
    rules = TARGET_RULES[target_kind(target, "legalize")]
    memo: dict[Expr, Expr] = {}

    def fix(e: Expr) -> Expr:
        out = memo.get(e)
        if out is None:
            out = memo[e] = fixed_point_rewrite(e, rules)
        return out

    return LoweredFunc(func.name, func.params, map_exprs(func.body, fix), dict(func.attrs))
