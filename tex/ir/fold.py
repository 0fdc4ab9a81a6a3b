"""Expression builders: dtype promotion, constant folding and cheap algebraic rules.

Every Python operator on expressions lands here. Rules are applied once, at construction,
and are local (they look at a node's direct operands only). Each rule is a small function
``(a, b) -> Expr | None`` in a table keyed by ``Op``; the heavier simplifier lives in
``tex.arith``.

Zero annihilates: ``x * 0 -> 0`` and ``0 / x -> 0`` also for floats (as TVM does), so
NaN or inf in ``x`` does not propagate through a literal zero. This is what keeps the
Jacobians built by the autodiff small.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..dtype import DType, arith_dtype, as_dtype, boolean, float32, int32, promote
from .expr import (
    COMMUTATIVE_OPS,
    FLOAT_ONLY_OPS,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Op,
    Select,
    Unary,
    as_expr,
    is_const,
)
from .semantics import NUMPY_BINARY, NUMPY_UNARY, numpy_cast
from .visit import RuleTable, for_ops

__all__ = ["binary", "unary", "compare", "select", "cast", "logical_not", "const",
           "weak_operands", "conjuncts", "conjoin"]

_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)
_ARITH = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.FLOORDIV, Op.FLOORMOD, Op.POW,
                    Op.MAX, Op.MIN})


def const(value: Any, dtype: Any = None) -> Const:
    """A constant; dtype defaults from the Python type (int32, float32, bool)."""
    if dtype is None:
        e = as_expr(value)
        if not isinstance(e, Const):
            raise TypeError(f"const: expected a number, got {value!r}")
        return e
    dtype = as_dtype(dtype, "const")
    if isinstance(value, Const):
        value = value.value
    if not isinstance(value, _SCALARS):
        raise TypeError(f"const: expected a Python number, got {type(value).__name__}")
    if dtype.is_int and isinstance(value, (float, np.floating)):
        if not float(value).is_integer():
            raise ValueError(f"const: {value!r} is not an integer, cannot make {dtype} const")
    return Const(value, dtype)


def _scalar_const(value: Any, like: DType, op_name: str) -> Const:
    """A Python scalar next to an expression of dtype ``like`` (see dtype.py)."""
    if isinstance(value, (float, np.floating)) and not like.is_float:
        return Const(float(value), float32)
    if isinstance(value, (bool, np.bool_)):
        return Const(value, like)
    if like.is_bool:
        return as_expr(value)  # type: ignore[return-value]
    try:
        return Const(value, like)
    except ValueError as err:
        raise ValueError(f"{op_name}: {err}") from None


def weak_operands(a: Any, b: Any, op_name: str) -> tuple[Expr, Expr]:
    """Convert two operands; Python scalars take the other operand's dtype."""
    a_scalar = isinstance(a, _SCALARS)
    b_scalar = isinstance(b, _SCALARS)
    if a_scalar and not b_scalar:
        eb = as_expr(b, op_name)
        return _scalar_const(a, eb.dtype, op_name), eb
    if b_scalar and not a_scalar:
        ea = as_expr(a, op_name)
        return ea, _scalar_const(b, ea.dtype, op_name)
    return as_expr(a, op_name), as_expr(b, op_name)


def _to(e: Expr, dtype: DType) -> Expr:
    return e if e.dtype is dtype else cast(dtype, e)


# ---------------------------------------------------------------------------------------
# constant folding through the shared NumPy semantics
# ---------------------------------------------------------------------------------------

def _fold_unary(op: Op, a: Const) -> Const:
    with np.errstate(all="ignore"):
        value = NUMPY_UNARY[op](np.asarray(a.value, dtype=a.dtype.numpy))
    return Const(value.item(), boolean if op is Op.NOT else a.dtype)


