"""Fast local rewrite rules for integer index arithmetic and boolean conditions.

Each rule is a small function ``(node, analyzer) -> Expr | None`` with a ``before -> after``
comment; rules are grouped by family in ``FAMILIES`` (import-time constant tables keyed by
node type) and bound to one ``Analyzer`` as named ``RuleSet``s (``rule_sets``), or all
families merged in order (``ruleset``) for ``tex.ir.visit.fixed_point_rewrite``.

The core is the *linear form*. An index expression of dtype int32/int64 is read as

    c_1*t_1 + ... + c_n*t_n + k        (integer c_i != 0, integer k)

over *atoms* t_i: every sub-term that is not ``+ - *const`` (variables, products of
non-constants, ``//``, ``%``, min/max, select, casts, tensor reads). Atoms are kept in a
deterministic order (``Analyzer.key``: a structural key, variables by name; never by id)
and rebuilt (as the ``tex.ir.fold`` builders would build it): positive terms first, then
the negative ones subtracted, the constant last (``i*4 + j - k*2 + 3``). Coefficients are
exact integers, wrapped modulo 2**bits only when written back, so the canonical form is
exact in two's-complement arithmetic and comparisons see the mathematical values.

Invariants the rules rely on:

- Integer index arithmetic (int32/int64) does not overflow (as in TVM). Narrower integer
  dtypes only get the exact rules of ``tex.ir.fold`` and bounds that are single points.
- Every rule is exact under the semantics of ``tex.ir.semantics``: ``//`` and ``%`` round
  toward minus infinity, integer ``/`` truncates. Float expressions only get exact rules:
  constant folding and what the builders do (no reassociation, no ``x - x -> 0``).
- Comparisons are normalized to ``P op N + c`` where ``P - N`` is the linear part divided
  by its gcd with its first atom positive; inequalities use ``<`` for upper and ``>=`` for
  lower bounds (``i <= 5 -> i < 6``, ``i > 3 -> i >= 4``) except that a zero constant is
  preferred (``i <= j``, ``i > j``). Equal conditions thus print equally, and ``&&``/``||``
  chains merge the ranges of a shared linear part and run Fourier-Motzkin across parts.
- An ``Analyzer`` carries the variable domains and per-call memos (bounds, linear forms,
  sort keys) keyed by interned nodes; it is built for one simplification and dropped.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..dtype import DType, boolean
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
from ..ir.visit import RuleSet, fixed_point_rewrite, post_order
from .bounds import Bounds, DomainLike, Interval, evaluate_bottom_up

__all__ = ["Analyzer", "LinearForm", "Constraint", "FAMILIES", "rule_sets", "ruleset",
           "is_index_dtype", "chain_operands", "AS_LE"]

Rule = Callable[[Expr, "Analyzer"], "Expr | None"]

_INF = math.inf


def is_index_dtype(dtype: DType) -> bool:
    """Whether the linear rules apply: signed integers of 32 or 64 bits."""
    return dtype.kind == "int" and dtype.bits >= 32


def _wrap(value: int, bits: int) -> int:
    """``value`` reduced to the signed range of ``bits`` bits (two's complement)."""
    half = 1 << (bits - 1)
    return ((value + half) % (half << 1)) - half


# integer comparison -> (sign, c0): ``a op b`` holds iff ``sign * (a - b) <= c0`` (the
# table guards and loop partitioning use to read comparisons as linear facts)
AS_LE = {Op.LT: (1, -1), Op.LE: (1, 0), Op.GT: (-1, -1), Op.GE: (-1, 0)}


# --------------------------------------------------------------------------------------
# Linear forms
# --------------------------------------------------------------------------------------

class LinearForm:
    """``sum(coef * atom) + const`` over one integer dtype; immutable once built.

    ``terms`` maps atoms to non-zero coefficients in insertion order (the order is only
    used to break ties between atoms with equal sort keys).
    """

    __slots__ = ("terms", "const", "dtype")
    terms: dict[Expr, int]
    const: int
    dtype: DType

    def __init__(self, terms: dict[Expr, int], const: int, dtype: DType) -> None:
        # exact integers: comparisons and bounds need the mathematical values; rebuild
        # wraps them into the dtype (two's complement) when it writes the expression
        self.terms = {t: c for t, c in terms.items() if c != 0}
        self.const = const
        self.dtype = dtype

    @staticmethod
    def constant(value: int, dtype: DType) -> LinearForm:
        return LinearForm({}, value, dtype)

    @staticmethod
    def atom(e: Expr, coef: int = 1) -> LinearForm:
        return LinearForm({e: coef}, 0, e.dtype)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def single(self) -> tuple[Expr, int] | None:
        """``(atom, coef)`` when the form is one term without constant."""
        if len(self.terms) == 1 and self.const == 0:
            return next(iter(self.terms.items()))
        return None

    def add(self, other: LinearForm) -> LinearForm:
        terms = dict(self.terms)
        for t, c in other.terms.items():
            terms[t] = terms.get(t, 0) + c
        return LinearForm(terms, self.const + other.const, self.dtype)

    def sub(self, other: LinearForm) -> LinearForm:
        return self.add(other.scale(-1))

    def scale(self, k: int) -> LinearForm:
        return LinearForm({t: c * k for t, c in self.terms.items()}, self.const * k, self.dtype)

    def with_const(self, const: int) -> LinearForm:
        return LinearForm(self.terms, const, self.dtype)

    def __repr__(self) -> str:
        parts = [f"{c}*{t}" for t, c in self.terms.items()]
        return f"LinearForm({' + '.join(parts + [str(self.const)])})"


@dataclass(frozen=True, slots=True)
class Constraint:
    """A normalized integer comparison: ``part`` lies in ``[lo, hi]`` (kind "range",
    ±inf for an open side), or ``part != lo`` (kind "ne"). ``part`` has no constant, a gcd
    of 1 and a positive first atom; ``key`` identifies it across comparisons."""

    part: LinearForm
    key: tuple
    kind: str
    lo: int | float
    hi: int | float


_SWAP = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE, Op.EQ: Op.EQ, Op.NE: Op.NE}
_LINEAR_OPS = frozenset({Op.ADD, Op.SUB, Op.MUL})


