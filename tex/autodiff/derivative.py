"""Scalar derivatives of expressions: one rule per operator, in one table.

A rule ``RULES[op](node, g, i)`` gives the contribution that an incoming sensitivity ``g``
of ``node`` makes to the ``i``-th child (the vector-Jacobian product of one scalar
operation). The same table serves both directions:

- reverse (``partials``): one backward sweep over the expression DAG yields the partial
  derivative of the expression with respect to every *leaf* (tensor read) it contains;
- forward (``tangent``): ``d(node) = sum_i rule(node, d(child_i), i)`` (for scalars a vjp
  rule is linear in ``g``, so applying it to the child's tangent gives the jvp term).

Conventions (documented in the tutorial and tested):
- integer and boolean values are not differentiable: their derivatives are 0, as are those
  of floor/ceil/round/trunc, comparisons and float ``//``;
- ``max(a, b)`` sends the gradient to ``a`` when ``a >= b`` (ties to the first operand),
  ``min(a, b)`` to ``a`` when ``a <= b``;
- ``abs'(x) = sign(x)`` (0 at 0, as PyTorch);
- ``select(c, a, b)`` differentiates the chosen branch; ``c`` is not differentiated;
- ``pow(a, b)`` only builds the ``log(a)`` term when ``b`` depends on a differentiated leaf,
  so ``pow(x, 2.0)`` has a finite derivative at ``x <= 0``; as in PyTorch, ``d/da`` is 0
  where ``b = 0`` and ``d/db`` is 0 where ``a = 0, b >= 0`` (not ``0 * inf = nan``);
- otherwise IEEE: ``sqrt'(0) = log'(0) = +inf``, nan outside the domain (``sqrt'(-1)``).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from ..debug import InternalError
from ..ir import fold
from ..ir.expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Op,
    Reduce,
    Select,
    TensorRead,
    Unary,
    Var,
)
from ..ir.visit import post_order

__all__ = ["RULES", "partials", "tangent", "is_differentiable", "DifferentiationError"]


class DifferentiationError(TypeError):
    """An expression holds an operation tex has no derivative rule for."""


def is_differentiable(e: Expr) -> bool:
    """Whether derivatives flow through values of ``e``'s dtype (floats only)."""
    return e.dtype.is_float


def _c(value: float, like: Expr) -> Expr:
    return Const(value, like.dtype)


def _mul(a: Expr, b: Expr) -> Expr:
    return fold.binary(Op.MUL, a, b)


def _div(a: Expr, b: Expr) -> Expr:
    return fold.binary(Op.DIV, a, b)


def _sub(a: Expr, b: Expr) -> Expr:
    return fold.binary(Op.SUB, a, b)


def _neg(a: Expr) -> Expr:
    return fold.unary(Op.NEG, a)


def _gate(cond: Expr, g: Expr) -> Expr:
    """``g`` where ``cond`` holds, else 0."""
    return fold.select(cond, g, _c(0.0, g))


Rule = Callable[[Expr, Expr, int], "Expr | None"]

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _unary_rules() -> dict[Op, Rule]:
    def u(f: Callable[[Unary, Expr], Expr]) -> Rule:
        return lambda node, g, i: f(node, g)  # type: ignore[arg-type]

    def zero(node: Expr, g: Expr, i: int) -> None:
        return None

    return {
        Op.NEG: u(lambda n, g: _neg(g)),
        Op.EXP: u(lambda n, g: _mul(g, n)),
        Op.LOG: u(lambda n, g: _div(g, n.a)),
        Op.LOG2: u(lambda n, g: _div(g, _mul(n.a, _c(_LN2, n)))),
        Op.LOG10: u(lambda n, g: _div(g, _mul(n.a, _c(_LN10, n)))),
        Op.SQRT: u(lambda n, g: _div(_mul(g, _c(0.5, n)), n)),
        Op.RSQRT: u(lambda n, g: _mul(g, _div(_mul(_c(-0.5, n), n), n.a))),
        Op.SIN: u(lambda n, g: _mul(g, fold.unary(Op.COS, n.a))),
        Op.COS: u(lambda n, g: _neg(_mul(g, fold.unary(Op.SIN, n.a)))),
        Op.TAN: u(lambda n, g: _mul(g, fold.binary(Op.ADD, _c(1.0, n), _mul(n, n)))),
        Op.TANH: u(lambda n, g: _mul(g, _sub(_c(1.0, n), _mul(n, n)))),
        Op.SIGMOID: u(lambda n, g: _mul(g, _mul(n, _sub(_c(1.0, n), n)))),
        Op.ERF: u(lambda n, g: _mul(g, _mul(_c(_TWO_OVER_SQRT_PI, n),
                                            fold.unary(Op.EXP, _neg(_mul(n.a, n.a)))))),
        Op.ABS: u(lambda n, g: fold.select(fold.compare(Op.GT, n.a, _c(0.0, n)), g,
                                           _gate(fold.compare(Op.LT, n.a, _c(0.0, n)),
                                                 _neg(g)))),
        Op.FLOOR: zero, Op.CEIL: zero, Op.ROUND: zero, Op.TRUNC: zero, Op.NOT: zero,
    }