def _fold_binary(op: Op, a: Const, b: Const, dtype: DType) -> Const:
    if op in (Op.DIV, Op.FLOORDIV, Op.FLOORMOD) and a.dtype.is_integral and b.value == 0:
        raise ValueError(f"integer division by zero in constant expression {a} {op.value} {b}")
    with np.errstate(all="ignore"):
        value = NUMPY_BINARY[op](np.asarray(a.value, dtype=a.dtype.numpy),
                                 np.asarray(b.value, dtype=b.dtype.numpy))
    value = np.asarray(value).astype(dtype.numpy)
    return Const(value.item(), dtype)


# ---------------------------------------------------------------------------------------
# algebraic rules: (a, b) -> simpler expression or None
# ---------------------------------------------------------------------------------------

Rule = Callable[[Expr, Expr], "Expr | None"]


def _zero(like: Expr) -> Const:
    return Const(0, like.dtype)


@for_ops(Op.ADD)
def _add_zero(a: Expr, b: Expr) -> Expr | None:
    return a if is_const(b, 0) else None  # x + 0 -> x


@for_ops(Op.ADD)
def _add_consts_int(a: Expr, b: Expr) -> Expr | None:
    # (x + c1) + c2 -> x + (c1 + c2), integers only (float reassociation changes rounding)
    if (a.dtype.is_int and isinstance(b, Const) and isinstance(a, Binary)
            and a.op is Op.ADD and isinstance(a.b, Const)):
        return binary(Op.ADD, a.a, _fold_binary(Op.ADD, a.b, b, a.dtype))
    return None


@for_ops(Op.ADD)
def _add_neg(a: Expr, b: Expr) -> Expr | None:
    # x + (-y) -> x - y: the same IEEE operation (subtraction adds the negation); floats
    # only, integer index arithmetic is put in canonical form by tex.arith
    if a.dtype.is_float and isinstance(b, Unary) and b.op is Op.NEG:
        return binary(Op.SUB, a, b.a)
    return None


@for_ops(Op.ADD)
def _add_self_float(a: Expr, b: Expr) -> Expr | None:
    # x + x -> x * 2 for floats: both round the same exact value 2x
    return binary(Op.MUL, a, Const(2, a.dtype)) if a is b and a.dtype.is_float else None


@for_ops(Op.SUB)
def _sub_neg(a: Expr, b: Expr) -> Expr | None:
    # x - (-y) -> x + y (floats, exact as above)
    if a.dtype.is_float and isinstance(b, Unary) and b.op is Op.NEG:
        return binary(Op.ADD, a, b.a)
    return None


@for_ops(Op.ADD)
def _add_selects(a: Expr, b: Expr) -> Expr | None:
    # select(c, x, y) + select(c, z, w) -> select(c, x + z, y + w), and with !c in the
    # second -> select(c, x + w, y + z): the sums of adjoint contributions through both
    # sides of an if_then_else (each side evaluated only where it was before, in the same
    # order: exact). Left as two selects, n nested if_then_else gave gradients that grew
    # with every level instead of folding to one value
    if isinstance(a, Select) and isinstance(b, Select):
        if b.cond is a.cond:
            return select(a.cond, binary(Op.ADD, a.a, b.a), binary(Op.ADD, a.b, b.b))
        if b.cond is logical_not(a.cond) or a.cond is logical_not(b.cond):
            return select(a.cond, binary(Op.ADD, a.a, b.b), binary(Op.ADD, a.b, b.a))
    return None


@for_ops(Op.SUB)
def _sub_zero(a: Expr, b: Expr) -> Expr | None:
    return a if is_const(b, 0) else None  # x - 0 -> x


@for_ops(Op.SUB)
def _sub_self_int(a: Expr, b: Expr) -> Expr | None:
    return _zero(a) if a is b and a.dtype.is_int else None  # i - i -> 0


@for_ops(Op.SUB)
def _sub_from_zero(a: Expr, b: Expr) -> Expr | None:
    return unary(Op.NEG, b) if is_const(a, 0) and not a.dtype.is_float else None  # 0 - i -> -i


@for_ops(Op.MUL)
def _mul_one(a: Expr, b: Expr) -> Expr | None:
    return a if is_const(b, 1) else None  # x * 1 -> x


