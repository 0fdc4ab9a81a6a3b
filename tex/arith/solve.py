"""Integer domains defined by linear equations and inequalities.

``solve_domain`` answers: over which points ``x`` (the *unknowns*, each in its range) do
the equations and conditions hold, as a function of the *parameters*? It returns a
substitution that expresses every unknown through fewer, fresh summation variables, the
ranges of those variables (as tight as the inequalities allow), and the conditions left
(split into those that mention the new variables and those that only mention parameters).

This is what removes the Kronecker deltas of a Jacobian: ``sum_{j,k} H[i,j] X[i,k] [j == p]
[k == q]`` has the unknowns ``j, k``, the equations ``j == p``, ``k == q``, and solves to
an empty sum (a point): ``H[i,p] X[i,q]``.

Steps:
1. ``//`` and ``%`` by constants inside equations become fresh unknowns ``q, r`` with
   ``e == c*q + r``, ``0 <= r < c`` (reshape/flatten gradients become linear).
2. Linear equations with integer coefficients are eliminated one at a time: a unit
   coefficient pivots directly (the unknown with the widest range is eliminated first, so
   narrow ranges, such as kernel taps, stay as loops); a common factor ``g`` of the
   coefficients gives the solvability condition ``rest % g == 0``; otherwise unimodular
   column operations (Euclid on two coefficients) create a unit coefficient. Equations
   that are not linear in the unknowns stay as conditions.
3. Each remaining unknown gets bounds from the inequalities in which it is the only
   unknown (one Fourier-Motzkin step per variable, in order); when the bounds span fewer
   points than its static range, the variable is shifted to start at its lower bound
   (``h = floordiv(y - 3, 2) + d``, ``d`` in ``[0, 3)``): a strided convolution's gradient
   then visits only the taps that hit. A one-point range disappears.
4. Conditions are simplified on the final domain; those implied by it are dropped.

Everything is exact: the returned domain holds exactly the original points (integer index
arithmetic is assumed not to overflow, as everywhere in ``tex.arith``).
"""
from __future__ import annotations

import contextlib
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..dtype import boolean, int32
from ..ir import fold
from ..ir.expr import Binary, Compare, Const, Expr, IterVar, Op, Range, Var
from ..ir.visit import evaluate_bottom_up, post_order, rewrite, substitute
from .bounds import DomainLike, Interval, SymbolicInterval, dom_of, extent_facts, normalize_dom
from .linear import LinearForm
from .logic_rules import chain_operands
from .rules import Analyzer

__all__ = ["SolvedDomain", "solve_domain", "box_of"]


@dataclass
class SolvedDomain:
    """The points of ``solve_domain``'s problem, re-parameterized.

    ``substitution`` maps every unknown to an expression over ``axes`` and the parameters;
    ``inner`` is the condition that mentions axes, ``outer`` the one over parameters only
    (both ``True`` when nothing is left).
    """

    axes: list[IterVar]
    substitution: dict[Var, Expr]
    inner: Expr
    outer: Expr


# one linear equation: sum(coef * unknown) + rest == 0, rest free of unknowns
_Eq = tuple[dict[Var, int], LinearForm]


