"""Rewrite rules for boolean conditions: ``&&``/``||`` chains (merged ranges of a shared
linear part, Fourier-Motzkin across parts), negations, and selects between booleans.

Each rule is ``(node, analyzer) -> Expr | None`` with a ``before -> after`` comment; the
families are tabled in ``tex.arith.rules.FAMILIES``.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..dtype import boolean
from ..ir import fold
from ..ir.expr import (
    Binary,
    Compare,
    Const,
    Expr,
    Op,
    Select,
    TensorRead,
    Unary,
)
from ..ir.visit import for_ops, post_order
from .linear import INF, Constraint, is_index

if TYPE_CHECKING:
    from .rules import Analyzer

__all__ = ["chain_operands", "and_or", "not_chain", "select_bool", "select_nested"]


# --------------------------------------------------------------------------------------
# logic: && and || chains
# --------------------------------------------------------------------------------------

def chain_operands(node: Expr, op: Op) -> list[Expr]:
    """The operands of a chain of one associative operator, left to right."""
    out: list[Expr] = []
    stack = [node]
    while stack:
        e = stack.pop()
        if isinstance(e, Binary) and e.op is op:
            stack.append(e.b)
            stack.append(e.a)
        else:
            out.append(e)
    return out


def _literal(e: Expr) -> tuple[Expr, bool]:
    if isinstance(e, Unary) and e.op is Op.NOT:
        return e.a, False
    return e, True


def _chain(op: Op, items: Iterable[Expr], empty: bool) -> Expr:
    acc: Expr | None = None
    for e in items:
        acc = e if acc is None else fold.binary(op, acc, e)
    return Const(empty, boolean) if acc is None else acc


@for_ops(Op.AND, Op.OR)
def and_or(node: Expr, an: Analyzer) -> Expr | None:
    """Simplify a ``&&`` or ``||`` chain as a whole."""
    # a && !a -> False;  a || !a -> True;  a && a -> a;  a && (a || b) -> a
    # i >= 0 && i < 5 && i < 3 -> i >= 0 && i < 3;  i < j && j < i -> False
    # i < 3 || i >= 3 -> True;  i == 3 || i == 4 -> i >= 3 && i < 5
    # i < j && j < k && k < i -> False (Fourier-Motzkin);  i < j || j < k || k <= i -> True
    if not (isinstance(node, Binary) and node.op in (Op.AND, Op.OR)):
        return None
    is_and = node.op is Op.AND
    absorbing = not is_and  # False annihilates &&, True annihilates ||
    slots: list[Expr | tuple] = []  # expressions, or ("group", key, first compare)
    groups: dict[tuple, list[Constraint]] = {}
    seen: dict[Expr, bool] = {}
    items = chain_operands(node, node.op)
    present = set(items)
    for e in items:
        if isinstance(e, Const):
            if bool(e.value) is absorbing:
                return Const(absorbing, boolean)
            continue
        if isinstance(e, Compare) and is_index(e.a):
            con = an.compare_constraint(e)
            if isinstance(con, bool):
                if con is absorbing:
                    return Const(absorbing, boolean)
                continue
            if con.key not in groups:
                groups[con.key] = []
                slots.append(("group", con.key, e))
            groups[con.key].append(con)
            continue
        atom, polarity = _literal(e)
        if seen.get(atom) is (not polarity):  # a && !a
            return Const(absorbing, boolean)
        if atom in seen:
            continue
        seen[atom] = polarity
        slots.append(e)
    merged = {k: (_and_group if is_and else _or_group)(cons, an) for k, cons in groups.items()}
    if any(m is None for m in merged.values()):
        return Const(absorbing, boolean)
    if len(groups) > 1 and _linear_contradiction(groups, merged, is_and, an):
        return Const(absorbing, boolean)
    other = Op.OR if is_and else Op.AND
    out: list[Expr] = []
    for slot in slots:
        if isinstance(slot, Expr):
            inner = chain_operands(slot, other) if isinstance(slot, Binary) else [slot]
            if len(inner) > 1 and any(x in present for x in inner):
                continue  # a && (a || b) -> a
            out.append(slot)
            continue
        cons = groups[slot[1]]
        if len(cons) == 1 and cons[0].kind == "range":
            out.append(slot[2])  # already canonical (compare_linear ran on it): keep it
            continue
        con = cons[0]
        spans, ne = merged[slot[1]]  # type: ignore[misc]
        parts = _emit_and(con, spans[0], ne, an) if is_and else _emit_or(con, spans, ne, an)
        if parts is None:  # a constant would not fit the dtype: leave the chain as it is
            return None
        out.extend(parts)
    result = _chain(node.op, out, empty=is_and)
    return None if result is node else result


Span = tuple  # (lo, hi) on extended integers


def _part_bounds(con: Constraint, an: Analyzer) -> Span:
    b = an.linear_bounds(con.part)
    return (-INF if b.lo is None else b.lo, INF if b.hi is None else b.hi)


def _and_group(cons: list[Constraint], an: Analyzer) -> tuple[list[Span], list[int]] | None:
    """Intersect constraints on one linear part: ``([(lo, hi)], excluded points)``, or None
    when they contradict."""
    lo, hi = _part_bounds(cons[0], an)
    ne: set[int] = set()
    for c in cons:
        if c.kind == "ne":
            ne.add(int(c.lo))
        else:
            lo, hi = max(lo, c.lo), min(hi, c.hi)
    while lo in ne:  # i >= 0 && i != 0 -> i >= 1
        lo += 1
    while hi in ne:
        hi -= 1
    if lo > hi:
        return None
    return [(lo, hi)], sorted(p for p in ne if lo < p < hi)


def _emit_and(con: Constraint, span: Span, ne: list[int], an: Analyzer) -> list[Expr] | None:
    out = an.emit_range(con, *span)
    excluded = [an.build_compare(con.part, Op.NE, p) for p in ne]
    if out is None or any(e is None for e in excluded):
        return None
    return out + excluded  # type: ignore[operator]


def _or_group(cons: list[Constraint], an: Analyzer) -> tuple[list[Span], list[int]] | None:
    """Unite constraints on one linear part: ``(disjoint spans, [p])`` where a point ``p``
    stands for ``part != p``; None when they cover every value."""
    blo, bhi = _part_bounds(cons[0], an)
    ne = sorted({int(c.lo) for c in cons if c.kind == "ne"})
    spans = sorted((max(c.lo, blo), min(c.hi, bhi)) for c in cons if c.kind == "range")
    merged: list[list] = []
    for lo, hi in spans:  # i < 3 || i >= 3 -> True;  i == 3 || i == 4 -> 3 <= i < 5
        if lo > hi:
            continue
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    if len(ne) > 1 or (ne and any(lo <= ne[0] <= hi for lo, hi in merged)):
        return None  # i != 1 || i != 2 -> True
    if ne:  # every span lies inside part != p
        return [], ne
    if any(lo <= blo and hi >= bhi for lo, hi in merged):
        return None
    return [(lo, hi) for lo, hi in merged], []


def _emit_or(con: Constraint, spans: list[Span], ne: list[int],
             an: Analyzer) -> list[Expr] | None:
    if ne:
        e = an.build_compare(con.part, Op.NE, ne[0])
        return None if e is None else [e]
    out = []
    for lo, hi in spans:
        parts = an.emit_range(con, lo, hi)
        if parts is None:
            return None
        out.append(_chain(Op.AND, parts, empty=True))
    return out


# Fourier-Motzkin: rows are  sum(coef * atom) <= bound  over integers
Row = tuple[dict[Expr, int], int]
_FM_MAX_ROWS = 200
_FM_MAX_ATOMS = 6


def _linear_contradiction(groups: dict[tuple, list[Constraint]], merged: dict, is_and: bool,
                          an: Analyzer) -> bool:
    """Whether the groups of an && chain have no common integer point (or, for ||, their
    complements have none: the chain always holds). Constraints on different linear parts
    that share atoms are checked together by Fourier-Motzkin elimination."""
    rows: list[Row] = []
    atoms: dict[Expr, None] = {}
    for key, (spans, ne) in merged.items():
        part = groups[key][0].part
        if is_and:
            lo, hi = spans[0]
        elif ne:  # not (part != p)  is  part == p
            lo = hi = ne[0]
        elif len(spans) == 1 and (spans[0][0] == -INF or spans[0][1] == INF):
            lo, hi = ((spans[0][1] + 1, INF) if spans[0][0] == -INF
                      else (-INF, spans[0][0] - 1))  # the complement of a ray
        else:
            return False  # a complement that is not convex: no conclusion
        if hi != INF:
            rows.append((dict(part.terms), int(hi)))
        if lo != -INF:
            rows.append(({t: -c for t, c in part.terms.items()}, -int(lo)))
        atoms.update(dict.fromkeys(part.terms))
    if len(atoms) > _FM_MAX_ATOMS or sum(len(g[0].part.terms) for g in groups.values()) \
            == len(atoms):
        return False  # too large, or no shared atoms (independent parts never conflict)
    for t in atoms:  # the domain box
        b = an.bounds(t)
        if b.hi is not None:
            rows.append(({t: 1}, b.hi))
        if b.lo is not None:
            rows.append(({t: -1}, -b.lo))
    return _fm_infeasible(rows, list(atoms))


def _tighten(row: Row) -> Row | None:
    """Divide by the gcd of the coefficients, rounding the bound down (valid on integers);
    None for a constant row that holds."""
    terms, bound = row
    g = 0
    for c in terms.values():
        g = math.gcd(g, c)
    if g == 0:
        return None if bound >= 0 else row
    if g == 1:
        return row
    return {t: c // g for t, c in terms.items()}, bound // g


def _fm_infeasible(rows: list[Row], atoms: list[Expr]) -> bool:
    """Whether the rows have no integer solution (True is a proof; False means unknown).

    Each elimination step adds non-negative combinations of rows, so every derived row
    holds at every integer solution; deriving ``0 <= negative`` proves there is none.
    """
    current: dict[frozenset, Row] = {}

    def add(row: Row, into: dict[frozenset, Row]) -> bool:
        r = _tighten(row)
        if r is None:
            return True
        if not r[0]:
            return False  # 0 <= bound < 0
        key = frozenset(r[0].items())
        old = into.get(key)
        if old is None or r[1] < old[1]:  # same left side: keep the tighter bound
            into[key] = r
        return True

    for row in rows:
        if not add(row, current):
            return True
    for v in atoms:
        pos = [r for r in current.values() if r[0].get(v, 0) > 0]
        neg = [r for r in current.values() if r[0].get(v, 0) < 0]
        nxt = {k: r for k, r in current.items() if v not in r[0]}
        for pt, pb in pos:
            for nt, nb in neg:
                a, c = pt[v], -nt[v]
                terms = {t: w * c for t, w in pt.items()}
                for t, w in nt.items():
                    terms[t] = terms.get(t, 0) + w * a
                terms = {t: w for t, w in terms.items() if w}
                if not add((terms, pb * c + nb * a), nxt):
                    return True
        if len(nxt) > _FM_MAX_ROWS:
            return False
        current = nxt
    return False


@for_ops(Op.NOT)
def not_chain(node: Expr, an: Analyzer) -> Expr | None:
    """Push ``!`` into a chain whose operands all negate for free (integer comparisons,
    negations): the result is no larger and the chain rules can then merge it."""
    # !(i != j || j != k) -> i == j && j == k;  !(a && !b) where a is i < 3 -> i >= 3 || b
    if not (isinstance(node, Unary) and node.op is Op.NOT and isinstance(node.a, Binary)
            and node.a.op in (Op.AND, Op.OR)):
        return None
    items = chain_operands(node.a, node.a.op)
    if not all((isinstance(e, Compare) and e.a.dtype.is_integral) or
               (isinstance(e, Unary) and e.op is Op.NOT) for e in items):
        return None
    other = Op.OR if node.a.op is Op.AND else Op.AND
    return _chain(other, [fold.logical_not(e) for e in items], empty=other is Op.AND)


# --------------------------------------------------------------------------------------
# select
# --------------------------------------------------------------------------------------

def _guarded(e: Expr) -> bool:
    """Whether ``e`` holds something a select must guard: a tensor read (it may fall out of
    bounds where the select's condition is false) or an integer division by a variable."""
    return any(isinstance(n, TensorRead) or
               (isinstance(n, Binary) and n.op in (Op.DIV, Op.FLOORDIV, Op.FLOORMOD)
                and n.dtype.is_integral and not isinstance(n.b, Const))
               for n in post_order(e))


def select_bool(node: Expr, an: Analyzer) -> Expr | None:
    """A select between booleans is a logical formula, unless the select guards its branch.

    ``&&``/``||`` do not guard their operands (the interpreter evaluates both everywhere),
    so ``select(c, T[i + 1] > 0, False)`` keeps its select: ``c && T[i + 1] > 0`` would read
    ``T`` where ``c`` is false."""
    # select(c, True, False) -> c;  select(c, x, False) -> c && x;  select(c, True, x) -> c || x
    if not (isinstance(node, Select) and node.dtype.is_bool):
        return None
    c, a, b = node.cond, node.a, node.b
    if isinstance(a, Const) and not _guarded(b):
        return fold.binary(Op.OR, c, b) if a.value else \
            fold.binary(Op.AND, fold.logical_not(c), b)
    if isinstance(b, Const) and not _guarded(a):
        return fold.binary(Op.AND, c, a) if not b.value else \
            fold.binary(Op.OR, fold.logical_not(c), a)
    return None


def select_nested(node: Expr, an: Analyzer) -> Expr | None:
    """An inner select on the same condition picks its branch."""
    # select(c, select(c, a, b), d) -> select(c, a, d);  select(c, a, select(c, b, d)) -> ...
    if not isinstance(node, Select):
        return None
    c, a, b = node.cond, node.a, node.b
    if isinstance(a, Select) and a.cond is c:
        return fold.select(c, a.a, b)
    if isinstance(b, Select) and b.cond is c:
        return fold.select(c, a, b.b)
    return None