@for_ops(Op.MUL)
def _mul_zero(a: Expr, b: Expr) -> Expr | None:
    return b if is_const(b, 0) else None  # x * 0 -> 0 (zero annihilates, see module doc)


@for_ops(Op.MUL)
def _mul_consts_int(a: Expr, b: Expr) -> Expr | None:
    # (x * c1) * c2 -> x * (c1 * c2), integers only
    if (a.dtype.is_int and isinstance(b, Const) and isinstance(a, Binary)
            and a.op is Op.MUL and isinstance(a.b, Const)):
        return binary(Op.MUL, a.a, _fold_binary(Op.MUL, a.b, b, a.dtype))
    return None


@for_ops(Op.DIV)
def _div_one(a: Expr, b: Expr) -> Expr | None:
    return a if is_const(b, 1) else None  # x / 1 -> x


@for_ops(Op.DIV)
def _zero_over(a: Expr, b: Expr) -> Expr | None:
    return a if is_const(a, 0) and not is_const(b, 0) else None  # 0 / x -> 0


@for_ops(Op.FLOORDIV)
def _floordiv_one(a: Expr, b: Expr) -> Expr | None:
    return a if is_const(b, 1) and a.dtype.is_integral else None  # i // 1 -> i (not 2.5 // 1.0)


@for_ops(Op.FLOORDIV, Op.FLOORMOD)
def _int_zero_over(a: Expr, b: Expr) -> Expr | None:
    # 0 // x and 0 % x -> 0 on integers; on floats x may be 0 or nan (numpy: nan)
    return _zero_over(a, b) if a.dtype.is_integral else None


@for_ops(Op.FLOORMOD)
def _floormod_one(a: Expr, b: Expr) -> Expr | None:
    return _zero(a) if is_const(b, 1) and a.dtype.is_int else None  # i % 1 -> 0


@for_ops(Op.POW)
def _pow_one(a: Expr, b: Expr) -> Expr | None:
    return a if is_const(b, 1) else None  # x ** 1 -> x


@for_ops(Op.POW)
def _pow_zero(a: Expr, b: Expr) -> Expr | None:
    return Const(1, a.dtype) if is_const(b, 0) else None  # x ** 0 -> 1


@for_ops(Op.MAX, Op.MIN, Op.AND, Op.OR)
def _idempotent(a: Expr, b: Expr) -> Expr | None:
    return a if a is b else None  # max(x, x) -> x, x & x -> x


@for_ops(Op.AND)
def _and_const(a: Expr, b: Expr) -> Expr | None:
    if isinstance(b, Const):
        return a if b.value else b  # x & true -> x, x & false -> false
    return None


@for_ops(Op.OR)
def _or_const(a: Expr, b: Expr) -> Expr | None:
    if isinstance(b, Const):
        return b if b.value else a  # x | true -> true, x | false -> x
    return None


# the rules of ``binary`` on its (promoted, non-constant) operands; per operator, in order
BINARY_RULES = RuleTable("fold.binary", {Binary: (
    _add_zero, _add_consts_int, _add_neg, _add_self_float, _add_selects,
    _sub_zero, _sub_self_int, _sub_from_zero, _sub_neg,
    _mul_one, _mul_zero, _mul_consts_int,
    _div_one, _zero_over, _floordiv_one, _floormod_one, _int_zero_over,
    _pow_one, _pow_zero, _idempotent, _and_const, _or_const)})
_BINARY_BY_OP = {op: BINARY_RULES.rules_for(Binary, op) for op in Op}  # the hot path's view


_DIVISIONS = {Op.DIV: ("division", "/"), Op.FLOORDIV: ("floor division", "//"),
              Op.FLOORMOD: ("modulo", "%")}