def _pow_rule(node: Binary, g: Expr, i: int) -> Expr:
    a, b = node.a, node.b
    zero = _c(0.0, node)
    if i == 0:  # d/da a^b = b * a^(b-1); 0 where b = 0 (a^0 = 1), not 0 * 0^-1 = nan
        d = _mul(g, _mul(b, fold.binary(Op.POW, a, _sub(b, _c(1.0, b)))))
        return fold.select(fold.compare(Op.EQ, b, zero), zero, d)
    # d/db a^b = a^b * log(a); 0 where a = 0 and b >= 0 (0^b = 0 for every b > 0), not
    # 0 * log(0) = nan
    d = _mul(g, _mul(node, fold.unary(Op.LOG, a)))
    base_zero = fold.binary(Op.AND, fold.compare(Op.EQ, a, zero), fold.compare(Op.GE, b, zero))
    return fold.select(base_zero, zero, d)


def _binary_rules() -> dict[Op, Rule]:
    def zero(node: Expr, g: Expr, i: int) -> None:
        return None

    def add(node: Binary, g: Expr, i: int) -> Expr:
        return g

    def sub(node: Binary, g: Expr, i: int) -> Expr:
        return g if i == 0 else _neg(g)

    def mul(node: Binary, g: Expr, i: int) -> Expr:
        return _mul(g, node.b if i == 0 else node.a)

    def div(node: Binary, g: Expr, i: int) -> Expr:
        if i == 0:
            return _div(g, node.b)
        return _neg(_div(_mul(g, node), node.b))  # d/db a/b = -(a/b)/b

    def floormod(node: Binary, g: Expr, i: int) -> Expr:
        # a mod b = a - floor(a/b)*b (floats): d/da = 1, d/db = -floor(a/b)
        if i == 0:
            return g
        return _neg(_mul(g, fold.unary(Op.FLOOR, _div(node.a, node.b))))

    def maximum(node: Binary, g: Expr, i: int) -> Expr:
        first = fold.compare(Op.GE, node.a, node.b)
        return _gate(first, g) if i == 0 else _gate(fold.logical_not(first), g)

    def minimum(node: Binary, g: Expr, i: int) -> Expr:
        first = fold.compare(Op.LE, node.a, node.b)
        return _gate(first, g) if i == 0 else _gate(fold.logical_not(first), g)

    return {
        Op.ADD: add, Op.SUB: sub, Op.MUL: mul, Op.DIV: div, Op.POW: _pow_rule,  # type: ignore
        Op.FLOORMOD: floormod, Op.FLOORDIV: zero, Op.MAX: maximum, Op.MIN: minimum,  # type: ignore
        Op.AND: zero, Op.OR: zero,
    }


# Op -> rule; Select and Cast have their own entries below (they carry no Op).
RULES: dict[Op, Rule] = {**_unary_rules(), **_binary_rules()}


def _select_rule(node: Select, g: Expr, i: int) -> Expr | None:
    if i == 0:
        return None
    return _gate(node.cond, g) if i == 1 else _gate(fold.logical_not(node.cond), g)


