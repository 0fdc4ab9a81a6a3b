"""Rewrite rules for integer index arithmetic: re-folding, single-point bounds, canonical
linear sums, ``//``/``%``/truncating division by constants, min/max, and comparisons.

Each rule is ``(node, analyzer) -> Expr | None`` with a ``before -> after`` comment; the
families are tabled in ``tex.arith.rules.FAMILIES``.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..dtype import boolean
from ..ir import fold
from ..ir.expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Op,
    Select,
    Unary,
)
from ..ir.visit import for_ops
from .bounds import Interval
from .linear import (
    INF,
    LINEAR_OPS,
    Constraint,
    LinearForm,
    const_int,
    div_exact,
    fits,
    is_index,
    is_linear_node,
)

if TYPE_CHECKING:
    from .rules import Analyzer

__all__ = ["refold", "bounds_point", "canonical_linear", "floordiv_const", "floormod_const",
           "truncdiv_const", "divmod_by_bounds", "minmax_by_bounds", "minmax_floordiv",
           "minmax_consts",
           "compare_linear", "compare_bool"]


# --------------------------------------------------------------------------------------
# fold: the construction-time builders, re-run on nodes the driver rebuilt raw
# --------------------------------------------------------------------------------------

def refold(node: Expr, an: Analyzer) -> Expr | None:
    """Re-apply ``tex.ir.fold`` (the driver rebuilds nodes with the raw constructors)."""
    # x + (i - i) -> x + 0 -> x;  select(True, a, b) -> a;  int32(int64(i)) -> i
    try:
        match node:
            case Binary(op, a, b):
                # every fold rule for binary operators needs a constant operand or a is b
                if not (isinstance(a, Const) or isinstance(b, Const) or a is b):
                    return None
                out = fold.binary(op, a, b)
            case Unary(op, a):
                out = fold.unary(op, a)
            case Compare(op, a, b):
                if not (isinstance(a, Const) or isinstance(b, Const) or a is b):
                    return None
                out = fold.compare(op, a, b)
            case Select(c, a, b):
                out = fold.select(c, a, b)
            case Cast(dtype, a):
                out = fold.cast(dtype, a)
            case _:
                return None
    except ValueError:  # a constant integer division by zero stays as written
        return None
    return None if out is node else out


# --------------------------------------------------------------------------------------
# bounds: a node whose interval is one point is that constant
# --------------------------------------------------------------------------------------

def bounds_point(node: Expr, an: Analyzer) -> Expr | None:
    """Replace an integral node by the constant its bounds pin down."""
    # (i % 4) // 4 -> 0;  i < 10 -> True (i in [0, 9]);  j -> 3 (j in [3, 3])
    if isinstance(node, Const) or not node.dtype.is_integral:
        return None
    # skipped where another family decides at least as much: a sum or product of
    # non-constant atoms is never a point; index comparisons and &&/|| chains are decided
    # on linear forms by compare_linear and and_or
    if isinstance(node, Binary) and (node.op in (Op.AND, Op.OR) or
                                     node.op in LINEAR_OPS and is_index(node)):
        return None
    if isinstance(node, Compare) and is_index(node.a):
        return None
    iv = an.bounds(node)
    return Const(iv.lo, node.dtype) if iv.is_point else None


# --------------------------------------------------------------------------------------
# linear: canonical linear form of int32/int64 sums
# --------------------------------------------------------------------------------------

@for_ops(Op.ADD, Op.SUB, Op.MUL, Op.NEG)
def canonical_linear(node: Expr, an: Analyzer) -> Expr | None:
    """Collect like terms, fold constants rightmost, distribute constant factors."""
    # (i + 1) - i -> 1;  i*2 + i -> i*3;  (i + j) - (j + i) -> 0;  (i + 1)*4 -> i*4 + 4
    # (i // 4)*4 + i % 4 -> i;  i - (i // 4)*4 -> i % 4
    if not is_index(node) or not is_linear_node(node) or isinstance(node, Const) \
            or an.is_canonical(node):
        return None
    lf = an.linear(node)
    fused = an.fuse_divmod(lf)
    if fused is lf and an.matches(node, lf):
        an._canonical.add(node)
        return None
    out = an.rebuild(fused)
    return None if out is node else out


# --------------------------------------------------------------------------------------
# divmod: floordiv / floormod / truncdiv by constants, using bounds
# --------------------------------------------------------------------------------------

def _split(lf: LinearForm, c: int) -> tuple[LinearForm, LinearForm]:
    """``lf == c*q + r``: q takes the terms whose coefficients ``c`` divides and the
    quotient of the constant; r the other terms and ``const mod c``."""
    q_terms = {t: a // c for t, a in lf.terms.items() if a % c == 0}
    r_terms = {t: a for t, a in lf.terms.items() if a % c}
    qc, rc = divmod(lf.const, c)
    return LinearForm(q_terms, qc, lf.dtype), LinearForm(r_terms, rc, lf.dtype)


def _one_bucket(iv: Interval, c: int) -> int | None:
    """``floor(v / c)`` when it is the same for every v in ``iv``."""
    if iv.lo is None or iv.hi is None:
        return None
    q = iv.lo // c
    return q if iv.hi // c == q else None


def _block(lf: LinearForm, c: int, an: Analyzer) -> tuple[int, LinearForm, LinearForm] | None:
    """``lf == g*q + r`` with ``0 <= r < g`` for a factor ``1 < g < c`` of ``c > 0``: the
    terms whose coefficients ``g`` divides go (divided) to ``q``, the others and the
    constant's remainder to ``r``; the largest such ``g``, or None. A flattened index
    through a reshape has this form: ``i*768 + j`` with ``j < 768``."""
    if c <= 1:
        return None
    gs = sorted({math.gcd(c, a) for a in lf.terms.values()} - {1, c}, reverse=True)
    for g in gs:
        q_terms = {t: a // g for t, a in lf.terms.items() if a % g == 0}
        if not q_terms:
            continue
        r_terms = {t: a for t, a in lf.terms.items() if a % g}
        qc, rc = divmod(lf.const, g)
        r = LinearForm(r_terms, rc, lf.dtype)
        if _one_bucket(an.linear_bounds(r), g) == 0:
            return g, LinearForm(q_terms, qc, lf.dtype), r
    return None


@for_ops(Op.FLOORDIV)
def floordiv_const(node: Expr, an: Analyzer) -> Expr | None:
    """Simplify ``x // c`` for a non-zero constant c."""
    if not (isinstance(node, Binary) and node.op is Op.FLOORDIV and is_index(node)):
        return None
    c = const_int(node.b)
    if not c:
        return None
    x, dtype = node.a, node.dtype
    if c == -1:  # x // -1 -> -x
        return an.rebuild(an.linear(x).scale(-1))
    # (x // c1) // c2 -> x // (c1*c2)  for c2 > 0 (floor(floor(y) / n) == floor(y / n))
    if c > 0 and isinstance(x, Binary) and x.op is Op.FLOORDIV:
        c1 = const_int(x.b)
        if c1 and fits(c1 * c, dtype):
            return fold.binary(Op.FLOORDIV, x.a, Const(c1 * c, dtype))
    lf = an.linear(x)
    # (y // c1 + m) // c -> (y + m*c1) // (c1*c)  for c > 0: floor(y/c1) + m == floor((y +
    # m*c1)/c1), then the nested rule above
    one = lf.with_const(0).single()
    if c > 0 and one is not None and one[1] == 1 and isinstance(one[0], Binary) \
            and one[0].op is Op.FLOORDIV:
        c1 = const_int(one[0].b)
        if c1 and fits(c1 * c, dtype) and fits(lf.const * c1, dtype):
            inner = an.rebuild(an.linear(one[0].a).add(LinearForm.constant(lf.const * c1,
                                                                             dtype)))
            return fold.binary(Op.FLOORDIV, inner, Const(c1 * c, dtype))
    q, r = _split(lf, c)
    # (c*q + r) // c == q + r // c, exact for any c != 0
    bucket = _one_bucket(an.linear_bounds(r), c)
    if bucket is not None:  # (i*4 + j) // 4 -> i  (0 <= j < 4)
        return an.rebuild(q.with_const(q.const + bucket))
    if q.terms or q.const:  # (i*4 + j + 5) // 4 -> i + (j + 1) // 4 + 1  (j unknown)
        rest = fold.binary(Op.FLOORDIV, an.rebuild(r), Const(c, dtype))
        return an.rebuild(q.add(LinearForm.atom(rest)))
    # (i*768 + j) // 98304 -> i // 128  (0 <= j < 768): the part below a factor of c
    # never carries into the quotient
    block = _block(lf, c, an)
    if block is not None:
        g, qb, _ = block
        return fold.binary(Op.FLOORDIV, an.rebuild(qb), Const(c // g, dtype))
    # (i*4 + 2) // 8 -> (i*2 + 1) // 4: divide through by a common factor
    g = abs(c)
    for a in lf.terms.values():
        g = math.gcd(g, a)
    g = math.gcd(g, lf.const)
    if g > 1:
        return fold.binary(Op.FLOORDIV, an.rebuild(div_exact(lf, g)), Const(c // g, dtype))
    return None



@for_ops(Op.FLOORMOD)
def floormod_const(node: Expr, an: Analyzer) -> Expr | None:
    """Simplify ``x % c`` for a non-zero constant c."""
    if not (isinstance(node, Binary) and node.op is Op.FLOORMOD and is_index(node)):
        return None
    c = const_int(node.b)
    if not c:
        return None
    if c in (1, -1):  # x % 1 -> 0
        return Const(0, node.dtype)
    lf = an.linear(node.a)
    changed = False
    # (y % c1 + j) % c -> (y + j) % c  when c divides c1: y % c1 and y differ by a multiple
    for t in list(lf.terms):
        if isinstance(t, Binary) and t.op is Op.FLOORMOD:
            c1 = const_int(t.b)
            if c1 and c1 % c == 0:
                a = lf.terms[t]
                lf = lf.sub(LinearForm.atom(t, a)).add(an.linear(t.a).scale(a))
                changed = True
    # (i*5 + 7) % 4 -> (i + 3) % 4: reduce coefficients (keeping their sign) and the constant
    terms = {}
    for t, a in lf.terms.items():
        red = (abs(a) % abs(c)) * (1 if a > 0 else -1)
        changed |= red != a
        terms[t] = red
    const = lf.const % c
    changed |= const != lf.const
    r = LinearForm(terms, const, lf.dtype)
    bucket = _one_bucket(an.linear_bounds(r), c)
    if bucket is not None:  # (i*4 + j) % 4 -> j  (0 <= j < 4);  i % 4 % 4 -> i % 4
        return an.rebuild(r.with_const(r.const - c * bucket))
    # (i*768 + j) % 98304 -> (i % 128)*768 + j  (0 <= j < 768)
    block = _block(r, c, an)
    if block is not None:
        g, qb, rb = block
        qmod = fold.binary(Op.FLOORMOD, an.rebuild(qb), Const(c // g, node.dtype))
        return an.rebuild(LinearForm.atom(qmod, g).add(rb))
    if changed:
        return fold.binary(Op.FLOORMOD, an.rebuild(r), Const(c, node.dtype))
    return None


@for_ops(Op.DIV)
def truncdiv_const(node: Expr, an: Analyzer) -> Expr | None:
    """``x / c`` (truncating) by a constant: the floordiv rules where x, c >= 0."""
    if not (isinstance(node, Binary) and node.op is Op.DIV and is_index(node)):
        return None
    c = const_int(node.b)
    if not c:
        return None
    if c == -1:  # x / -1 -> -x
        return an.rebuild(an.linear(node.a).scale(-1))
    lf = an.linear(node.a)
    q, r = _split(lf, c)
    if r.is_const and r.const == 0:  # (i*4 + 8) / 4 -> i + 2, (i*2) / -2 -> -i: exact
        return an.rebuild(q)
    lo = an.linear_bounds(lf).lo
    if c < 0 or lo is None or lo < 0:
        return None
    rb = an.linear_bounds(r)
    bucket = _one_bucket(rb, c)
    if bucket is not None:  # (i*4 + j) / 4 -> i  (i, j >= 0, j < 4)
        return an.rebuild(q.with_const(q.const + bucket))
    if q.terms and rb.lo is not None and rb.lo >= 0:  # (i*4 + j) / 4 -> i + j / 4 (j >= 0)
        rest = fold.binary(Op.DIV, an.rebuild(r), Const(c, node.dtype))
        return an.rebuild(q.add(LinearForm.atom(rest)))
    return None


@for_ops(Op.FLOORMOD)
def divmod_by_bounds(node: Expr, an: Analyzer) -> Expr | None:
    """``x % y`` by a non-constant divisor when 0 <= x < y."""
    # i % n -> i  (i in [0, 9], n in [10, 20])
    if not (isinstance(node, Binary) and node.op is Op.FLOORMOD and node.dtype.is_int):
        return None
    if isinstance(node.b, Const):
        return None
    bx, by = an.bounds(node.a), an.bounds(node.b)
    if bx.lo is not None and bx.lo >= 0 and bx.hi is not None and by.lo is not None \
            and bx.hi < by.lo:
        return node.a
    return None


# --------------------------------------------------------------------------------------
# minmax
# --------------------------------------------------------------------------------------

@for_ops(Op.MIN, Op.MAX)
def minmax_by_bounds(node: Expr, an: Analyzer) -> Expr | None:
    """Decide ``min``/``max`` when one operand is never smaller than the other."""
    # max(i, i + 1) -> i + 1;  min(i, 0) -> 0  (i >= 0);  max(i*2, i*2 + j) -> i*2 + j
    if not (isinstance(node, Binary) and node.op in (Op.MIN, Op.MAX)
            and node.dtype.is_integral):
        return None
    a, b = node.a, node.b
    if is_index(node):
        diff = an.linear_bounds(an.linear(a).sub(an.linear(b)))
    else:
        diff = an.bounds(a).sub(an.bounds(b))
    if diff.lo is not None and diff.lo >= 0:  # a >= b
        return a if node.op is Op.MAX else b
    if diff.hi is not None and diff.hi <= 0:  # a <= b
        return b if node.op is Op.MAX else a
    return None


@for_ops(Op.MIN, Op.MAX)
def minmax_floordiv(node: Expr, an: Analyzer) -> Expr | None:
    """Decide ``min``/``max`` of two quotients by one positive constant: floor division is
    monotone, so the larger numerator gives the larger quotient."""
    # min(n // 8, (n + 7) // 8) -> n // 8 (a symbolic split's tail point)
    if not (isinstance(node, Binary) and node.op in (Op.MIN, Op.MAX) and is_index(node)):
        return None
    a, b = node.a, node.b
    if not (isinstance(a, Binary) and isinstance(b, Binary) and
            a.op is b.op is Op.FLOORDIV):
        return None
    c = const_int(a.b)
    if c is None or c <= 0 or const_int(b.b) != c:
        return None
    diff = an.linear_bounds(an.linear(a.a).sub(an.linear(b.a)))
    if diff.lo is not None and diff.lo >= 0:  # a >= b
        return a if node.op is Op.MAX else b
    if diff.hi is not None and diff.hi <= 0:  # a <= b
        return b if node.op is Op.MAX else a
    return None


@for_ops(Op.MIN, Op.MAX)
def minmax_consts(node: Expr, an: Analyzer) -> Expr | None:
    """Merge constants of nested min/max of one kind."""
    # max(max(x, 2), 5) -> max(x, 5);  min(min(x, 2), 5) -> min(x, 2)
    if not (isinstance(node, Binary) and node.op in (Op.MIN, Op.MAX)
            and isinstance(node.b, Const) and not node.dtype.is_float):
        return None
    inner = node.a
    if isinstance(inner, Binary) and inner.op is node.op and isinstance(inner.b, Const):
        return fold.binary(node.op, inner.a, fold.binary(node.op, inner.b, node.b))
    return None


# --------------------------------------------------------------------------------------
# compare: normalization and decisions
# --------------------------------------------------------------------------------------

def compare_linear(node: Expr, an: Analyzer) -> Expr | None:
    """Normalize an int32/int64 comparison, or decide it by bounds."""
    # i + 3 < j + 5 -> i < j + 2;  i*2 < 6 -> i < 3;  i <= 5 -> i < 6;  j > i -> i < j
    # i >= j + 1 -> i > j;  i < j + 1 -> i <= j
    # i < 10 -> True (i in [0, 9]);  i*2 == 3 -> False;  i // 4 < 3 -> i < 12
    if not (isinstance(node, Compare) and is_index(node.a)):
        return None
    con = an.compare_constraint(node)
    if isinstance(con, bool):
        return Const(con, boolean)
    out = _floordiv_constraint(con, an)
    if out is None and an.compare_matches(node, con):
        return None
    if out is None:
        if con.kind == "ne":
            out = an.build_compare(con.part, Op.NE, int(con.lo))
        elif con.lo == con.hi:
            out = an.build_compare(con.part, Op.EQ, int(con.lo))
        else:
            out = an.build_bound(con.part, con.lo, con.hi)
    return None if out is None or out is node else out


def _floordiv_constraint(con: Constraint, an: Analyzer) -> Expr | None:
    """``x // c < k -> x < k*c`` and ``x // c >= k -> x >= k*c`` for c > 0."""
    one = con.part.single()
    if one is None or con.kind != "range" or (con.lo != -INF and con.hi != INF):
        return None
    atom, coef = one
    if not (coef == 1 and isinstance(atom, Binary) and atom.op is Op.FLOORDIV):
        return None
    c = const_int(atom.b)
    if c is None or c <= 0:
        return None
    dtype = atom.dtype
    if con.hi == INF:  # x // c >= lo  <=>  x >= lo*c
        bound = int(con.lo) * c
        return fold.compare(Op.GE, atom.a, Const(bound, dtype)) if fits(bound, dtype) else None
    bound = (int(con.hi) + 1) * c  # x // c <= hi  <=>  x < (hi + 1)*c
    return fold.compare(Op.LT, atom.a, Const(bound, dtype)) if fits(bound, dtype) else None


@for_ops(Op.EQ, Op.NE)
def compare_bool(node: Expr, an: Analyzer) -> Expr | None:
    """Comparisons of a bool with a constant."""
    # b == True -> b;  b == False -> !b;  b != False -> b;  b != True -> !b
    if not (isinstance(node, Compare) and node.a.dtype.is_bool and isinstance(node.b, Const)
            and node.op in (Op.EQ, Op.NE)):
        return None
    keep = bool(node.b.value) == (node.op is Op.EQ)
    return node.a if keep else fold.logical_not(node.a)