def binary(op: Op, a: Any, b: Any) -> Expr:
    """``a op b`` with promotion, constant folding and the local rules above.

    An integer ``/``, ``//`` or ``%`` by the constant 0 is a ValueError (its value would be
    undefined in compiled code); a float one by 0.0 follows IEEE and NumPy (inf, nan)."""
    ea, eb = weak_operands(a, b, op.value)
    if op in (Op.AND, Op.OR):
        for e, side in ((ea, "left"), (eb, "right")):
            if not e.dtype.is_bool:
                raise TypeError(
                    f"'{op.value}' needs boolean operands, but the {side} operand {e} is "
                    f"{e.dtype}; compare first (e.g. i > 0) — bitwise integer operators "
                    "are not supported")
        dtype = boolean
    else:
        dtype = arith_dtype(ea.dtype, eb.dtype)
    ea, eb = _to(ea, dtype), _to(eb, dtype)
    if op in _DIVISIONS and dtype.is_integral and is_const(eb, 0):
        # refused at construction (as TVM does): the compiled code's result is undefined
        what, sym = _DIVISIONS[op]
        raise ValueError(f"integer {what} by zero: '{ea} {sym} {eb}' divides by the constant "
                         "0; guard the divisor or use a nonzero constant (float division "
                         "by 0.0 is allowed: IEEE inf/nan, as in NumPy)")
    if isinstance(ea, Const) and isinstance(eb, Const):
        return _fold_binary(op, ea, eb, dtype)
    # canonical order for commutative ops: the constant goes right (1 + x -> x + 1)
    if op in COMMUTATIVE_OPS and isinstance(ea, Const):
        ea, eb = eb, ea
    for rule in _BINARY_BY_OP[op]:
        out = rule(ea, eb)
        if out is not None:
            return out
    return Binary(op, ea, eb)


_COMPARE_SWAP = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE, Op.EQ: Op.EQ,
                 Op.NE: Op.NE}
_NEGATED = {Op.LT: Op.GE, Op.LE: Op.GT, Op.GT: Op.LE, Op.GE: Op.LT, Op.EQ: Op.NE,
            Op.NE: Op.EQ}


def compare(op: Op, a: Any, b: Any) -> Expr:
    """``a op b`` for a comparison op; folds constants and ``i == i`` on integers."""
    ea, eb = weak_operands(a, b, op.value)
    dtype = promote(ea.dtype, eb.dtype)
    ea, eb = _to(ea, dtype), _to(eb, dtype)
    if isinstance(ea, Const) and isinstance(eb, Const):
        return _fold_binary(op, ea, eb, boolean)
    if ea is eb and dtype.is_integral:  # no NaN among integers: i == i, i <= i hold
        return Const(op in (Op.EQ, Op.LE, Op.GE), boolean)
    if isinstance(ea, Const):  # 3 < i -> i > 3
        ea, eb, op = eb, ea, _COMPARE_SWAP[op]
    return Compare(op, ea, eb)


def logical_not(a: Any) -> Expr:
    """``not a`` for a boolean expression."""
    e = as_expr(a, "not")
    if not e.dtype.is_bool:
        raise TypeError(f"'~'/not needs a boolean operand, got {e} of dtype {e.dtype}")
    if isinstance(e, Const):
        return Const(not e.value, boolean)
    if isinstance(e, Unary) and e.op is Op.NOT:
        return e.a  # not not x -> x
    if isinstance(e, Compare) and e.a.dtype.is_integral:
        return Compare(_NEGATED[e.op], e.a, e.b)  # not (i < j) -> i >= j (no NaN)
    return Unary(Op.NOT, e)


@for_ops(Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC)
def _integral_identity(e: Expr) -> Expr | None:
    return e if not e.dtype.is_float else None  # floor(i) -> i


@for_ops(Op.ABS)
def _abs_non_negative(e: Expr) -> Expr | None:
    return e if e.dtype.kind in ("uint", "bool") else None  # abs(u) -> u


@for_ops(Op.ABS)
def _abs_abs(e: Expr) -> Expr | None:
    return e if isinstance(e, Unary) and e.op is Op.ABS else None  # abs(abs(x)) -> abs(x)


