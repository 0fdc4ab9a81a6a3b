"""Extents that may be symbolic: an int, or an integer expression over ``tex.var`` /
``tex.size_var`` variables (TVM's symbolic shapes), and the arithmetic shapes need on them.

Symbolic extents are kept simplified, so two equal sizes are the same node; these helpers
compare, multiply and bind them without the caller asking which kind it holds.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..dtype import int32
from ..ir.expr import Binary, Cast, Const, Expr, Op, Unary, Var
from ..ir.visit import collect_vars, post_order, substitute
from .simplifier import can_prove, simplify
from .sympy_bridge import exact_quotient

__all__ = ["Extent", "extent_vars", "is_static", "same_extent", "extent_product",
           "extent_sum", "extent_quotient", "exceeds_int32", "bind_extent", "as_extent",
           "static_or_none", "as_expr_int", "is_one",
           "at_hint", "DEFAULT_HINT", "extent_value"]

Extent = int | Expr

_INT32_MAX = 2**31 - 1


def as_extent(value: Any) -> Extent:
    """An int stays an int; an expression is simplified, and a constant one becomes an int."""
    if isinstance(value, Expr):
        e = simplify(value) if not isinstance(value, (Const, Var)) else value
        return int(e.value) if isinstance(e, Const) else e
    return int(value)


def is_static(value: Any) -> bool:
    """Whether an extent (or every extent of a shape) is a plain int."""
    if isinstance(value, (tuple, list)):
        return all(isinstance(v, int) for v in value)
    return isinstance(value, int)


# Shape variables without a hint are scheduled as if they were this: a batch or a sequence
# length of the size tiles and parallel loops pay for (``auto_schedule(hint=...)``).
DEFAULT_HINT = 64


def at_hint(value: Extent, hint: Mapping[Var, int] | None = None) -> int:
    """An extent as the int a scheduler decides with: itself, or a symbolic one at the
    hint's values (``DEFAULT_HINT`` for a variable the hint leaves out; at least 1)."""
    if isinstance(value, int):
        return value
    hint = hint or {}
    got = bind_extent(value, {v: hint.get(v, DEFAULT_HINT) for v in extent_vars(value)})
    return max(1, got) if isinstance(got, int) else DEFAULT_HINT


def is_one(value: Extent) -> bool:
    """Whether an extent is the int 1 (a symbolic one never is, for this question)."""
    return isinstance(value, int) and value == 1


def static_or_none(value: Extent) -> int | None:
    """The int value of an extent, or None when it is symbolic."""
    return value if isinstance(value, int) else None


def same_extent(a: Extent, b: Extent) -> bool:
    """Whether two extents are equal for every value of their variables (two ints are
    compared; a symbolic extent equals only one the simplifier proves equal)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int) or isinstance(b, int):
        d = as_extent(b - a) if isinstance(a, int) else as_extent(a - b)
        return isinstance(d, int) and d == 0
    return a is b or can_prove(a == b)


def extent_product(values: Sequence[Extent]) -> Extent:
    """The product of extents (an int when all are ints; 1 for none)."""
    out: Extent = 1
    for v in values:
        out = out * v
    return as_extent(out)


def extent_sum(values: Sequence[Extent]) -> Extent:
    """The sum of extents (an int when all are ints; 0 for none)."""
    out: Extent = 0
    for v in values:
        out = out + v
    return as_extent(out)


def exceeds_int32(value: Extent) -> bool:
    """Whether an extent is known to exceed int32's range (a symbolic one is not: shape
    variables are int32, and a built function refuses sizes whose element counts
    overflow)."""
    return isinstance(value, int) and value > _INT32_MAX


def extent_quotient(a: Extent, b: Extent) -> Extent | None:
    """``a / b`` when ``b`` divides ``a`` for every value of the variables (an int or a
    polynomial with integer coefficients), else None."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b if b and a % b == 0 else None
    q = exact_quotient(as_expr_int(a), as_expr_int(b))
    return None if q is None else as_extent(q)


def as_expr_int(value: Extent) -> Expr:
    return value if isinstance(value, Expr) else Const(value, int32)


def extent_vars(*values: Any) -> list[Var]:
    """The shape variables (``tex.var``/``tex.size_var``) the extents (or shapes) use, in
    order of first appearance."""
    seen: dict[Var, None] = {}
    for v in values:
        for e in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(e, Expr):
                seen.update((x, None) for x in collect_vars(e) if x.kind in ("var", "size"))
    return list(seen)


_INT_OPS: dict[Op, Callable[[int, int], int]] = {
    Op.ADD: lambda a, b: a + b, Op.SUB: lambda a, b: a - b, Op.MUL: lambda a, b: a * b,
    Op.FLOORDIV: lambda a, b: a // b, Op.FLOORMOD: lambda a, b: a % b,
    Op.MIN: min, Op.MAX: max,
    Op.DIV: lambda a, b: abs(a) // abs(b) * (1 if (a >= 0) == (b > 0) else -1),
}


def extent_value(value: Extent, values: Mapping[Var, int]) -> int | None:
    """The int value of an extent at ``values`` of its variables (None when one is missing,
    or the extent uses an operation not of integer index arithmetic): a direct evaluation,
    cheap enough for every call of a function with symbolic shapes."""
    if isinstance(value, int):
        return value
    memo: dict[Expr, int] = {}
    for node in post_order(value):
        if isinstance(node, Const):
            memo[node] = int(node.value)
        elif isinstance(node, Var):
            if node not in values:
                return None
            memo[node] = int(values[node])
        elif isinstance(node, Binary) and node.op in _INT_OPS:
            b = memo[node.b]
            if b == 0 and node.op in (Op.FLOORDIV, Op.FLOORMOD, Op.DIV):
                return None
            memo[node] = _INT_OPS[node.op](memo[node.a], b)
        elif isinstance(node, Unary) and node.op is Op.NEG:
            memo[node] = -memo[node.a]
        elif isinstance(node, Cast) and node.dtype.is_int:
            memo[node] = memo[node.a]
        else:
            return None
    return memo[value]


def bind_extent(value: Extent, bind: Mapping[Var, int]) -> Extent:
    """``value`` with the bound variables replaced by their values (an int when every
    variable it uses is bound)."""
    if isinstance(value, int):
        return value
    mapping: dict[Expr, Expr] = {v: Const(int(bind[v]), v.dtype)
                                 for v in collect_vars(value) if v in bind}
    return as_extent(substitute(value, mapping)) if mapping else value