def _cast_rule(node: Cast, g: Expr, i: int) -> Expr | None:
    if not node.a.dtype.is_float:
        return None
    return fold.cast(node.a.dtype, g)


def _rule_for(node: Expr) -> Rule | None:
    """The rule of an interior node; None for leaves. Raises for an unknown operator."""
    if isinstance(node, (Unary, Binary)):
        rule = RULES.get(node.op)
        if rule is None:
            raise DifferentiationError(f"no derivative rule for operator '{node.op.value}' "
                                       f"(in {node})")
        return rule
    if isinstance(node, Select):
        return _select_rule  # type: ignore[return-value]
    if isinstance(node, Cast):
        return _cast_rule  # type: ignore[return-value]
    if isinstance(node, (Compare, Const, Var, TensorRead)):
        return None
    if isinstance(node, Reduce):
        raise InternalError("scalar derivative of a nested reduction", node)
    raise DifferentiationError(f"no derivative rule for {type(node).__name__} node {node}")


def active_nodes(root: Expr, is_leaf: Callable[[Expr], bool]) -> set[Expr]:
    """Float nodes through which some leaf reaches ``root``."""
    active: set[Expr] = set()
    for node in post_order(root):
        if not is_differentiable(node):
            continue
        if is_leaf(node) or any(c in active for c in node.children()):
            active.add(node)
    return active


def _add(acc: Expr | None, term: Expr) -> Expr:
    return term if acc is None else fold.binary(Op.ADD, acc, term)


def partials(expr: Expr, is_leaf: Callable[[Expr], bool],
             seed: Expr | None = None) -> dict[Expr, Expr]:
    """``{leaf: d expr / d leaf}`` for every leaf in ``expr`` that it depends on.

    ``is_leaf`` picks the nodes differentiated with respect to (usually the reads of one
    tensor); each distinct leaf node is one variable (reads are interned, so ``X[i] * X[i]``
    has the single leaf ``X[i]``, with partial ``X[i] + X[i]``). ``seed`` multiplies the
    result (default 1).
    """
    active = active_nodes(expr, is_leaf)
    if expr not in active:
        return {}
    order = [n for n in post_order(expr) if n in active]
    sens: dict[Expr, Expr] = {expr: seed if seed is not None else _c(1.0, expr)}
    out: dict[Expr, Expr] = {}
    for node in reversed(order):
        g = sens.pop(node, None)
        if g is None:
            continue
        if is_leaf(node):
            out[node] = g
            continue
        rule = _rule_for(node)
        if rule is None:
            continue
        for i, child in enumerate(node.children()):
            if child not in active:
                continue
            term = rule(node, g, i)
            if term is not None:
                sens[child] = _add(sens.get(child), term)
    return out


def tangent(expr: Expr, leaf_tangents: Mapping[Expr, Expr] | Callable[[Expr], Expr | None],
            is_leaf: Callable[[Expr], bool]) -> Expr | None:
    """The directional derivative of ``expr`` given the tangents of its leaves (forward
    mode); None when it is identically zero."""
    lookup = leaf_tangents.get if isinstance(leaf_tangents, Mapping) else leaf_tangents
    active = active_nodes(expr, is_leaf)
    if expr not in active:
        return None
    tan: dict[Expr, Expr | None] = {}
    for node in post_order(expr):
        if node not in active:
            continue
        if is_leaf(node):
            tan[node] = lookup(node)
            continue
        if isinstance(node, Select):
            ta, tb = tan.get(node.a), tan.get(node.b)
            if ta is None and tb is None:
                tan[node] = None
            else:
                zero = _c(0.0, node)
                tan[node] = fold.select(node.cond, ta if ta is not None else zero,
                                        tb if tb is not None else zero)
            continue
        rule = _rule_for(node)
        acc: Expr | None = None
        if rule is not None:
            for i, child in enumerate(node.children()):
                tc = tan.get(child)
                if tc is None:
                    continue
                term = rule(node, tc, i)
                if term is not None:
                    acc = _add(acc, term)
        tan[node] = acc
    return tan.get(expr)