@for_ops(Op.NEG)
def _neg_neg(e: Expr) -> Expr | None:
    return e.a if isinstance(e, Unary) and e.op is Op.NEG else None  # --x -> x


# the rules of ``unary`` on its (promoted, non-constant) operand; per operator, in order
UNARY_RULES = RuleTable("fold.unary", {Unary: (_integral_identity, _abs_non_negative, _abs_abs,
                                               _neg_neg)})
_UNARY_BY_OP = {op: UNARY_RULES.rules_for(Unary, op) for op in Op}


def unary(op: Op, a: Any) -> Expr:
    """An intrinsic or ``-a``; integer operands of float-only intrinsics become float32."""
    if op is Op.NOT:
        return logical_not(a)
    e = as_expr(a, op.value)
    if op in FLOAT_ONLY_OPS and not e.dtype.is_float:
        e = cast(float32, e)
    elif op is Op.NEG and e.dtype.is_bool:
        e = cast(int32, e)
    if isinstance(e, Const):
        return _fold_unary(op, e)
    for rule in _UNARY_BY_OP[op]:
        out = rule(e)
        if out is not None:
            return out
    return Unary(op, e)


def select(cond: Any, a: Any, b: Any) -> Expr:
    """``cond ? a : b``; branches are promoted to a common dtype."""
    c = as_expr(cond, "if_then_else condition")
    if not c.dtype.is_bool:
        raise TypeError(f"if_then_else: condition {c} must be boolean, got {c.dtype}; "
                        "compare it first (e.g. x != 0)")
    ea, eb = weak_operands(a, b, "if_then_else")
    dtype = promote(ea.dtype, eb.dtype)
    ea, eb = _to(ea, dtype), _to(eb, dtype)
    if isinstance(c, Const):
        return ea if c.value else eb  # select(true, a, b) -> a
    if ea is eb:
        return ea  # select(c, a, a) -> a
    if isinstance(c, Unary) and c.op is Op.NOT:
        return Select(c.a, eb, ea)  # select(!c, a, b) -> select(c, b, a)
    return Select(c, ea, eb)


def cast(dtype: Any, a: Any) -> Expr:
    """``a`` converted to ``dtype``."""
    dtype = as_dtype(dtype, "astype")
    e = as_expr(a, "astype")
    if e.dtype is dtype:
        return e
    if isinstance(e, Const):
        with np.errstate(all="ignore"):
            arr = numpy_cast(np.asarray(e.value, dtype=e.dtype.numpy), dtype.numpy)
        return Const(arr.item(), dtype)
    if isinstance(e, Cast) and e.a.dtype is dtype and _exact_roundtrip(dtype, e.dtype):
        return e.a  # int32(int64(i)) -> i when the inner cast widened exactly
    return Cast(dtype, e)


def _exact_roundtrip(inner: DType, outer: DType) -> bool:
    """Whether converting inner -> outer -> inner is the identity for every value."""
    if inner.is_bool:
        return True
    if inner.kind == outer.kind:
        return outer.bits >= inner.bits
    if inner.is_int and outer.is_float:
        mantissa = {16: 11, 32: 24, 64: 53}[outer.bits]
        return inner.bits <= mantissa
    if inner.kind == "uint" and outer.kind == "int":
        return outer.bits > inner.bits
    return False


def conjuncts(e: Expr) -> list[Expr]:
    """``a && b && c`` -> ``[a, b, c]`` (iterative: ``conjoin`` of thousands of
    conditions is a chain that deep)."""
    out: list[Expr] = []
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, Binary) and node.op is Op.AND:
            stack.append(node.b)
            stack.append(node.a)
        else:
            out.append(node)
    return out


def conjoin(parts: Sequence[Expr]) -> Expr:
    """``[a, b, c]`` -> ``a && b && c`` (``true`` for none)."""
    out: Expr = const(True)
    for p in parts:
        out = p if isinstance(out, Const) else binary(Op.AND, out, p)
    return out
