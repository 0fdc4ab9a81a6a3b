"""The analyzer and the rule tables: fast local rewrites of index arithmetic and conditions.

Each rule is a small function ``(node, analyzer) -> Expr | None`` with a ``before -> after``
comment (the index-arithmetic families in ``index_rules.py``, the boolean ones in
``logic_rules.py``, the linear form they share in ``linear.py``); this module groups them
by family in ``FAMILIES`` (``tex.ir.visit.RuleTable``s: node type -> rules, a rule marked
``for_ops`` seeing only its operators) and binds them to one ``Analyzer``, each family
(``rule_sets``) or all merged in order (``ruleset``), for
``tex.ir.visit.fixed_point_rewrite``.

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

import math
from collections.abc import Mapping, Sequence

from ..dtype import DType
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
from ..ir.visit import BoundRules, RuleTable, evaluate_bottom_up, fixed_point_rewrite, post_order
from .bounds import Bounds, DomainLike, Interval
from .index_rules import (
    bounds_point,
    canonical_linear,
    compare_bool,
    compare_linear,
    divmod_by_bounds,
    floordiv_const,
    floormod_const,
    minmax_by_bounds,
    minmax_consts,
    minmax_floordiv,
    refold,
    truncdiv_const,
)
from .linear import (
    INF,
    SWAP,
    Constraint,
    LinearForm,
    decide_const,
    div_exact,
    fits,
    is_const_value,
    is_term,
    linear_inputs,
    wrapped,
)
from .logic_rules import and_or, not_chain, select_bool, select_nested

__all__ = ["Analyzer", "ALL_RULES", "FAMILIES", "rule_sets", "ruleset"]


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
        self._ruleset: BoundRules | None = None
        # whether a domain end is an expression (a symbolic shape's range)
        self._symbolic = any(getattr(iv, "sym_lo", None) is not None
                             or getattr(iv, "sym_hi", None) is not None
                             for iv in self.dom.values())

    # -- rewriting ------------------------------------------------------------------------
    @property
    def rules(self) -> BoundRules:
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
        return evaluate_bottom_up(e, self._linear, linear_inputs, self._compute_linear)

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
        return self.rebuild(div_exact(lf, g)), g

    def affine_range(self, e: Expr, ranging: Mapping[Var, int | Expr]
                     ) -> tuple[Expr, int | Expr] | None:
        """``(lo, extent)`` of the integer ``e`` as each variable of ``ranging`` takes the
        values ``[0, n)``: ``lo`` uses the other variables (fixed); None when ``e`` is not
        affine in the ranging variables. A symbolic ``n`` (at least 1) gives a symbolic
        extent."""
        if not e.dtype.is_int:
            return None
        lf = self.linear(self.rewrite(e))
        lo_terms: dict[Expr, int] = {}
        low, span = 0, 0
        sym_span: LinearForm | None = None
        for atom, c in lf.terms.items():
            if isinstance(atom, Var) and atom in ranging:
                n = ranging[atom]
                if not isinstance(n, int):  # c * (n - 1): its sign is c's
                    reach = self.linear(n).scale(c).add(LinearForm.constant(-c, lf.dtype))
                    if c < 0:
                        for t, k in reach.terms.items():
                            lo_terms[t] = lo_terms.get(t, 0) + k
                        low += reach.const
                    reach = reach if c > 0 else reach.scale(-1)
                    sym_span = reach if sym_span is None else sym_span.add(reach)
                    continue
                reach = c * (n - 1)
                low += min(reach, 0)
                span += abs(reach)
                continue
            if any(isinstance(n, Var) and n in ranging for n in post_order(atom)):
                return None
            lo_terms[atom] = c
        base = type(lf)(lo_terms, lf.const + low, lf.dtype)
        if sym_span is not None:
            ext = self.rebuild(sym_span.add(LinearForm.constant(span + 1, lf.dtype)))
            return self.rebuild(base), int(ext.value) if isinstance(ext, Const) else ext
        return self.rebuild(base), span + 1

    @staticmethod
    def union_range(ranges: Sequence[tuple[Expr, int | Expr] | None]
                    ) -> tuple[Expr, int | Expr] | None:
        """The smallest range holding all ``(lo, extent)`` ranges whose lows differ by
        constants; None when that cannot be shown (or a range is None). Symbolic extents
        must be one expression (the union then widens it by the shifts)."""
        if not ranges or any(r is None for r in ranges):
            return None
        an = Analyzer()
        lo0, _ = ranges[0]  # type: ignore[misc]
        shifts: list[tuple[int, int | Expr]] = []
        for r in ranges:
            assert r is not None
            diff = an.rewrite(r[0] - lo0)
            if not isinstance(diff, Const):
                return None
            shifts.append((int(diff.value), r[1]))
        low = min(s for s, _ in shifts)
        lo = an.rewrite(lo0 + low) if low else lo0
        symbolic = [n for _, n in shifts if not isinstance(n, int)]
        if symbolic:
            if any(n is not symbolic[0] for _, n in shifts):
                return None
            widen = max(s for s, _ in shifts) - low
            return lo, an.rewrite(symbolic[0] + widen) if widen else symbolic[0]
        high = max(s + n for s, n in shifts)  # type: ignore[operator]
        return lo, high - low

    def rebuild(self, lf: LinearForm) -> Expr:
        """The canonical expression of a linear form (see the module docstring).

        Built with the raw constructors: none of the ``tex.ir.fold`` rules applies to a
        canonical form (no constant operand but the last, no ``x*c1*c2``, no ``0 - x``),
        which the tests check. Every prefix built on the way is canonical too and is
        remembered, so the rules do not rebuild it again.
        """
        dtype = lf.dtype
        lf = wrapped(lf)
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
                elif fits(-c, dtype):
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
            if fits(-k, dtype):
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
        lf = wrapped(lf)
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
            sub = c < 0 and fits(-c, dtype)
            if e.op is not (Op.SUB if sub else Op.ADD):
                return False
            want = -c if sub else c
            if not (is_const_value(e.b, want) if atom is None else is_term(e.b, atom, want)):
                return False
            e = e.a
        atom, c = seq[0]
        if atom is None:
            return is_const_value(e, c)
        if c == -1:
            return isinstance(e, Unary) and e.op is Op.NEG and e.a is atom
        return is_term(e, atom, c)

    def linear_bounds(self, lf: LinearForm) -> Interval:
        """Bounds of a linear form: the sum of ``coef * bounds(atom)``, plus the constant.
        Where the domain has symbolic ends (``i`` in ``[0, n - 1]``), each end is also
        bounded with the ends substituted (``i - n <= (n - 1) - n``), and the tighter
        bound kept."""
        plain = self._plain_linear_bounds(lf)
        if not self._symbolic:
            return plain
        lo = self._plain_linear_bounds(self._substituted(lf, upper=False)).lo
        hi = self._plain_linear_bounds(self._substituted(lf, upper=True)).hi
        got = plain.intersect(Interval._ext(-INF if lo is None else lo,
                                            INF if hi is None else hi))
        return plain if got is None else got

    def within(self, e: Expr, lo: int | Expr, hi: int | Expr) -> bool:
        """Whether ``lo <= e <= hi`` holds on the domain (ends may be symbolic)."""
        lf = self.linear(e)
        below = self.linear_bounds(lf.sub(self._linear_end(lo, lf.dtype)))
        return below.lo is not None and below.lo >= 0 and self.at_most(e, hi)

    def at_most(self, e: Expr, hi: int | Expr) -> bool:
        """Whether ``e <= hi`` holds on the domain (``hi`` may be symbolic)."""
        lf = self.linear(e)
        above = self.linear_bounds(self._linear_end(hi, lf.dtype).sub(lf))
        return above.lo is not None and above.lo >= 0

    def _linear_end(self, end: int | Expr, dtype: DType) -> LinearForm:
        if isinstance(end, int):
            return LinearForm.constant(end, dtype)
        if end.dtype is not dtype:
            end = fold.cast(dtype, end)
        return self.linear(end)

    def _substituted(self, lf: LinearForm, upper: bool) -> LinearForm:
        """``lf`` with each variable that has a symbolic end replaced by the end that bounds
        ``lf`` from above (``upper``) or below, a few rounds deep (an end may use another
        such variable)."""
        for _ in range(4):
            out = LinearForm.constant(lf.const, lf.dtype)
            changed = False
            for atom, c in lf.terms.items():
                iv = self.dom.get(atom) if isinstance(atom, Var) else None
                end = None
                if iv is not None:
                    end = getattr(iv, "sym_hi" if (c > 0) == upper else "sym_lo", None)
                if end is None:
                    out = out.add(LinearForm.atom(atom, c))
                else:
                    out = out.add(self.linear(end).scale(c))
                    changed = True
            lf = out
            if not changed:
                break
        return lf

    def _plain_linear_bounds(self, lf: LinearForm) -> Interval:
        lo: int | float = lf.const
        hi: int | float = lf.const
        for atom, c in lf.terms.items():
            b = self.bounds(atom)
            blo = -INF if b.lo is None else b.lo
            bhi = INF if b.hi is None else b.hi
            if c > 0:
                lo, hi = lo + c * blo, hi + c * bhi
            else:
                lo, hi = lo + c * bhi, hi + c * blo
        return Interval._ext(lo, hi)

    def fuse_divmod(self, lf: LinearForm) -> LinearForm:
        """Recombine quotient and remainder terms of one division.

        ``(x // c)*c + y % c -> x`` when ``y`` equals ``x`` modulo ``c`` (an earlier rewrite
        may have reduced the remainder's coefficients: ``(i + 16*j) % 3 -> (i + j) % 3``)
        and ``x - (x // c)*c -> x % c`` (times any coefficient); also ``(x // (c*k))*k +
        (x // c) % k -> x // c`` (c, k > 0: the digits of a mixed radix, as fusing a conv
        kernel's ``(q, r, s)`` into one axis writes them), which the first rule then takes.
        """
        divs = {(t.a, t.b.value): t for t in lf.terms
                if isinstance(t, Binary) and t.op is Op.FLOORDIV and isinstance(t.b, Const)}
        if not divs:
            return lf
        for m in list(lf.terms):
            if not (isinstance(m, Binary) and m.op is Op.FLOORMOD and isinstance(m.b, Const)):
                continue
            y, k = m.a, m.b.value
            a = lf.terms.get(m)
            if a is None or k <= 0:
                continue
            # the quotients whose remainder ``m`` is: x // k for x == y (mod k), and
            # x // (c*k) == (x // c) // k for y = x // c
            cands = [(x, d) for (x, c), d in divs.items()
                     if c == k and (x is y or self._congruent(x, y, k))]
            if isinstance(y, Binary) and y.op is Op.FLOORDIV and isinstance(y.b, Const) \
                    and y.b.value > 0 and (y.a, y.b.value * k) in divs:
                cands.append((y, divs[(y.a, y.b.value * k)]))
            for x, d in cands:
                if lf.terms.get(d) == a * k:
                    # a*k*(x // k) + a*(x % k) == a*x
                    lf = lf.sub(LinearForm({m: a, d: a * k}, 0, lf.dtype))
                    lf = lf.add(self.linear(x).scale(a))
                    break
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

    def _congruent(self, x: Expr, y: Expr, k: int) -> bool:
        """Whether ``x == y (mod k)`` for all values: their difference's coefficients and
        constant are multiples of ``k``."""
        d = self.linear(x).sub(self.linear(y))
        return d.const % k == 0 and all(c % k == 0 for c in d.terms.values())

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
            return decide_const(op, d.const)
        items = sorted(d.terms.items(), key=lambda tc: self.key(tc[0]))
        if items[0][1] < 0:  # orient: first atom positive (j < i  ->  i > j)
            d, op = d.scale(-1), SWAP[op]
            items = [(t, -c) for t, c in items]
        g = 0
        for _, c in items:
            g = math.gcd(g, c)
        k = d.const
        part = LinearForm({t: c // g for t, c in items}, 0, d.dtype)
        # part*g + k op 0, solved for part (integer rounding)
        if op is Op.LT:
            lo, hi = -INF, (-k - 1) // g
        elif op is Op.LE:
            lo, hi = -INF, (-k) // g
        elif op is Op.GT:
            lo, hi = -((k - 1) // g), INF
        elif op is Op.GE:
            lo, hi = -(k // g), INF
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
        blo = -INF if b.lo is None else b.lo
        bhi = INF if b.hi is None else b.hi
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
        elif con.hi == INF:
            op, value = (Op.GT, 0) if con.lo == 1 else (Op.GE, con.lo)
        elif con.hi == 0:
            op, value = Op.LE, 0
        else:
            op, value = Op.LT, con.hi + 1
        if cmp.op is not op or not fits(int(value), con.part.dtype):
            return False
        part = con.part
        pos = LinearForm({t: c for t, c in part.terms.items() if c > 0}, 0, part.dtype)
        neg = LinearForm({t: -c for t, c in part.terms.items() if c < 0}, int(value),
                         part.dtype)
        return self.matches(cmp.a, pos) and self.matches(cmp.b, neg)

    def build_compare(self, part: LinearForm, op: Op, value: int) -> Expr | None:
        """``part op value`` printed as ``P op N + value`` (P: positive terms); None when
        ``value`` does not fit the dtype."""
        if not fits(value, part.dtype):
            return None
        pos = LinearForm({t: c for t, c in part.terms.items() if c > 0}, 0, part.dtype)
        neg = LinearForm({t: -c for t, c in part.terms.items() if c < 0}, value, part.dtype)
        return fold.compare(op, self.rebuild(pos), self.rebuild(neg))

    def build_bound(self, part: LinearForm, lo: int | float, hi: int | float) -> Expr | None:
        """``part >= lo`` (hi infinite) or ``part <= hi`` (lo infinite), choosing between
        ``<``/``<=`` and ``>``/``>=`` so that the constant is 0 where one of them allows
        it: ``i - j <= 0 -> i <= j``, ``i - j >= 1 -> i > j``, else ``i < 6``, ``i >= 2``
        (or the other operator where the constant would not fit the dtype)."""
        if hi == INF:
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
        blo = -INF if b.lo is None else b.lo
        bhi = INF if b.hi is None else b.hi
        lo, hi = max(lo, blo), min(hi, bhi)
        parts: list[Expr | None] = []
        if lo == hi:
            if blo != bhi:
                parts.append(self.build_compare(con.part, Op.EQ, int(lo)))
        else:
            if lo > blo:
                parts.append(self.build_bound(con.part, lo, INF))
            if hi < bhi:
                parts.append(self.build_bound(con.part, -INF, hi))
        if any(p is None for p in parts):
            return None
        return parts  # type: ignore[return-value]


# --------------------------------------------------------------------------------------
# The tables
# --------------------------------------------------------------------------------------

FAMILIES: dict[str, RuleTable] = {name: RuleTable(name, rules) for name, rules in {
    "fold": {Binary: (refold,), Unary: (refold,), Compare: (refold,), Select: (refold,),
             Cast: (refold,)},
    "bounds": {t: (bounds_point,) for t in (Binary, Unary, Compare, Select, Cast, Var)},
    "linear": {Binary: (canonical_linear,), Unary: (canonical_linear,)},
    "divmod": {Binary: (floordiv_const, floormod_const, truncdiv_const, divmod_by_bounds)},
    "minmax": {Binary: (minmax_by_bounds, minmax_floordiv, minmax_consts)},
    "compare": {Compare: (compare_linear, compare_bool)},
    "logic": {Binary: (and_or,), Unary: (not_chain,)},
    "select": {Select: (select_bool, select_nested)},
}.items()}
# all families merged per node type, in FAMILIES order
ALL_RULES = RuleTable.merged("arith", FAMILIES.values())


def rule_sets(an: Analyzer) -> dict[str, BoundRules]:
    """Each rule family as a rewrite function bound to ``an``."""
    return {name: table.bound(an) for name, table in FAMILIES.items()}


def ruleset(an: Analyzer) -> BoundRules:
    """All families merged (in ``FAMILIES`` order), bound to ``an``."""
    return ALL_RULES.bound(an)
