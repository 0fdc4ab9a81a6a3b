"""Per-op emitters: the ops whose code is more than one instruction, by op and dtype kind.

``tables.py`` has the one-instruction ops; ``FunctionEmitter`` looks an op up there first,
then here (``UNARY``, ``INT_BINARY``, ``FLOAT_BINARY``). Each emitter takes the function
emitter, the operand dtype and the operand values (scalars or vectors alike).

Integer division never traps: a non-constant divisor of 0 gives 0 and -1 is handled
without ``idiv`` (``INT_MIN / -1`` wraps). Float max/min follow ``np.maximum``/
``np.minimum`` (NaN in either operand propagates; for equal operands the second is
returned); float ``//`` and ``%`` follow ``np.floor_divide``/``np.mod``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import llvmlite.ir as ir

from ..debug import InternalError
from ..dtype import DType
from ..ir.expr import Const, Expr, Op
from . import tables
from .irtypes import constant, scalar_type
from .vecmath import VECMATH, vecmath_function

if TYPE_CHECKING:
    from .emit import FunctionEmitter

__all__ = ["UNARY", "INT_BINARY", "FLOAT_BINARY", "covered_ops", "UnaryEmitter",
           "IntBinaryEmitter", "FloatBinaryEmitter"]

UnaryEmitter = Callable[["FunctionEmitter", DType, ir.Value], ir.Value]
# the last argument is the divisor's expression (constant divisors get cheaper code)
IntBinaryEmitter = Callable[["FunctionEmitter", DType, ir.Value, ir.Value, Expr], ir.Value]
FloatBinaryEmitter = Callable[["FunctionEmitter", DType, ir.Value, ir.Value], ir.Value]


# --------------------------------------------------------------------------------------
# Unary
# --------------------------------------------------------------------------------------

def _u_neg(f: FunctionEmitter, d: DType, x: ir.Value) -> ir.Value:
    # -x: fneg for floats, 0 - x (wrapping) for integers
    if d.is_float:
        return f.b.fneg(x, flags=f.m.fm)
    if d.is_bool:
        raise InternalError("negation of a bool value (cast it to int32 first)")
    return f.b.sub(constant(x.type, 0), x)


def _u_not(f: FunctionEmitter, d: DType, x: ir.Value) -> ir.Value:
    return f.not_(x)


def _u_abs(f: FunctionEmitter, d: DType, x: ir.Value) -> ir.Value:
    # |x|: llvm.fabs; integers x < 0 ? 0 - x : x (abs(INT_MIN) wraps to INT_MIN, as NumPy)
    if d.is_float:
        return f.float_intrinsic("llvm.fabs", x)
    if d.kind != "int":
        return x
    neg = f.b.sub(constant(x.type, 0), x)
    return f.b.select(f.b.icmp_signed("<", x, constant(x.type, 0)), neg, x)


def _u_float_intrinsic(op: Op) -> UnaryEmitter:
    name = tables.FLOAT_INTRINSICS[op]

    def emit(f: FunctionEmitter, d: DType, x: ir.Value) -> ir.Value:
        if not d.is_float:
            if op in tables.INT_IDENTITY_UNARY:
                return x  # floor(i) -> i
            raise InternalError(f"{op.value} of a {d} value (float-only intrinsic)")
        if d.bits == 32 and op.value in VECMATH:
            # LLVM would scalarize llvm.exp.v8f32 into libm calls; ours stays vectorized
            return f.b.call(vecmath_function(f.m.ir, op.value, x.type), [x])
        return f.float_intrinsic(name, x)

    return emit


def _u_libm(op: Op) -> UnaryEmitter:
    def emit(f: FunctionEmitter, d: DType, x: ir.Value) -> ir.Value:
        if not d.is_float:
            raise InternalError(f"{op.value} of a {d} value (float-only intrinsic)")
        return f.libm(op, d, x)

    return emit


UNARY: dict[Op, UnaryEmitter] = {
    Op.NEG: _u_neg,
    Op.NOT: _u_not,
    Op.ABS: _u_abs,
    **{op: _u_float_intrinsic(op) for op in tables.FLOAT_INTRINSICS if op is not Op.ABS},
    **{op: _u_libm(op) for op in tables.LIBM_CALLS},
}


# --------------------------------------------------------------------------------------
# Integer binary
# --------------------------------------------------------------------------------------

def _is_pow2(c: int) -> bool:
    return c > 0 and c & (c - 1) == 0


def _int_division(kind: str) -> IntBinaryEmitter:
    """DIV (trunc), FLOORDIV (floor) or FLOORMOD (mod) on integers; never traps."""

    def emit(f: FunctionEmitter, d: DType, a: ir.Value, b: ir.Value, bexpr: Expr) -> ir.Value:
        if isinstance(bexpr, Const):
            return _by_constant(f, kind, d.kind == "int", a, b, int(bexpr.value))
        if d.kind != "int":
            return _by_unsigned(f, kind, a, b)
        return _by_signed(f, kind, a, b)

    return emit


def _by_constant(f: FunctionEmitter, kind: str, signed: bool, a: ir.Value, b: ir.Value,
                 c: int) -> ir.Value:
    """``a`` divided by the constant ``c`` (``b``): shifts and masks for powers of two."""
    bb, t = f.b, a.type
    zero = constant(t, 0)
    if c == 0:
        return zero  # x / 0 -> 0
    if not signed:
        return bb.urem(a, b) if kind == "mod" else bb.udiv(a, b)
    if c == -1:  # x / -1 -> -x (INT_MIN wraps), x % -1 -> 0
        return zero if kind == "mod" else bb.sub(zero, a)
    if kind == "trunc":
        return bb.sdiv(a, b)
    if _is_pow2(c):  # floor(x / 2^k) -> x >> k, x mod 2^k -> x & (2^k - 1)
        k = c.bit_length() - 1
        return bb.ashr(a, constant(t, k)) if kind == "floor" else bb.and_(a, constant(t, c - 1))
    q, r = bb.sdiv(a, b), bb.srem(a, b)
    # the remainder has the dividend's sign; floor needs the divisor's
    wrong = bb.icmp_signed("<", r, zero) if c > 0 else bb.icmp_signed(">", r, zero)
    if kind == "floor":
        return bb.sub(q, bb.zext(wrong, t))
    return bb.add(r, bb.select(wrong, b, zero))


def _by_unsigned(f: FunctionEmitter, kind: str, a: ir.Value, b: ir.Value) -> ir.Value:
    """Unsigned ``a`` divided by a variable ``b``: 0 where ``b`` is 0."""
    bb, t = f.b, a.type
    zero, one = constant(t, 0), constant(t, 1)
    is_zero = bb.icmp_signed("==", b, zero)
    safe = bb.select(is_zero, one, b)
    q = bb.urem(a, safe) if kind == "mod" else bb.udiv(a, safe)
    return bb.select(is_zero, zero, q)


def _by_signed(f: FunctionEmitter, kind: str, a: ir.Value, b: ir.Value) -> ir.Value:
    """Signed ``a`` divided by a variable ``b``: 0 where ``b`` is 0, ``-a`` (wrapping)
    where it is -1, never an ``idiv`` by either."""
    bb, t = f.b, a.type
    zero, one = constant(t, 0), constant(t, 1)
    is_zero = bb.icmp_signed("==", b, zero)
    minus_one = bb.icmp_signed("==", b, constant(t, -1))
    safe = bb.select(bb.or_(is_zero, minus_one), one, b)  # no idiv by 0 or -1
    if kind == "trunc":
        q = bb.sdiv(a, safe)
        return bb.select(minus_one, bb.sub(zero, a), bb.select(is_zero, zero, q))
    r = bb.srem(a, safe)
    wrong = bb.and_(bb.icmp_signed("!=", r, zero),
                    bb.icmp_signed("<", bb.xor(r, b), zero))
    if kind == "floor":
        q = bb.sub(bb.sdiv(a, safe), bb.zext(wrong, t))
        return bb.select(minus_one, bb.sub(zero, a), bb.select(is_zero, zero, q))
    m = bb.add(r, bb.select(wrong, b, zero))
    return bb.select(is_zero, zero, m)  # b == -1: r == 0 already


def _int_pow(f: FunctionEmitter, d: DType, a: ir.Value, b: ir.Value, bexpr: Expr) -> ir.Value:
    t = scalar_type(d)
    fn = f.m.ipow(t, d.kind == "int")  # type: ignore[arg-type]
    return f.scalarize(lambda x, y: f.b.call(fn, [x, y]), [a, b], t)


def _int_minmax(sym: str) -> IntBinaryEmitter:
    def emit(f: FunctionEmitter, d: DType, a: ir.Value, b: ir.Value, bexpr: Expr) -> ir.Value:
        cmp = f.b.icmp_signed if d.kind == "int" else f.b.icmp_unsigned
        return f.b.select(cmp(sym, a, b), a, b)

    return emit


INT_BINARY: dict[Op, IntBinaryEmitter] = {
    Op.DIV: _int_division("trunc"),
    Op.FLOORDIV: _int_division("floor"),
    Op.FLOORMOD: _int_division("mod"),
    Op.POW: _int_pow,
    Op.MAX: _int_minmax(">"),
    Op.MIN: _int_minmax("<"),
}


# --------------------------------------------------------------------------------------
# Float binary
# --------------------------------------------------------------------------------------

def _f_pow(f: FunctionEmitter, d: DType, a: ir.Value, b: ir.Value) -> ir.Value:
    return f.float_intrinsic(tables.FLOAT_BINARY_INTRINSICS[Op.POW], a, b)


def _f_floordiv(f: FunctionEmitter, d: DType, a: ir.Value, b: ir.Value) -> ir.Value:
    # numpy.floor_divide (Python's float //), not floor(a / b), which rounds the quotient
    # first (-511 // 13.1 in float16 is -40, floor(-39.0) -39): q = (a - fmod(a, b)) / b,
    # minus one when the remainder's sign differs from b's, snapped to the nearest integer;
    # a zero q takes the sign of a / b; b == 0 gives a / b (inf or nan)
    bb, fm = f.b, f.m.fm
    zero, one, half = (constant(a.type, v) for v in (0.0, 1.0, 0.5))
    mod = f.fmod(a, b, d)
    div = bb.fdiv(bb.fsub(a, mod, flags=fm), b, flags=fm)
    flip = bb.and_(bb.fcmp_unordered("!=", mod, zero, flags=fm),
                   bb.xor(bb.fcmp_ordered("<", b, zero, flags=fm),
                          bb.fcmp_ordered("<", mod, zero, flags=fm)))
    div = bb.select(flip, bb.fsub(div, one, flags=fm), div)
    floor = f.float_intrinsic("llvm.floor", div)
    up = bb.fcmp_ordered(">", bb.fsub(div, floor, flags=fm), half, flags=fm)
    snapped = bb.select(up, bb.fadd(floor, one, flags=fm), floor)
    quotient = bb.fdiv(a, b, flags=fm)
    signed_zero = f.float_intrinsic("llvm.copysign", zero, quotient)
    out = bb.select(bb.fcmp_unordered("!=", div, zero, flags=fm), snapped, signed_zero)
    return bb.select(bb.fcmp_ordered("==", b, zero, flags=fm), quotient, out)


def _f_floormod(f: FunctionEmitter, d: DType, a: ir.Value, b: ir.Value) -> ir.Value:
    # numpy.mod: r = fmod(a, b); r != 0 and sign(r) != sign(b) -> r + b; r == 0 -> copysign(0, b)
    bb, fm = f.b, f.m.fm
    zero = constant(a.type, 0.0)
    r = f.fmod(a, b, d)
    wrong = bb.and_(bb.fcmp_ordered("!=", r, zero, flags=fm),
                    bb.xor(bb.fcmp_ordered("<", b, zero, flags=fm),
                           bb.fcmp_ordered("<", r, zero, flags=fm)))
    fixed = bb.select(wrong, bb.fadd(r, b, flags=fm), r)
    signed_zero = f.float_intrinsic("llvm.copysign", zero, b)
    return bb.select(bb.fcmp_ordered("==", r, zero, flags=fm), signed_zero, fixed)


def _f_minmax(sym: str) -> FloatBinaryEmitter:
    # np.maximum: a > b or isnan(a) ? a : b (NaN propagates; max(0.0, -0.0) is -0.0)
    def emit(f: FunctionEmitter, d: DType, a: ir.Value, b: ir.Value) -> ir.Value:
        bb, fm = f.b, f.m.fm
        take_a = bb.or_(bb.fcmp_ordered(sym, a, b, flags=fm),
                        bb.fcmp_unordered("uno", a, a, flags=fm))
        return bb.select(take_a, a, b)

    return emit


FLOAT_BINARY: dict[Op, FloatBinaryEmitter] = {
    Op.POW: _f_pow,
    Op.FLOORDIV: _f_floordiv,
    Op.FLOORMOD: _f_floormod,
    Op.MAX: _f_minmax(">"),
    Op.MIN: _f_minmax("<"),
}


def covered_ops() -> dict[str, frozenset[Op]]:
    """Which ops each emitter table handles (for the every-op coverage test)."""
    return {
        "unary": frozenset(UNARY),
        "float binary": frozenset(tables.FLOAT_BINARY) | frozenset(FLOAT_BINARY)
        | frozenset(tables.LOGICAL),
        "int binary": frozenset(tables.INT_BINARY) | frozenset(INT_BINARY)
        | frozenset(tables.LOGICAL),
        "compare": frozenset(tables.FCMP) & frozenset(tables.ICMP),
        "legalized": tables.LEGALIZED,
    }