def _is_linear_node(e: Expr) -> bool:
    """Nodes the linear form looks through (the rest are atoms)."""
    if isinstance(e, Binary):
        return e.op in _LINEAR_OPS
    if isinstance(e, Unary):
        return e.op is Op.NEG
    return isinstance(e, Const)


def _key_inputs(e: Expr) -> tuple[Expr, ...]:
    return e.children()


# --------------------------------------------------------------------------------------
# The analyzer: domain + memos for one simplification
# --------------------------------------------------------------------------------------

class Analyzer:
    """Variable domains and per-call memos (bounds, linear forms, sort keys).

    Parameters
    ----------
    dom : mapping or list, optional
        Variable domains, as for ``tex.arith.bounds``.
    """

    def __init__(self, dom: DomainLike = None) -> None:
        self.bounds = Bounds(dom)
        self.dom = self.bounds.dom
        self._linear: dict[Expr, LinearForm] = {}
        self._keys: dict[Expr, tuple] = {}
        self._canonical: set[Expr] = set()  # outputs of rebuild (and their prefixes)
        self._constraints: dict[Expr, Constraint | bool] = {}
        self._consts: dict[tuple[int, DType], Const] = {}
        self._ruleset: RuleSet | None = None

    # -- rewriting ------------------------------------------------------------------------
    @property
    def rules(self) -> RuleSet:
        """All rule families bound to this analyzer (built once)."""
        if self._ruleset is None:
            self._ruleset = ruleset(self)
        return self._ruleset

    def rewrite(self, expr: Expr, memo: dict[Expr, Expr] | None = None) -> Expr:
        """``expr`` with the rules applied bottom-up to a fixed point (``memo``: results
        shared between calls, see ``fixed_point_rewrite``)."""
        return fixed_point_rewrite(expr, self.rules, memo=memo)

    # -- sort keys ------------------------------------------------------------------------
    def key(self, e: Expr) -> tuple:
        """A deterministic structural sort key (variables first, by name)."""
        hit = self._keys.get(e)
        if hit is not None:
            return hit
        return evaluate_bottom_up(e, self._keys, _key_inputs, self._compute_key)

    def _compute_key(self, e: Expr) -> tuple:
        keys = self._keys
        match e:
            case Var(name):
                return (0, name)
            case TensorRead(tensor, indices):
                return (1, tensor.name, *(keys[i] for i in indices))
            case Const(value, dtype):
                return (2, dtype.name, value)
            case Unary(op, a):
                return (3, op.value, keys[a])
            case Binary(op, a, b) | Compare(op, a, b):
                return (3, op.value, keys[a], keys[b])
            case Select(c, a, b):
                return (4, "select", keys[c], keys[a], keys[b])
            case Cast(dtype, a):
                return (5, dtype.name, keys[a])
            case Reduce():
                return (6, e.combiner.name, *(keys[c] for c in e.children()))
        return (7, type(e).__name__)

    # -- linear forms ---------------------------------------------------------------------
    def linear(self, e: Expr) -> LinearForm:
        """The linear form of an int32/int64 expression whose children are canonical."""
        hit = self._linear.get(e)
        if hit is not None:
            return hit
        return evaluate_bottom_up(e, self._linear, _linear_inputs, self._compute_linear)

    def try_linear(self, e: Expr) -> LinearForm | None:
        """``linear(e)``, or None when ``e`` is not an integer or bool expression: a float
        has no linear form over the integers (``linear`` would truncate its constants, or
        raise on an infinite one). Other errors are bugs and propagate."""
        return self.linear(e) if e.dtype.is_integral else None

    def try_bounds(self, e: Expr) -> Interval | None:
        """``bounds(e)``, or None when ``e`` is not an integer or bool expression (the only
        ones with interval bounds; ``bounds`` raises TypeError on the others). Other
        errors are bugs and propagate."""
        return self.bounds(e) if e.dtype.is_integral else None

    def _compute_linear(self, e: Expr) -> LinearForm:
        memo = self._linear
        match e:
            case Const(value):
                return LinearForm.constant(int(value), e.dtype)
            case Unary(Op.NEG, a):
                return memo[a].scale(-1)
            case Binary(Op.ADD, a, b):
                return memo[a].add(memo[b])
            case Binary(Op.SUB, a, b):
                return memo[a].sub(memo[b])
            case Binary(Op.MUL, a, b):
                la, lb = memo[a], memo[b]
                if la.is_const:
                    return lb.scale(la.const)
                if lb.is_const:
                    return la.scale(lb.const)
                # a product of non-constants is an atom; pull out constant coefficients
                # and order the factors so that i*j and j*i are one atom: (i*2)*j -> (i*j)*2
                fa, ca = la.single() or self._primitive(la)
                fb, cb = lb.single() or self._primitive(lb)
                if self.key(fb) < self.key(fa):
                    fa, fb = fb, fa
                return LinearForm.atom(fold.binary(Op.MUL, fa, fb), ca * cb)
        return LinearForm.atom(e)

    def _primitive(self, lf: LinearForm) -> tuple[Expr, int]:
        """``(p, g)`` with ``lf == g*p``: g the gcd of the coefficients and the constant,
        signed so that p's first term is positive: ``i*-4 - k*4 -> (i + k, -4)``."""
        g = lf.const
        for c in lf.terms.values():
            g = math.gcd(g, c)
        first = min(lf.terms, key=self.key)
        if lf.terms[first] < 0:
            g = -g
        if g == 1:
            return self.rebuild(lf), 1
        return self.rebuild(_div_exact(lf, g)), g

    def affine_range(self, e: Expr, ranging: Mapping[Var, int]) -> tuple[Expr, int] | None:
        """``(lo, extent)`` of the integer ``e`` as each variable of ``ranging`` takes the
        values ``[0, n)``: ``lo`` uses the other variables (fixed); None when ``e`` is not
        affine in the ranging variables."""
        if not e.dtype.is_int:
            return None
        lf = self.linear(self.rewrite(e))
        lo_terms: dict[Expr, int] = {}
        low, span = 0, 0
        for atom, c in lf.terms.items():
            if isinstance(atom, Var) and atom in ranging:
                reach = c * (ranging[atom] - 1)
                low += min(reach, 0)
                span += abs(reach)
                continue
            if any(isinstance(n, Var) and n in ranging for n in post_order(atom)):
                return None
            lo_terms[atom] = c
        base = type(lf)(lo_terms, lf.const + low, lf.dtype)
        return self.rebuild(base), span + 1

    @staticmethod
    def union_range(ranges: Sequence[tuple[Expr, int] | None]) -> tuple[Expr, int] | None:
        """The smallest range holding all ``(lo, extent)`` ranges whose lows differ by
        constants; None when that cannot be shown (or a range is None)."""
        if not ranges or any(r is None for r in ranges):
            return None
        an = Analyzer()
        lo0, _ = ranges[0]  # type: ignore[misc]
        shifts: list[tuple[int, int]] = []
        for r in ranges:
            assert r is not None
            diff = an.rewrite(r[0] - lo0)
            if not isinstance(diff, Const):
                return None
            shifts.append((int(diff.value), r[1]))
        low = min(s for s, _ in shifts)
        high = max(s + n for s, n in shifts)
        lo = an.rewrite(lo0 + low) if low else lo0
        return lo, high - low

    def rebuild(self, lf: LinearForm) -> Expr:
        """The canonical expression of a linear form (see the module docstring).

        Built with the raw constructors: none of the ``tex.ir.fold`` rules applies to a
        canonical form (no constant operand but the last, no ``x*c1*c2``, no ``0 - x``),
        which the tests check. Every prefix built on the way is canonical too and is
        remembered, so the rules do not rebuild it again.
        """
        dtype = lf.dtype
        lf = _wrapped(lf)
        items = sorted(lf.terms.items(), key=lambda tc: self.key(tc[0]))
        canonical = self._canonical
        acc: Expr | None = None
        for atom, c in items:
            if c > 0:
                term = atom if c == 1 else Binary(Op.MUL, atom, self.const(c, dtype))
                acc = term if acc is None else Binary(Op.ADD, acc, term)
                canonical.add(acc)
        for atom, c in items:
            if c < 0:
                if acc is None and c == -1:
                    acc = Unary(Op.NEG, atom)
                elif acc is None:
                    acc = Binary(Op.MUL, atom, self.const(c, dtype))
                elif c == -1:
                    acc = Binary(Op.SUB, acc, atom)
                elif _fits(-c, dtype):
                    acc = Binary(Op.SUB, acc, Binary(Op.MUL, atom, self.const(-c, dtype)))
                else:  # -c does not fit (c is the minimum value): add the negative term
                    acc = Binary(Op.ADD, acc, Binary(Op.MUL, atom, self.const(c, dtype)))
                canonical.add(acc)
        k = lf.const
        if acc is None:
            return self.const(k, dtype)
        if k > 0:
            acc = Binary(Op.ADD, acc, self.const(k, dtype))
        elif k < 0:
            if _fits(-k, dtype):
                acc = Binary(Op.SUB, acc, self.const(-k, dtype))
            else:
                acc = Binary(Op.ADD, acc, self.const(k, dtype))
        canonical.add(acc)
        return acc

    def const(self, value: int, dtype: DType) -> Const:
        """``Const(value, dtype)``, cached (the constructor re-checks the range each time)."""
        c = self._consts.get((value, dtype))
        if c is None:
            c = self._consts[(value, dtype)] = Const(value, dtype)
        return c

    def is_canonical(self, e: Expr) -> bool:
        """Whether ``e`` is known to be the canonical form of its linear form."""
        return e in self._canonical

    def matches(self, e: Expr, lf: LinearForm) -> bool:
        """Whether ``e`` already is ``rebuild(lf)``, checked without building nodes."""
        lf = _wrapped(lf)
        items = sorted(lf.terms.items(), key=lambda tc: self.key(tc[0]))
        seq = [(a, c) for a, c in items if c > 0] + [(a, c) for a, c in items if c < 0]
        k = lf.const
        if k:
            seq.append((None, k))
        if not seq:
            return isinstance(e, Const) and e.value == 0
        dtype = lf.dtype
        for n in range(len(seq) - 1, 0, -1):  # walk the left spine from the last term
            atom, c = seq[n]
            if not isinstance(e, Binary):
                return False
            # mirror rebuild: positive parts are added, negative ones subtracted when
            # their magnitude fits the dtype (else added as they are)
            sub = c < 0 and _fits(-c, dtype)
            if e.op is not (Op.SUB if sub else Op.ADD):
                return False
            want = -c if sub else c
            if not (_is_const(e.b, want) if atom is None else _is_term(e.b, atom, want)):
                return False
            e = e.a
        atom, c = seq[0]
        if atom is None:
            return _is_const(e, c)
        if c == -1:
            return isinstance(e, Unary) and e.op is Op.NEG and e.a is atom
        return _is_term(e, atom, c)

    def linear_bounds(self, lf: LinearForm) -> Interval:
        """Bounds of a linear form: the sum of ``coef * bounds(atom)``, plus the constant."""
        lo: int | float = lf.const
        hi: int | float = lf.const
        for atom, c in lf.terms.items():
            b = self.bounds(atom)
            blo = -_INF if b.lo is None else b.lo
            bhi = _INF if b.hi is None else b.hi
            if c > 0:
                lo, hi = lo + c * blo, hi + c * bhi
            else:
                lo, hi = lo + c * bhi, hi + c * blo
        return Interval._ext(lo, hi)

    def fuse_divmod(self, lf: LinearForm) -> LinearForm:
        """Recombine quotient and remainder terms of one division.

        ``(x // c)*c + x % c -> x`` and ``x - (x // c)*c -> x % c`` (times any coefficient).
        """
        divs = {(t.a, t.b.value): t for t in lf.terms
                if isinstance(t, Binary) and t.op is Op.FLOORDIV and isinstance(t.b, Const)}
        if not divs:
            return lf
        for m in list(lf.terms):
            if not (isinstance(m, Binary) and m.op is Op.FLOORMOD and isinstance(m.b, Const)):
                continue
            d = divs.get((m.a, m.b.value))
            a = lf.terms.get(m)
            if d is None or a is None or lf.terms.get(d) != a * m.b.value:
                continue
            # a*c*(x // c) + a*(x % c) == a*x
            lf = lf.sub(LinearForm({m: a, d: a * m.b.value}, 0, lf.dtype))
            lf = lf.add(self.linear(m.a).scale(a))
        for (x, c), d in divs.items():
            k = lf.terms.get(d)
            if k is None or c == 0 or k % c:
                continue
            a = -k // c
            lx = self.linear(x).scale(a)
            if not lx.terms or any(lf.terms.get(t) != w for t, w in lx.terms.items()):
                continue
            # a*x - a*c*(x // c) == a*(x % c)
            mod = fold.binary(Op.FLOORMOD, x, Const(c, lf.dtype))
            # x's constant is part of a*x too: a*terms(x) == a*x - a*const(x)
            lf = lf.sub(lx).sub(LinearForm({d: k}, 0, lf.dtype))
            lf = lf.add(LinearForm.atom(mod, a))
        return lf

    # -- comparisons ----------------------------------------------------------------------
    def compare_constraint(self, cmp: Compare) -> Constraint | bool:
        """``constraint`` of a comparison node, memoized."""
        hit = self._constraints.get(cmp)
        if hit is None:
            hit = self._constraints[cmp] = self.constraint(cmp.op, cmp.a, cmp.b)
        return hit

    def constraint(self, op: Op, a: Expr, b: Expr) -> Constraint | bool:
        """``a op b`` on int32/int64 operands as a ``Constraint`` on a normalized linear
        part, or a bool when the comparison is decided (by constants or by bounds)."""
        d = self.linear(a).sub(self.linear(b))
        if d.is_const:
            return _decide_const(op, d.const)
        items = sorted(d.terms.items(), key=lambda tc: self.key(tc[0]))
        if items[0][1] < 0:  # orient: first atom positive (j < i  ->  i > j)
            d, op = d.scale(-1), _SWAP[op]
            items = [(t, -c) for t, c in items]
        g = 0
        for _, c in items:
            g = math.gcd(g, c)
        k = d.const
        part = LinearForm({t: c // g for t, c in items}, 0, d.dtype)
        # part*g + k op 0, solved for part (integer rounding)
        if op is Op.LT:
            lo, hi = -_INF, (-k - 1) // g
        elif op is Op.LE:
            lo, hi = -_INF, (-k) // g
        elif op is Op.GT:
            lo, hi = -((k - 1) // g), _INF
        elif op is Op.GE:
            lo, hi = -(k // g), _INF
        elif k % g:  # part*g == -k has no integer solution
            return op is Op.NE
        else:
            lo = hi = -k // g
        kind = "ne" if op is Op.NE else "range"
        key = tuple((t, c) for t, c in part.terms.items())
        con = Constraint(part, key, kind, lo, hi)
        decided = self.decide(con)
        return con if decided is None else decided

    def decide(self, con: Constraint) -> bool | None:
        """Whether the bounds of the linear part decide the constraint."""
        b = self.linear_bounds(con.part)
        blo = -_INF if b.lo is None else b.lo
        bhi = _INF if b.hi is None else b.hi
        if con.kind == "ne":
            if b.is_point and blo == con.lo:
                return False
            return True if not blo <= con.lo <= bhi else None
        if con.lo <= blo and bhi <= con.hi:
            return True
        if bhi < con.lo or con.hi < blo:
            return False
        return None

    def compare_matches(self, cmp: Compare, con: Constraint) -> bool:
        """Whether ``cmp`` already is what ``compare_linear`` builds for ``con``."""
        if con.kind == "ne":
            op, value = Op.NE, con.lo
        elif con.lo == con.hi:
            op, value = Op.EQ, con.lo
        elif con.hi == _INF:
            op, value = (Op.GT, 0) if con.lo == 1 else (Op.GE, con.lo)
        elif con.hi == 0:
            op, value = Op.LE, 0
        else:
            op, value = Op.LT, con.hi + 1
        if cmp.op is not op or not _fits(int(value), con.part.dtype):
            return False
        part = con.part
        pos = LinearForm({t: c for t, c in part.terms.items() if c > 0}, 0, part.dtype)
        neg = LinearForm({t: -c for t, c in part.terms.items() if c < 0}, int(value),
                         part.dtype)
        return self.matches(cmp.a, pos) and self.matches(cmp.b, neg)

    def build_compare(self, part: LinearForm, op: Op, value: int) -> Expr | None:
        """``part op value`` printed as ``P op N + value`` (P: positive terms); None when
        ``value`` does not fit the dtype."""
        if not _fits(value, part.dtype):
            return None
        pos = LinearForm({t: c for t, c in part.terms.items() if c > 0}, 0, part.dtype)
        neg = LinearForm({t: -c for t, c in part.terms.items() if c < 0}, value, part.dtype)
        return fold.compare(op, self.rebuild(pos), self.rebuild(neg))

    def build_bound(self, part: LinearForm, lo: int | float, hi: int | float) -> Expr | None:
        """``part >= lo`` (hi infinite) or ``part <= hi`` (lo infinite), choosing between
        ``<``/``<=`` and ``>``/``>=`` so that the constant is 0 where one of them allows
        it: ``i - j <= 0 -> i <= j``, ``i - j >= 1 -> i > j``, else ``i < 6``, ``i >= 2``
        (or the other operator where the constant would not fit the dtype)."""
        if hi == _INF:
            lo = int(lo)
            if lo == 1:
                return self.build_compare(part, Op.GT, 0)
            out = self.build_compare(part, Op.GE, lo)
            return out if out is not None else self.build_compare(part, Op.GT, lo - 1)
        hi = int(hi)
        if hi == 0:
            return self.build_compare(part, Op.LE, 0)
        out = self.build_compare(part, Op.LT, hi + 1)
        return out if out is not None else self.build_compare(part, Op.LE, hi)

    def emit_range(self, con: Constraint, lo: int | float,
                   hi: int | float) -> list[Expr] | None:
        """Comparisons stating ``lo <= part <= hi``, omitting sides the bounds imply; None
        when a constant does not fit the dtype."""
        b = self.linear_bounds(con.part)
        blo = -_INF if b.lo is None else b.lo
        bhi = _INF if b.hi is None else b.hi
        lo, hi = max(lo, blo), min(hi, bhi)
        parts: list[Expr | None] = []
        if lo == hi:
            if blo != bhi:
                parts.append(self.build_compare(con.part, Op.EQ, int(lo)))
        else:
            if lo > blo:
                parts.append(self.build_bound(con.part, lo, _INF))
            if hi < bhi:
                parts.append(self.build_bound(con.part, -_INF, hi))
        if any(p is None for p in parts):
            return None
        return parts  # type: ignore[return-value]


def _linear_inputs(e: Expr) -> tuple[Expr, ...]:
    return e.children() if _is_linear_node(e) else ()


def _is_const(e: Expr, value: int) -> bool:
    return isinstance(e, Const) and e.value == value


def _is_term(e: Expr, atom: Expr, c: int) -> bool:
    """Whether ``e`` is the term ``atom * c`` as ``rebuild`` writes it."""
    if c == 1:
        return e is atom
    return isinstance(e, Binary) and e.op is Op.MUL and e.a is atom and _is_const(e.b, c)


def _wrapped(lf: LinearForm) -> LinearForm:
    """``lf`` with coefficients and constant reduced into the dtype (two's complement)."""
    bits = lf.dtype.bits
    terms = {t: _wrap(c, bits) for t, c in lf.terms.items()}
    const = _wrap(lf.const, bits)
    if const == lf.const and all(terms[t] == c for t, c in lf.terms.items()):
        return lf
    return LinearForm(terms, const, lf.dtype)


def _fits(value: int, dtype: DType) -> bool:
    return _wrap(value, dtype.bits) == value


def _decide_const(op: Op, v: int) -> bool:
    """``v op 0`` for an integer v."""
    return {Op.LT: v < 0, Op.LE: v <= 0, Op.GT: v > 0, Op.GE: v >= 0,
            Op.EQ: v == 0, Op.NE: v != 0}[op]


def _is_index(e: Expr) -> bool:
    return is_index_dtype(e.dtype)


def _const_int(e: Expr) -> int | None:
    return int(e.value) if isinstance(e, Const) and e.dtype.is_int else None


def _ops(*ops: Op) -> Callable[[Rule], Rule]:
    """Declare the operators a rule looks at, so the merged rule set only offers it nodes
    with those operators (rules stay correct when offered others: they check again)."""
    def mark(rule: Rule) -> Rule:
        rule.ops = frozenset(ops)  # type: ignore[attr-defined]
        return rule
    return mark


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
                                     node.op in _LINEAR_OPS and _is_index(node)):
        return None
    if isinstance(node, Compare) and _is_index(node.a):
        return None
    iv = an.bounds(node)
    return Const(iv.lo, node.dtype) if iv.is_point else None


# --------------------------------------------------------------------------------------
# linear: canonical linear form of int32/int64 sums
# --------------------------------------------------------------------------------------

@_ops(Op.ADD, Op.SUB, Op.MUL, Op.NEG)
def canonical_linear(node: Expr, an: Analyzer) -> Expr | None:
    """Collect like terms, fold constants rightmost, distribute constant factors."""
    # (i + 1) - i -> 1;  i*2 + i -> i*3;  (i + j) - (j + i) -> 0;  (i + 1)*4 -> i*4 + 4
    # (i // 4)*4 + i % 4 -> i;  i - (i // 4)*4 -> i % 4
    if not _is_index(node) or not _is_linear_node(node) or isinstance(node, Const) \
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


@_ops(Op.FLOORDIV)
def floordiv_const(node: Expr, an: Analyzer) -> Expr | None:
    """Simplify ``x // c`` for a non-zero constant c."""
    if not (isinstance(node, Binary) and node.op is Op.FLOORDIV and _is_index(node)):
        return None
    c = _const_int(node.b)
    if not c:
        return None
    x, dtype = node.a, node.dtype
    if c == -1:  # x // -1 -> -x
        return an.rebuild(an.linear(x).scale(-1))
    # (x // c1) // c2 -> x // (c1*c2)  for c2 > 0 (floor(floor(y) / n) == floor(y / n))
    if c > 0 and isinstance(x, Binary) and x.op is Op.FLOORDIV:
        c1 = _const_int(x.b)
        if c1 and _fits(c1 * c, dtype):
            return fold.binary(Op.FLOORDIV, x.a, Const(c1 * c, dtype))
    lf = an.linear(x)
    # (y // c1 + m) // c -> (y + m*c1) // (c1*c)  for c > 0: floor(y/c1) + m == floor((y +
    # m*c1)/c1), then the nested rule above
    one = lf.with_const(0).single()
    if c > 0 and one is not None and one[1] == 1 and isinstance(one[0], Binary) \
            and one[0].op is Op.FLOORDIV:
        c1 = _const_int(one[0].b)
        if c1 and _fits(c1 * c, dtype) and _fits(lf.const * c1, dtype):
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
    # (i*4 + 2) // 8 -> (i*2 + 1) // 4: divide through by a common factor
    g = abs(c)
    for a in lf.terms.values():
        g = math.gcd(g, a)
    g = math.gcd(g, lf.const)
    if g > 1:
        return fold.binary(Op.FLOORDIV, an.rebuild(_div_exact(lf, g)), Const(c // g, dtype))
    return None


def _div_exact(lf: LinearForm, g: int) -> LinearForm:
    return LinearForm({t: a // g for t, a in lf.terms.items()}, lf.const // g, lf.dtype)


@_ops(Op.FLOORMOD)
def floormod_const(node: Expr, an: Analyzer) -> Expr | None:
    """Simplify ``x % c`` for a non-zero constant c."""
    if not (isinstance(node, Binary) and node.op is Op.FLOORMOD and _is_index(node)):
        return None
    c = _const_int(node.b)
    if not c:
        return None
    if c in (1, -1):  # x % 1 -> 0
        return Const(0, node.dtype)
    lf = an.linear(node.a)
    changed = False
    # (y % c1 + j) % c -> (y + j) % c  when c divides c1: y % c1 and y differ by a multiple
    for t in list(lf.terms):
        if isinstance(t, Binary) and t.op is Op.FLOORMOD:
            c1 = _const_int(t.b)
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
    if changed:
        return fold.binary(Op.FLOORMOD, an.rebuild(r), Const(c, node.dtype))
    return None


@_ops(Op.DIV)
def truncdiv_const(node: Expr, an: Analyzer) -> Expr | None:
    """``x / c`` (truncating) by a constant: the floordiv rules where x, c >= 0."""
    if not (isinstance(node, Binary) and node.op is Op.DIV and _is_index(node)):
        return None
    c = _const_int(node.b)
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


@_ops(Op.FLOORMOD)
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

@_ops(Op.MIN, Op.MAX)
def minmax_by_bounds(node: Expr, an: Analyzer) -> Expr | None:
    """Decide ``min``/``max`` when one operand is never smaller than the other."""
    # max(i, i + 1) -> i + 1;  min(i, 0) -> 0  (i >= 0);  max(i*2, i*2 + j) -> i*2 + j
    if not (isinstance(node, Binary) and node.op in (Op.MIN, Op.MAX)
            and node.dtype.is_integral):
        return None
    a, b = node.a, node.b
    if _is_index(node):
        diff = an.linear_bounds(an.linear(a).sub(an.linear(b)))
    else:
        diff = an.bounds(a).sub(an.bounds(b))
    if diff.lo is not None and diff.lo >= 0:  # a >= b
        return a if node.op is Op.MAX else b
    if diff.hi is not None and diff.hi <= 0:  # a <= b
        return b if node.op is Op.MAX else a
    return None


@_ops(Op.MIN, Op.MAX)
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
    if not (isinstance(node, Compare) and _is_index(node.a)):
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
    if one is None or con.kind != "range" or (con.lo != -_INF and con.hi != _INF):
        return None
    atom, coef = one
    if not (coef == 1 and isinstance(atom, Binary) and atom.op is Op.FLOORDIV):
        return None
    c = _const_int(atom.b)
    if c is None or c <= 0:
        return None
    dtype = atom.dtype
    if con.hi == _INF:  # x // c >= lo  <=>  x >= lo*c
        bound = int(con.lo) * c
        return fold.compare(Op.GE, atom.a, Const(bound, dtype)) if _fits(bound, dtype) else None
    bound = (int(con.hi) + 1) * c  # x // c <= hi  <=>  x < (hi + 1)*c
    return fold.compare(Op.LT, atom.a, Const(bound, dtype)) if _fits(bound, dtype) else None


@_ops(Op.EQ, Op.NE)
def compare_bool(node: Expr, an: Analyzer) -> Expr | None:
    """Comparisons of a bool with a constant."""
    # b == True -> b;  b == False -> !b;  b != False -> b;  b != True -> !b
    if not (isinstance(node, Compare) and node.a.dtype.is_bool and isinstance(node.b, Const)
            and node.op in (Op.EQ, Op.NE)):
        return None
    keep = bool(node.b.value) == (node.op is Op.EQ)
    return node.a if keep else fold.logical_not(node.a)


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


@_ops(Op.AND, Op.OR)
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
        if isinstance(e, Compare) and _is_index(e.a):
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
    return (-_INF if b.lo is None else b.lo, _INF if b.hi is None else b.hi)


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
        elif len(spans) == 1 and (spans[0][0] == -_INF or spans[0][1] == _INF):
            lo, hi = ((spans[0][1] + 1, _INF) if spans[0][0] == -_INF
                      else (-_INF, spans[0][0] - 1))  # the complement of a ray
        else:
            return False  # a complement that is not convex: no conclusion
        if hi != _INF:
            rows.append((dict(part.terms), int(hi)))
        if lo != -_INF:
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


@_ops(Op.NOT)
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


# --------------------------------------------------------------------------------------
# The tables
# --------------------------------------------------------------------------------------

FAMILIES: dict[str, dict[type, tuple[Rule, ...]]] = {
    "fold": {Binary: (refold,), Unary: (refold,), Compare: (refold,), Select: (refold,),
             Cast: (refold,)},
    "bounds": {t: (bounds_point,) for t in (Binary, Unary, Compare, Select, Cast, Var)},
    "linear": {Binary: (canonical_linear,), Unary: (canonical_linear,)},
    "divmod": {Binary: (floordiv_const, floormod_const, truncdiv_const, divmod_by_bounds)},
    "minmax": {Binary: (minmax_by_bounds, minmax_consts)},
    "compare": {Compare: (compare_linear, compare_bool)},
    "logic": {Binary: (and_or,), Unary: (not_chain,)},
    "select": {Select: (select_bool, select_nested)},
}


def _bind(rules: Iterable[Rule], an: Analyzer) -> list[Callable[[Expr], Expr | None]]:
    return [functools.partial(r, an=an) for r in rules]


def rule_sets(an: Analyzer) -> dict[str, RuleSet]:
    """Each rule family as a named ``RuleSet`` bound to ``an``."""
    return {name: RuleSet(name, {t: _bind(rs, an) for t, rs in table.items()})
            for name, table in FAMILIES.items()}


# all families merged per node type and operator, in FAMILIES order (import-time constant)
_MERGED: dict[type, tuple[Rule, ...]] = {}
for _table in FAMILIES.values():
    for _t, _rs in _table.items():
        _MERGED[_t] = _MERGED.get(_t, ()) + tuple(_rs)
_BY_OP: dict[tuple[type, Op | None], tuple[Rule, ...]] = {}
for _t, _rs in _MERGED.items():
    for _op in (*Op, None):
        _BY_OP[(_t, _op)] = tuple(r for r in _rs if getattr(r, "ops", None) is None
                                  or _op in r.ops)  # type: ignore[attr-defined]
del _table, _t, _rs, _op


def ruleset(an: Analyzer) -> RuleSet:
    """All families merged (in ``FAMILIES`` order) into one ``RuleSet`` bound to ``an``:
    one closure per node type trying the rules for the node's operator in order."""

    def bind(t: type) -> Callable[[Expr], Expr | None]:
        def apply(node: Expr) -> Expr | None:
            for rule in _BY_OP[(t, getattr(node, "op", None))]:
                out = rule(node, an)
                if out is not None and out is not node:
                    return out
            return None
        return apply

    return RuleSet("arith", {t: (bind(t),) for t in _MERGED})