class _Solver:
    def __init__(self, unknowns: dict[Var, Interval | None], params: dict[Var, Interval]
                 ) -> None:
        self.ranges = dict(unknowns)          # unknown -> static range (None: none)
        self.params = params
        self.fresh_count = 0
        self.subst: dict[Var, LinearForm] = {}  # eliminated unknown -> form over the rest
        self.order: list[Var] = list(unknowns)
        self.conditions: list[Expr] = []
        self.divmod_vars: dict[tuple[Expr, int], tuple[Var, Var]] = {}
        self.symbolic: dict[Var, Range] = {}  # unknown -> its symbolic range
        self.an = Analyzer({**params, **{v: r for v, r in unknowns.items() if r is not None}})

    # -- helpers ----------------------------------------------------------------------
    def fresh(self, hint: str, rng: Interval | None) -> Var:
        self.fresh_count += 1
        v = Var(f"{hint}{self.fresh_count}", int32, kind="reduce")
        self.ranges[v] = rng
        self.order.append(v)
        if rng is not None:
            self.an = Analyzer({**self.an.dom, v: rng})
        return v

    def is_unknown(self, e: Expr) -> bool:
        return isinstance(e, Var) and e in self.ranges and e not in self.subst

    def mentions_unknown(self, e: Expr) -> bool:
        return any(self.is_unknown(n) for n in post_order(e))

    def affine(self, e: Expr) -> bool:
        """Whether ``e`` is affine in the unknowns (data-dependent terms such as
        ``idx[i] // 4`` are not: eliminating them would add unknowns of huge range)."""
        if not e.dtype.is_int:
            return False
        return all(self.is_unknown(a) or not self.mentions_unknown(a)
                   for a in self.linear(e).terms)

    def linear(self, e: Expr) -> LinearForm:
        return self.an.linear(self.an.rewrite(e))

    def rebuild(self, lf: LinearForm) -> Expr:
        return self.an.rebuild(lf)

    # -- step 1: div/mod elimination ----------------------------------------------------
    def eliminate_divmod(self, e: Expr) -> tuple[Expr, list[Expr]]:
        """``e`` with each ``a // c``, ``a % c`` over unknowns replaced by fresh unknowns;
        returns the new expression and the defining equations ``a - c*q - r``."""
        replaced: dict[Expr, Expr] = {}
        pairs = self.divmod_vars  # shared: a // c and a % c of one a use one (q, r)
        defs: list[Expr] = []
        # memos over the sub-terms of e, so that an index nested n deep in // and % costs
        # n steps, not n^2: whether a term mentions an unknown; rewrites (the analyzers
        # fresh() makes only add the new unknowns, which no sub-term of e holds);
        # substitutions (post order: a sub-term's replacements are final once seen)
        mentions: dict[Expr, bool] = {}
        rewritten: dict[Expr, Expr] = {}
        substituted: dict[Expr, Expr] = {}

        def mentions_unknown(x: Expr) -> bool:
            return evaluate_bottom_up(x, mentions, lambda n: n.children(), lambda n: (
                self.is_unknown(n) or any(mentions[k] for k in n.children())))

        def affine(x: Expr) -> bool:  # as self.affine, with the memos
            return x.dtype.is_int and all(
                self.is_unknown(t) or not mentions_unknown(t)
                for t in self.an.linear(self.an.rewrite(x, rewritten)).terms)

        for node in post_order(e):
            if not (isinstance(node, Binary) and node.op in (Op.FLOORDIV, Op.FLOORMOD)
                    and isinstance(node.b, Const) and node.b.value > 0
                    and mentions_unknown(node.a) and affine(node.a)):
                continue
            a = self.an.rewrite(rewrite(node.a, replaced.get, substituted))
            c = int(node.b.value)
            key = (a, c)
            if key not in pairs:
                ab = self.an.bounds(a)
                qr = Interval(None if ab.lo is None else ab.lo // c,
                              None if ab.hi is None else ab.hi // c)
                q = self.fresh("q", qr)
                r = self.fresh("r", Interval(0, c - 1))
                pairs[key] = (q, r)
                defs.append(fold.binary(Op.SUB, a, fold.binary(
                    Op.ADD, fold.binary(Op.MUL, q, Const(c, a.dtype)), r)))
            q, r = pairs[key]
            replaced[node] = q if node.op is Op.FLOORDIV else r
        return (substitute(e, replaced) if replaced else e), defs

    # -- step 0: the digits of one affine index (reshape, flatten) -----------------------
    def merge_digits(self, equations: list[Expr]
                     ) -> tuple[list[Expr], list[Expr], list[Expr]]:
        """Equations that fix every digit of one affine ``F`` in a mixed radix, ``F % n0 ==
        P0``, ``F // s1 % n1 == P1``, ..., ``F // st == Pt`` with ``s(k+1) = sk * nk`` (how
        reshape and flatten unravel a flat position), become the one equation ``F ==
        sum(sk * Pk)``: unravelling is a bijection, so the digits are fixed exactly when
        ``F`` is, given each ``Pk`` in ``[0, nk)`` (returned as conditions). The top digit
        may be reduced modulo ``nt`` too when ``F`` stays in ``[0, st * nt)``. Other
        equations pass unchanged; ``//`` and ``%`` of an incomplete set of digits are left
        to the quotient/remainder unknowns of step 1. Returns (the others, the merged
        equations, the conditions)."""
        groups: dict[Expr, list[tuple[int, int | None, Expr, int]]] = {}
        for n, e in enumerate(equations):
            digit = self.as_digit(e)
            if digit is not None:
                f, stride, radix, value = digit
                groups.setdefault(self.an.rewrite(f), []).append((stride, radix, value, n))
        merged: set[int] = set()
        out: list[Expr] = []
        conds: list[Expr] = []
        for f, digits in groups.items():
            digits.sort(key=lambda d: d[0])
            if not self.mixed_radix(f, [(s, r) for s, r, _, _ in digits]):
                continue
            total: Expr = Const(0, f.dtype)
            for stride, radix, value, n in digits:
                merged.add(n)
                total = fold.binary(Op.ADD, total, fold.binary(Op.MUL, value,
                                                               Const(stride, f.dtype)))
                if radix is not None:
                    conds.append(fold.compare(Op.GE, value, Const(0, value.dtype)))
                    conds.append(fold.compare(Op.LT, value, Const(radix, value.dtype)))
            out.append(fold.binary(Op.SUB, f, total))
        return [e for n, e in enumerate(equations) if n not in merged], out, conds

    def as_digit(self, e: Expr) -> tuple[Expr, int, int | None, Expr] | None:
        """``e == 0`` read as ``F // stride % radix == value`` (radix None: no ``%``;
        stride 1: no ``//``) with ``F`` affine in the unknowns and ``value`` free of them."""
        if not e.dtype.is_int:
            return None
        lf = self.an.linear(e)  # as written: rewriting would reduce F modulo the radix
        inside = [(a, c) for a, c in lf.terms.items() if self.mentions_unknown(a)]
        if len(inside) != 1 or abs(inside[0][1]) != 1:
            return None
        atom, sign = inside[0]
        radix: int | None = None
        if isinstance(atom, Binary) and atom.op is Op.FLOORMOD and \
                isinstance(atom.b, Const) and atom.b.value > 1:
            radix, atom = int(atom.b.value), atom.a
        stride = 1
        if isinstance(atom, Binary) and atom.op is Op.FLOORDIV and \
                isinstance(atom.b, Const) and atom.b.value > 1:
            stride, atom = int(atom.b.value), atom.a
        if (radix is None and stride == 1) or not self.affine(atom):
            return None
        rest = LinearForm({a: c for a, c in lf.terms.items() if a is not inside[0][0]},
                          lf.const, lf.dtype)
        return atom, stride, radix, self.rebuild(rest.scale(-sign))

    def mixed_radix(self, f: Expr, digits: list[tuple[int, int | None]]) -> bool:
        """Whether ``digits`` (stride, radix), by stride, are every digit of ``f``."""
        expected = 1
        for k, (stride, radix) in enumerate(digits):
            if stride != expected:
                return False
            if radix is None:  # the top digit: the quotient itself
                return k == len(digits) - 1
            expected = stride * radix
        b = self.an.bounds(f)  # a top digit taken modulo its radix: f must stay below
        return b.lo is not None and b.hi is not None and 0 <= b.lo and b.hi < expected

    # -- step 2: equations --------------------------------------------------------------
    def as_equation(self, e: Expr) -> _Eq | None:
        """``e == 0`` as a linear equation, or None when not linear in the unknowns."""
        if not e.dtype.is_int:
            return None
        lf = self.linear(e)
        coefs: dict[Var, int] = {}
        rest: dict[Expr, int] = {}
        for atom, c in lf.terms.items():
            if self.is_unknown(atom):
                coefs[atom] = c  # type: ignore[index]
            elif self.mentions_unknown(atom):
                return None
            else:
                rest[atom] = c
        return coefs, LinearForm(rest, lf.const, lf.dtype)

    def substitute_forms(self, var: Var, form: LinearForm, eqs: list[_Eq]) -> list[_Eq]:
        """Replace ``var`` by ``form`` (over unknowns and parameters) everywhere."""
        def apply(coefs: dict[Var, int], rest: LinearForm) -> _Eq:
            c = coefs.pop(var, 0)
            if c:
                for atom, k in form.terms.items():
                    if self.is_unknown(atom) and atom is not var:
                        coefs[atom] = coefs.get(atom, 0) + c * k  # type: ignore[index]
                    else:
                        rest = rest.add(LinearForm({atom: c * k}, 0, rest.dtype))
                rest = rest.add(LinearForm.constant(c * form.const, rest.dtype))
            return {v: k for v, k in coefs.items() if k}, rest

        out = [apply(dict(cf), rest) for cf, rest in eqs]
        for v, f in list(self.subst.items()):
            if var in f.terms:
                k = f.terms[var]
                terms = {a: c for a, c in f.terms.items() if a is not var}
                self.subst[v] = LinearForm(terms, f.const, f.dtype).add(form.scale(k))
        self.subst[var] = form
        return out

    def pick_pivot(self, eqs: list[_Eq]) -> tuple[int, Var] | None:
        best: tuple[tuple, int, Var] | None = None
        for n, (coefs, _) in enumerate(eqs):
            for v, c in coefs.items():
                if abs(c) != 1:
                    continue
                rng = self.ranges.get(v)
                width = math.inf if rng is None or not rng.is_bounded else rng.hi - rng.lo
                # eliminate the widest unknown; ties: earliest equation, earliest variable
                rank = (-width, n, self.order.index(v))
                if best is None or rank < best[0]:
                    best = (rank, n, v)
        return None if best is None else (best[1], best[2])

    def solve(self, eqs: list[_Eq]) -> bool:
        """Eliminate the equations; False when they have no integer solution."""
        while True:
            live: list[_Eq] = []
            for coefs, rest in eqs:
                if coefs:
                    live.append((coefs, rest))
                elif rest.is_const:
                    if rest.const != 0:
                        return False  # 0 == c: no solution
                else:  # over parameters only: a condition, not an equation
                    self.conditions.append(fold.compare(Op.EQ, self.rebuild(rest),
                                                        Const(0, rest.dtype)))
            eqs = live
            if not eqs:
                return True
            # an unknown fixed on its own (j == p) first, then sums of digits at once, then
            # unit coefficients in longer equations
            single = [(coefs, rest) for coefs, rest in eqs if len(coefs) == 1]
            radix = None if self.pick_pivot(single) else self.radix_pivot(eqs)
            if radix is not None:
                eqs = radix
                continue
            pivot = self.pick_pivot(eqs)
            if pivot is not None:
                n, v = pivot
                coefs, rest = eqs.pop(n)
                c = coefs[v]
                # c*v + others + rest == 0  ->  v = -(others + rest)/c, c = +-1
                terms: dict[Expr, int] = {u: -k * c for u, k in coefs.items() if u is not v}
                for atom, k in rest.terms.items():
                    terms[atom] = terms.get(atom, 0) - k * c
                form = LinearForm(terms, -rest.const * c, rest.dtype)
                eqs = self.substitute_forms(v, form, eqs)
                continue
            coefs, rest = eqs[0]
            g = 0
            for c in coefs.values():
                g = math.gcd(g, c)
            if g > 1:
                eqs[0] = self._divide(coefs, rest, g)
                if eqs[0] is None:
                    return False
                continue
            eqs = self._unimodular(eqs)

    def radix_pivot(self, eqs: list[_Eq]) -> list[_Eq] | None:
        """Solve an equation whose unknowns are the digits of a mixed radix at once.

        ``c0*x0 + c1*x1 + ... + ct*xt == P`` with every ``xk`` in ``[0, dk)`` and ``c(k+1)
        = ck * dk`` (sorted by coefficient, ``c0 = g``: a flattened position, as reshape
        writes it) holds exactly for ``xk = P // ck % dk`` (``xt = P // ct``, whose range
        stays a condition) when ``g`` divides ``P``: one point, where eliminating one
        unknown after another would leave the others as loops. None when no equation is
        such a sum (of at least two unknowns); else the remaining equations."""
        for n, (coefs, rest) in enumerate(eqs):
            if len(coefs) < 2:
                continue
            sign = 1 if all(c > 0 for c in coefs.values()) else \
                -1 if all(c < 0 for c in coefs.values()) else 0
            ranges = [self.ranges.get(v) for v in coefs]
            if not sign or any(r is None or r.lo != 0 or r.hi is None for r in ranges):
                continue
            digits = sorted(((sign * c, v, self.ranges[v].hi + 1)  # type: ignore[union-attr]
                             for v, c in coefs.items()), key=lambda d: d[0])
            if any(digits[k + 1][0] != digits[k][0] * digits[k][2]
                   for k in range(len(digits) - 1)):
                continue
            eqs = eqs[:n] + eqs[n + 1:]
            value = self.rebuild(rest.scale(-sign))  # sum(ck * xk) == value
            g = digits[0][0]
            if g > 1:
                self.conditions.append(fold.compare(
                    Op.EQ, fold.binary(Op.FLOORMOD, value, Const(g, value.dtype)),
                    Const(0, value.dtype)))
            for k, (c, v, d) in enumerate(digits):
                x = fold.binary(Op.FLOORDIV, value, Const(c, value.dtype))
                if k < len(digits) - 1:
                    x = fold.binary(Op.FLOORMOD, x, Const(d, value.dtype))
                eqs = self.substitute_forms(v, self.linear(x), eqs)
            return eqs
        return None

    def _divide(self, coefs: dict[Var, int], rest: LinearForm, g: int) -> _Eq | None:
        """Divide ``sum(coef*x) + rest == 0`` by the gcd ``g`` of its coefficients."""
        if rest.is_const:
            if rest.const % g:
                return None
            return {v: c // g for v, c in coefs.items()}, LinearForm.constant(rest.const // g,
                                                                               rest.dtype)
        if all(c % g == 0 for c in rest.terms.values()) and rest.const % g == 0:
            return ({v: c // g for v, c in coefs.items()},
                    LinearForm({a: c // g for a, c in rest.terms.items()}, rest.const // g,
                               rest.dtype))
        r = self.rebuild(rest)
        gc = Const(g, r.dtype)
        self.conditions.append(fold.compare(Op.EQ, fold.binary(Op.FLOORMOD, r, gc),
                                            Const(0, r.dtype)))
        return ({v: c // g for v, c in coefs.items()},
                LinearForm.atom(fold.binary(Op.FLOORDIV, r, gc)))

    def _unimodular(self, eqs: list[_Eq]) -> list[_Eq]:
        """One Euclid step on the first equation's two smallest coefficients: ``x_a =
        x' - m*x_b`` turns ``ca*x_a + cb*x_b`` into ``ca*x' + (cb - m*ca)*x_b``."""
        coefs, _ = eqs[0]
        items = sorted(coefs.items(), key=lambda vc: (abs(vc[1]), self.order.index(vc[0])))
        (a, ca), (b, cb) = items[0], items[1]
        m = cb // ca
        x = self.fresh(a.name + "_", None)
        form = LinearForm({x: 1, b: -m}, 0, a.dtype)
        return self.substitute_forms(a, form, eqs)

    # -- step 3: bounds of the remaining unknowns ----------------------------------------
    def value(self, v: Var) -> Expr:
        """The expression of an unknown over the remaining unknowns and parameters."""
        form = self.subst.get(v)
        return v if form is None else self.rebuild(form)


def _inequalities(cond: Expr, an: Analyzer) -> list[LinearForm] | None:
    """An integer comparison as forms ``f >= 0`` (two for ==), or None."""
    if not (isinstance(cond, Compare) and cond.a.dtype.is_int):
        return None
    d = an.linear(an.rewrite(fold.binary(Op.SUB, cond.a, cond.b)))  # a - b
    one = LinearForm.constant(1, d.dtype)
    match cond.op:
        case Op.LT:
            return [d.scale(-1).sub(one)]
        case Op.LE:
            return [d.scale(-1)]
        case Op.GT:
            return [d.sub(one)]
        case Op.GE:
            return [d]
        case Op.EQ:
            return [d, d.scale(-1)]
    return None


def box_of(cond: Expr, dom: dict[Var, Interval],
           exists: dict[Var, Interval] | None = None) -> dict[Var, Interval] | None:
    """The bounding box of the points of ``dom`` (bounded variables) where ``cond`` holds,
    from its atoms that bound one variable (``p < 2``, ``2 * q >= 3``); the others are
    ignored, so the box may be larger than the set, never smaller. None when the atoms
    leave no point.

    With ``exists``, the box of the points for which *some* values of those variables in
    their ranges satisfy ``cond``: an atom over one variable of ``dom`` and variables of
    ``exists`` (``0 <= t - h < 4`` with ``h`` in [0, 2]) bounds that variable with the
    others at their most permissive value (``0 <= t < 6``)."""
    an = Analyzer({**(exists or {}), **dom})
    box = dict(dom)
    for atom in chain_operands(cond, Op.AND):
        for f in _inequalities(atom, an) or ():
            own = [(v, k) for v, k in f.terms.items() if v in box]
            if len(own) != 1:
                continue
            slack = _most_permissive(f, own[0][0], exists or {})
            if slack is None:
                continue
            f = f.with_const(f.const + slack)
            (v, k), = own
            iv = box[v]
            lo, hi = iv.lo, iv.hi
            if k > 0:  # k v + c >= 0: v >= ceil(-c / k)
                lo = max(lo, -(f.const // k))
            else:  # v <= floor(c / -k)
                hi = min(hi, f.const // -k)
            if lo > hi:
                return None
            box[v] = Interval(lo, hi)
    return box


def _most_permissive(f: LinearForm, own: Var, exists: dict[Var, Interval]) -> int | None:
    """The largest value of ``f``'s terms other than ``own``'s over the ranges of
    ``exists`` (0 when there are none), or None when one is not an existential variable."""
    slack = 0
    for v, k in f.terms.items():
        if v is own:
            continue
        iv = exists.get(v)  # type: ignore[call-overload]
        if iv is None or iv.lo is None or iv.hi is None:
            return None
        slack += max(k * iv.lo, k * iv.hi)
    return slack


def _frac_bounds(lf: LinearForm, div: int,
                 bounds_of: Callable[[Expr], Interval]) -> tuple[Fraction, Fraction]:
    """Rational bounds of ``lf / div`` from the bounds of its atoms."""
    lo = hi = Fraction(lf.const)
    for atom, c in lf.terms.items():
        iv = bounds_of(atom)
        if iv.lo is None or iv.hi is None:
            return Fraction(-10**18), Fraction(10**18)
        a, b = c * iv.lo, c * iv.hi
        lo += min(a, b)
        hi += max(a, b)
    return lo / div, hi / div


def _edge_inequality(s: _Solver, atom: Expr) -> Expr:
    """``x != c`` at an end of the unknown ``x``'s range is an inequality (``x >= c + 1``),
    or an equation when one point is left (``i != 0`` over ``[0, 2)``: ``i == 1``, which
    the solver then eliminates; a stack's gradient reads its slice instead of summing)."""
    if not (isinstance(atom, Compare) and atom.op is Op.NE):
        return atom
    x, c = (atom.a, atom.b) if isinstance(atom.b, Const) else (atom.b, atom.a)
    if not (isinstance(c, Const) and s.is_unknown(x)):
        return atom
    rng = s.ranges.get(x)
    if rng is None or rng.lo is None or rng.hi is None:
        return atom
    if c.value == rng.lo:
        lo, hi = rng.lo + 1, rng.hi
    elif c.value == rng.hi:
        lo, hi = rng.lo, rng.hi - 1
    else:
        return atom
    if lo == hi:
        return fold.compare(Op.EQ, x, Const(lo, x.dtype))
    if c.value == rng.lo:
        return fold.compare(Op.GE, x, Const(lo, x.dtype))
    return fold.compare(Op.LE, x, Const(hi, x.dtype))


# solve_domain's memo: problems equal up to the identity of their unknowns and parameters
# (the same compute differentiated stage after stage, each on fresh axes) are solved once.
# A pure memo (equal keys always give equal answers), bounded; the only module-level state.
_SOLVED_MAX = 512
_SOLVED: OrderedDict[tuple, SolvedDomain | None] = OrderedDict()
# (position, name, dtype, kind) -> the variable standing for that slot in memo keys
_CANONICAL: dict[tuple, Var] = {}
_MISSING: Any = object()


_CANONICAL_MAX = 4096


def _canonical(k: int, v: Var) -> Var:
    key = (k, v.name, v.dtype, v.kind)
    c = _CANONICAL.get(key)
    if c is None:
        if len(_CANONICAL) >= _CANONICAL_MAX:
            # bounded: start over (memo keys made of the old variables can no longer match)
            _CANONICAL.clear()
            _SOLVED.clear()
        c = _CANONICAL[key] = Var(v.name, v.dtype, kind=v.kind)
    return c


def solve_domain(unknowns: Sequence[IterVar], equations: Sequence[Expr],
                 conditions: Sequence[Expr], params: DomainLike) -> SolvedDomain | None:
    """Re-parameterize ``{x in ranges : equations == 0, conditions}`` (memoized up to a
    renaming of the unknowns and parameters; see ``_solve_domain``)."""
    pdom = normalize_dom(params)
    if _is_symbolic(unknowns, pdom):
        # symbolic ranges name the shape variables, which the renaming below would miss
        return _solve_domain(unknowns, equations, conditions, pdom)
    slots = [iv.var for iv in unknowns] + [v for v in pdom if v not in
                                            {iv.var for iv in unknowns}]
    fwd = {v: _canonical(k, v) for k, v in enumerate(slots)}
    if len(set(fwd.values())) != len(fwd):  # a variable listed twice: no memo
        return _solve_domain(unknowns, equations, conditions, pdom)
    c_unknowns = tuple(IterVar(fwd[iv.var], iv.dom) for iv in unknowns)
    key = (tuple((c.var, iv.dom.min, iv.dom.extent) for c, iv in zip(c_unknowns, unknowns)),
           tuple(substitute(e, fwd) for e in equations),
           tuple(substitute(c, fwd) for c in conditions),
           tuple((fwd[v], iv.lo, iv.hi) for v, iv in pdom.items()))
    res = _SOLVED.get(key, _MISSING)
    if res is _MISSING:
        res = _solve_domain(c_unknowns, key[1], key[2],
                            {fwd[v]: iv for v, iv in pdom.items()})
        _SOLVED[key] = res
        while len(_SOLVED) > _SOLVED_MAX:
            try:  # another thread may have evicted it first: a memo loses nothing
                _SOLVED.popitem(last=False)
            except KeyError:
                break
    else:
        with contextlib.suppress(KeyError):  # evicted meanwhile by another thread
            _SOLVED.move_to_end(key)
    if res is None:
        return None
    # back to the caller's variables; the new summation axes are fresh at every call
    # (an IterVar belongs to one operation)
    back: dict[Expr, Expr] = {c: v for v, c in fwd.items()}
    axes = []
    for iv in res.axes:
        nv = IterVar(Var(iv.var.name, iv.var.dtype, kind=iv.var.kind), iv.dom)
        back[iv.var] = nv.var
        axes.append(nv)
    return SolvedDomain(axes, {back.get(k, k): substitute(e, back)  # type: ignore[misc]
                               for k, e in res.substitution.items()},
                        substitute(res.inner, back), substitute(res.outer, back))


def _is_symbolic(unknowns: Sequence[IterVar], pdom: dict[Var, Interval]) -> bool:
    """Whether a range is symbolic (an extent over ``tex.var``/``tex.size_var``)."""
    return any(not isinstance(iv.dom.min, int) or not isinstance(iv.dom.extent, int)
               for iv in unknowns) or any(
        isinstance(iv, SymbolicInterval) or v.kind in _SHAPE_KINDS for v, iv in pdom.items())


_SHAPE_KINDS = ("var", "size")


def _solve_domain(unknowns: Sequence[IterVar], equations: Sequence[Expr],
                  conditions: Sequence[Expr], params: DomainLike) -> SolvedDomain | None:
    """Re-parameterize ``{x in ranges : equations == 0, conditions}``.

    Parameters
    ----------
    unknowns : list of IterVar
        The variables summed over, with their static ranges.
    equations : list of Expr
        Integer expressions required to be 0 (``lhs - rhs``).
    conditions : list of Expr
        Boolean conditions (``&&`` chains are split; ``==`` atoms over unknowns become
        equations).
    params : domain
        The ranges of the other variables (the result tensor's indices).

    Returns
    -------
    SolvedDomain, or None when the set is provably empty.
    """
    pdom = {**extent_facts(unknowns), **normalize_dom(params)}
    s = _Solver({iv.var: dom_of(iv)[iv.var] for iv in unknowns}, pdom)
    s.symbolic.update((iv.var, iv.dom) for iv in unknowns
                    if not (isinstance(iv.dom.min, int) and isinstance(iv.dom.extent, int)))
    pending = list(equations)
    conds: list[Expr] = []
    for c in conditions:
        for atom in chain_operands(s.an.rewrite(c), Op.AND):
            atom = _edge_inequality(s, atom)
            if isinstance(atom, Const):
                if not atom.value:
                    return None
                continue
            if isinstance(atom, Compare) and atom.op is Op.EQ and atom.a.dtype.is_int \
                    and s.mentions_unknown(atom):
                pending.append(fold.binary(Op.SUB, atom.a, atom.b))
            else:
                conds.append(atom)
    # whole sets of digits of one flat position become one equation; the others are
    # simplified on the unknowns' ranges first (a digit (i*6 + j*3 + l) // 6 of an
    # incomplete set is i when j*3 + l < 6, and needs no quotient unknown)
    pending, merged, digit_conds = s.merge_digits(pending)
    pending = [*(s.an.rewrite(e) for e in pending), *merged]
    conds.extend(digit_conds)
    eqs: list[_Eq] = []
    for e in pending:
        e2, defs = s.eliminate_divmod(e)
        for d in [*defs, e2]:
            eq = s.as_equation(d)
            if eq is None:
                conds.append(fold.compare(Op.EQ, d, Const(0, d.dtype)))
            else:
                eqs.append(eq)
    if not s.solve(eqs):
        return None
    conds.extend(s.conditions)
    # ranges of eliminated unknowns become conditions on the rest
    for v, rng in s.ranges.items():
        if v in s.subst and rng is not None:
            val = s.value(v)
            lo, hi = _ends(rng, val.dtype)
            if lo is not None:
                conds.append(fold.compare(Op.GE, val, lo))
            if hi is not None:
                conds.append(fold.compare(Op.LE, val, hi))
    final: dict[Var, Expr] = {v: s.value(v) for v in s.subst}
    conds = [substitute(c, final) for c in conds]
    free = [v for v in s.order if v not in s.subst]
    return _bound_free(s, free, conds, final, pdom, unknowns)


def _ends(rng: Interval, dtype: Any) -> tuple[Expr | None, Expr | None]:
    """An unknown's range as expressions: its symbolic ends where it has them."""
    sym_lo = getattr(rng, "sym_lo", None)
    sym_hi = getattr(rng, "sym_hi", None)
    lo = sym_lo if sym_lo is not None else None if rng.lo is None else Const(rng.lo, dtype)
    hi = sym_hi if sym_hi is not None else None if rng.hi is None else Const(rng.hi, dtype)
    return lo, hi


Bound = tuple[LinearForm, int]  # (num, div): the bound num / div of one unknown


def _bound_free(s: _Solver, free: list[Var], conds: list[Expr], final: dict[Var, Expr],
                pdom: dict[Var, Interval], unknowns: Sequence[IterVar]) -> SolvedDomain | None:
    """Step 3 and 4: ranges for the free unknowns, then the conditions left."""
    known: dict[Var, Interval] = dict(pdom)
    axes: list[IterVar] = []
    shift: dict[Var, Expr] = {}
    pending = set(free)
    for v in free:
        pending.discard(v)
        an = Analyzer({**known, **{u: r for u in pending if (r := s.ranges[u]) is not None}})
        rng = s.ranges[v]
        lows, highs = _linear_bounds(v, conds, shift, an, pending)
        symbolic = s.symbolic.get(v)
        if symbolic is not None:
            # a symbolic range: a narrower pair of bounds is taken only when the number of
            # points between them is a constant (kernel taps); else the range stays the
            # loop, and the conditions (kept below) select the points
            assert rng is not None
            best = _tightest(lows, highs, an, constant_span=True)
            if best is None or best[0] >= (rng.hi or 0) - (rng.lo or 0) + 1:
                d = Var(v.name, int32, kind="reduce")
                axes.append(IterVar(d, symbolic))
                known[d] = dom_of(IterVar(d, symbolic))[d]
                shift[v] = d
                continue
            lo_e, hi_e = _ends(rng, int32)
            if lo_e is not None:
                conds.append(fold.compare(Op.GE, v, lo_e))
            if hi_e is not None:
                conds.append(fold.compare(Op.LE, v, hi_e))
            rng = None
        elif rng is not None and rng.is_bounded:
            lows.append((LinearForm.constant(rng.lo, int32), 1))
            highs.append((LinearForm.constant(rng.hi, int32), 1))
            best = _tightest(lows, highs, an)
        else:
            best = _tightest(lows, highs, an)
        static = (rng.hi - rng.lo + 1) if rng is not None and rng.is_bounded else math.inf
        if best is None:
            raise ValueError(f"solve_domain: variable {v.name} is unbounded")
        ext, (num, div) = best
        if ext <= 0:
            return None
        if static == 1:
            shift[v] = Const(rng.lo, int32)  # type: ignore[union-attr]
        elif ext < static or rng is None or not rng.is_bounded:
            base = an.rebuild(num) if div == 1 else fold.binary(
                Op.FLOORDIV, fold.binary(Op.ADD, an.rebuild(num), Const(div - 1, int32)),
                Const(div, int32))
            if ext == 1:
                shift[v] = base
            else:
                d = Var(f"{v.name}", int32, kind="reduce")
                axes.append(IterVar(d, Range(0, ext)))
                known[d] = Interval(0, ext - 1)
                shift[v] = fold.binary(Op.ADD, base, d)
            if rng is not None and rng.is_bounded:
                conds.append(fold.compare(Op.GE, v, Const(rng.lo, int32)))
                conds.append(fold.compare(Op.LE, v, Const(rng.hi, int32)))
        else:
            d = Var(v.name, int32, kind="reduce")
            axes.append(IterVar(d, Range(rng.lo, rng.hi - rng.lo + 1)))
            known[d] = rng
            shift[v] = d
    return _resolve(known, axes, shift, conds, final, unknowns)


def _linear_bounds(v: Var, conds: list[Expr], shift: dict[Var, Expr], an: Analyzer,
                   pending: set[Var]) -> tuple[list[Bound], list[Bound]]:
    """The lower and upper bounds of ``v`` the linear conditions give, in the unknowns
    already bounded (conditions that mention a pending unknown do not count)."""
    lows: list[Bound] = []
    highs: list[Bound] = []
    for c in conds:
        c2 = substitute(c, shift) if shift else c
        forms = _inequalities(c2, an)
        for f in forms or ():
            k = f.terms.get(v, 0)
            if not k:
                continue
            rest = LinearForm({a: x for a, x in f.terms.items() if a is not v}, f.const,
                              f.dtype)
            if any(_mentions(a, pending) or _mentions(a, {v}) for a in rest.terms):
                continue
            # k*v + rest >= 0: k > 0 -> v >= ceil(-rest/k); k < 0 -> v <= floor(rest/-k)
            (lows if k > 0 else highs).append((rest.scale(-1), k) if k > 0 else (rest, -k))
    return lows, highs


def _tightest(lows: list[Bound], highs: list[Bound], an: Analyzer, constant_span: bool = False
              ) -> tuple[int, Bound] | None:
    """The pair of bounds with the fewest points between them: (extent, its lower bound).
    ``constant_span``: only pairs whose distance holds no shape variable."""
    best: tuple[int, Bound] | None = None
    for lo in lows:
        for hi in highs:
            if constant_span and not _same_slope(lo, hi) and (
                    _mentions_shape(lo[0]) or _mentions_shape(hi[0])):
                continue
            hlo, hhi = _frac_bounds(hi[0], hi[1], an.bounds)
            llo, lhi = _frac_bounds(lo[0], lo[1], an.bounds)
            if lo[0].terms.keys() == hi[0].terms.keys() and lo[1] == hi[1] and \
                    all(lo[0].terms[a] == hi[0].terms[a] for a in lo[0].terms):
                span = Fraction(hi[0].const - lo[0].const, lo[1])  # same slope: exact
            else:
                span = hhi - llo
            ext = math.floor(span) + 1
            if best is None or ext < best[0]:
                best = (ext, lo)
    return best


def _same_slope(lo: Bound, hi: Bound) -> bool:
    return lo[0].terms.keys() == hi[0].terms.keys() and lo[1] == hi[1] and \
        all(lo[0].terms[a] == hi[0].terms[a] for a in lo[0].terms)


def _mentions_shape(lf: LinearForm) -> bool:
    """Whether a linear form holds a shape variable (``tex.var``/``tex.size_var``)."""
    return any(isinstance(n, Var) and n.kind in _SHAPE_KINDS
               for t in lf.terms for n in post_order(t))


def _resolve(known: dict[Var, Interval], axes: list[IterVar], shift: dict[Var, Expr],
             conds: list[Expr], final: dict[Var, Expr], unknowns: Sequence[IterVar]
             ) -> SolvedDomain | None:
    """Shifts resolved into the substitution, everything simplified on the final domain,
    and the conditions left split into those on the new axes and the others."""
    fan = Analyzer(known)
    sub = {v: fan.rewrite(substitute(e, shift)) for v, e in final.items()}
    sub.update({v: fan.rewrite(e) for v, e in shift.items()})
    for iv in unknowns:
        sub.setdefault(iv.var, iv.var)
    cond = Const(True, boolean)
    for c in conds:
        cond = fold.binary(Op.AND, cond, substitute(c, shift))
    cond = fan.rewrite(cond)
    if isinstance(cond, Const) and not cond.value:
        return None
    axis_vars = {iv.var for iv in axes}
    inner: Expr = Const(True, boolean)
    outer: Expr = Const(True, boolean)
    for atom in chain_operands(cond, Op.AND):
        if isinstance(atom, Const):
            continue
        if _mentions(atom, axis_vars):
            inner = fold.binary(Op.AND, inner, atom)
        else:
            outer = fold.binary(Op.AND, outer, atom)
    return SolvedDomain(axes, {v: e for v, e in sub.items()
                               if v in {iv.var for iv in unknowns}}, inner, outer)


def _mentions(e: Expr, vars_: set[Var]) -> bool:
    return any(n in vars_ for n in post_order(e)) if vars_ else False
