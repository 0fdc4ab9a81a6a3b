"""Adjoints that are identically zero, proved before differentiating (``zero_adjoints``).

The max-shift of a stable softmax, ``m[i] = max_k x[i, k]``, enters ``e = exp(x - m)``
and cancels in ``y = e / sum_k e``: ``d y / d m == 0``. Reverse mode would still build an
adjoint for ``m`` (an argsel tensor and a sum that adds up to rounding noise). Here the
zero is proved in forward mode, symbolically:

    give m an arbitrary tangent δ (a placeholder of m's shape) and push it through m's
    descendants, producers first: tangent(t) = Σ_reads ∂body/∂read · tangent(read).
    A tangent that sympy proves to be 0 (``tex.arith.float_is_zero``) stops there; when
    every path dies before the output, d output / d m = 0 whatever the head, and every
    edge into m can be skipped.

A sum reduction ``R[i] = Σ_k f(i, k)`` has the tangent ``Σ_k f'(i, k)``, a new sum the
zero check cannot see through. It is rewritten with sums already computed: f' is expanded
into products, the factors free of k stay outside, and the rest is matched against the
source of a known sum over the same domain and condition (R itself, usually), structurally
or, for R, with sympy:

    Σ_k -δ[i] * e[i, k]  ->  -δ[i] * s[i]

and then ``y = e / s`` has the tangent ``(-δ e) / s - e (-δ s) / s² = 0``.

Conventions are tex's (``derivative.py``): conditions (``select``, ``where=``) are not
differentiated and integer tensors carry no tangent; the algebra is that of the reals.
Anything unsupported refuses the candidate: a max/min or other reducer, a tuple op or an
overridden tensor reached by the tangent, more than ``MAX_DOWNSTREAM`` tensors reached, a
sum term that matches no known sum. A refusal means "not proved", never a wrong claim.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..arith import Analyzer, Bounds, Interval, dom_of, float_is_zero
from ..arith.extent import extent_product
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
from ..ir.tensor import ComputeOp, PlaceholderOp, Tensor
from ..ir.visit import collect_vars, post_order, rewrite, substitute
from .derivative import DifferentiationError, tangent

__all__ = ["zero_adjoints", "MAX_DOWNSTREAM", "MAX_EXPAND_DEPTH", "MAX_TERMS"]

# a candidate whose tangent reaches more tensors than this is refused (sympy is slow)
MAX_DOWNSTREAM = 8
# a sum's tangent source expanding into more products than this is refused
MAX_TERMS = 16
# ... and one with + - * / nested deeper than this
MAX_EXPAND_DEPTH = 64

# (sign, [(factor, +1 or -1)]): sign * Π factor ** power
Product = tuple[int, list[tuple[Expr, int]]]


class _Refuse(Exception):
    """The candidate leaves what the proof handles: no claim is made for it."""


def zero_adjoints(order: Sequence[Tensor], output: Tensor, needed: set[Tensor], *,
                  override: Mapping[Tensor, tuple[Sequence[Tensor], Any]] | None = None
                  ) -> dict[Tensor, str]:
    """The tensors whose adjoint is identically zero for every head, with a reason.

    Parameters
    ----------
    order : list of Tensor
        The tensors ``output`` depends on, producers first, ``output`` last (as
        ``tex.differentiate`` sorts them).
    output : Tensor
        The differentiated tensor.
    needed : set of Tensor
        The tensors on a path from ``output`` to a wanted input; only these are candidates.
    override : dict, optional
        ``differentiate``'s ``override``: an overridden tensor that the tangent of a
        candidate reaches (through its op's inputs or its override dependencies) refuses
        the candidate, since its adjoint rule is the user's.

    Returns
    -------
    dict
        ``{m: reason}`` for every compute tensor ``m`` (not ``output``) with
        ``d output / d m == 0`` proved, such as ``{T_softmax_maxelem: "d T_softmax_norm /
        d T_softmax_maxelem == 0 (the tangent vanishes at T_softmax_norm)"}``; in
        ``order``. Candidates are float single-output compute tensors in ``needed`` read
        with broadcasting by a consumer (``m[i]`` inside ``e[i, j]``).

    Example
    -------
    >>> y = tex.topi.nn.softmax(x)                 # order, needed as in differentiate
    >>> list(zero_adjoints(order, y, needed))      # [T_softmax_maxelem]
    """
    override = override or {}
    at = {t: n for n, t in enumerate(order)}

    def deps_of(t: Tensor) -> list[Tensor]:
        own = t.op.input_tensors
        extra = list(override[t][0]) if t in override else []
        return list(dict.fromkeys([*own, *extra]))

    consumers: dict[Tensor, list[Tensor]] = {}
    for t in order:
        for d in deps_of(t):
            consumers.setdefault(d, []).append(t)
    # sums a tangent's sum may be rewritten with (see _SumMatcher)
    sums = [t for t in order if _plain_sum(t) is not None]
    found: dict[Tensor, str] = {}
    for m in order:
        if m is output or m not in needed or not _is_candidate(m, consumers.get(m, [])):
            continue
        try:
            dead = _Proof(m, deps_of, override, sums).run(order[at[m] + 1:], output)
        except _Refuse:
            continue
        where = ", ".join(dead) if dead else "no float consumer carries it"
        found[m] = f"d {output.name} / d {m.name} == 0 (the tangent vanishes at {where})"
    return found


# --------------------------------------------------------------------------------------
# candidates
# --------------------------------------------------------------------------------------

def _is_candidate(m: Tensor, users: list[Tensor]) -> bool:
    """A float single-output compute tensor that some consumer reads with broadcasting
    (the read's indices leave out one of the consumer's axes: ``m[i]`` in ``e[i, j]``)."""
    op = m.op
    if not isinstance(op, ComputeOp) or op.num_outputs != 1 or not m.dtype.is_float:
        return False
    for c in users:
        cop = c.op
        if not isinstance(cop, ComputeOp):
            continue
        axes = {iv.var for iv in (*cop.axis, *cop.reduce_axis)}
        for node in post_order(*cop.body):
            if isinstance(node, TensorRead) and node.tensor is m and \
                    not axes <= set(collect_vars(*node.indices)):
                return True
    return False


def _plain_sum(t: Tensor) -> Reduce | None:
    """The body of ``t`` when it is a one-slot ``sum`` without ``init``."""
    op = t.op
    if not isinstance(op, ComputeOp) or op.num_outputs != 1 or not t.dtype.is_float:
        return None
    body = op.body[0]
    if isinstance(body, Reduce) and len(body.source) == 1 and not body.init and \
            body.combiner.is_single(Op.ADD):
        return body
    return None


# --------------------------------------------------------------------------------------
# one proof: forward tangents from m to the output
# --------------------------------------------------------------------------------------

class _Proof:
    """The tangents of one candidate's descendants (``tan[t]``: an expression over t's
    own data axes); ``run`` raises ``_Refuse`` or returns where the tangent died."""

    def __init__(self, m: Tensor, deps_of: Callable[[Tensor], list[Tensor]],
                 override: Mapping[Tensor, Any], sums: list[Tensor]) -> None:
        self.m = m
        self.deps_of = deps_of
        self.override = override
        self.sums = sums
        delta = PlaceholderOp(f"{m.name}_tangent", m.shape, m.dtype).output(0)
        self.tan: dict[Tensor, Expr] = {m: TensorRead(delta, _axis_vars(m))}
        self.walked: list[Tensor] = []  # descendants whose tangent was computed

    def run(self, later: Sequence[Tensor], output: Tensor) -> list[str]:
        dead: list[str] = []
        for t in later:
            if not any(d in self.tan for d in self.deps_of(t)):
                continue
            if not t.dtype.is_float:
                continue  # integers carry no tangent (tex's convention; reverse mode agrees)
            op = t.op
            if t in self.override or not isinstance(op, ComputeOp) or op.num_outputs != 1:
                raise _Refuse(t.name)
            if len(self.walked) >= MAX_DOWNSTREAM:
                raise _Refuse(t.name)
            self.walked.append(t)
            d = self._tangent(t)
            # a tangent can only cancel where two paths to tangent-carrying reads meet
            # (e[i, j] and s[i] in e / s, m[i] twice in exp(x - m) * exp(m)); a single
            # one, to r, gives d body/d r * tangent(r), not 0 (short of a body that
            # ignores r), so sympy is not asked there
            if d is None or (self._paths(op.body[0]) > 1 and self._vanishes(d)):
                dead.append(t.name)
                continue
            if t is output:
                raise _Refuse(t.name)  # the output moves with m (or it was not proved)
            self.tan[t] = d
        return dead

    # -- tangents ------------------------------------------------------------------------
    def _is_leaf(self, e: Expr) -> bool:
        return isinstance(e, TensorRead) and e.tensor in self.tan

    def _leaf(self, e: Expr) -> Expr:
        """The tangent of a read ``u[idx]``: u's tangent with u's axes set to ``idx``."""
        u = e.tensor  # type: ignore[attr-defined]
        d = substitute(self.tan[u], dict(zip(_axis_vars(u), e.indices)))  # type: ignore
        return fold.cast(e.dtype, d)

    def _tangent(self, t: Tensor) -> Expr | None:
        op: ComputeOp = t.op  # type: ignore[assignment]
        body = op.body[0]
        try:
            if not isinstance(body, Reduce):
                d = tangent(body, self._leaf, self._is_leaf)
                if d is None:
                    return None
                # a derivative that mentions the body reads the tensor instead (as
                # DiffBuildingBlock does): d exp(u) = exp(u) u' -> e[i, j] * u', so a sum
                # of e's tangent shows e's reads, which the sums' sources hold
                return substitute(d, {body: TensorRead(t, _axis_vars(t))})
            if len(body.source) != 1 or not body.combiner.is_single(Op.ADD):
                raise _Refuse(t.name)  # max/min/argmax/prod...: not handled
            acc = tangent(body.init[0], self._leaf, self._is_leaf) if body.init else None
            src = tangent(body.source[0], self._leaf, self._is_leaf)
        except DifferentiationError as err:
            raise _Refuse(t.name) from err
        if src is not None:
            matcher = _SumMatcher(t, body, self.sums, self._inline)
            for product in _expand(src):
                term = matcher.rewrite(product)
                acc = term if acc is None else fold.binary(Op.ADD, acc, term)
        return acc

    # -- the zero check ------------------------------------------------------------------
    def _paths(self, body: Expr) -> int:
        """The number of paths from ``body`` down to tangent-carrying reads, capped at 2."""
        count: dict[Expr, int] = {}
        for n in post_order(body):
            count[n] = 1 if self._is_leaf(n) else min(2, sum(count[c] for c in n.children()))
        return count[body]

    def _inline(self, e: Expr) -> Expr:
        """``e`` with reads of elementwise descendants replaced by their bodies, so sympy
        sees ``y = e / s`` (reads of forward tensors are otherwise independent atoms)."""
        elementwise = {t for t in self.walked if not isinstance(t.op.body[0], Reduce)}

        def fn(node: Expr) -> Expr | None:
            if isinstance(node, TensorRead) and node.tensor in elementwise:
                u = node.tensor
                body = u.op.body[0]  # type: ignore[attr-defined]
                return fold.cast(node.dtype, substitute(body, dict(zip(_axis_vars(u),
                                                                       node.indices))))
            return None

        for _ in range(len(elementwise) + 1):  # a chain of n tensors needs n passes
            new = rewrite(e, fn)
            if new is e:
                break
            e = new
        return e

    def _vanishes(self, d: Expr) -> bool:
        e = self._inline(d)
        if _plain_product(e):
            return False  # a product of atoms and exps: sympy cannot make it 0
        return float_is_zero(e) is True


def _axis_vars(t: Tensor) -> list[Expr]:
    return [iv.var for iv in t.op.axis]  # type: ignore[attr-defined]


def _plain_product(e: Expr) -> bool:
    """Whether ``e`` is a product/quotient/negation of reads, non-zero constants and exps
    (no sum anywhere outside the reads): such an expression is not identically zero as a
    function of its atoms, so asking sympy would be time wasted."""
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, TensorRead) or (isinstance(n, Unary) and n.op is Op.EXP):
            continue  # an atom; exp(x) is never 0
        if isinstance(n, Const) and n.dtype.is_float and n.value != 0:
            continue
        if isinstance(n, Binary) and n.op in (Op.MUL, Op.DIV):
            stack += [n.a, n.b]
        elif isinstance(n, Unary) and n.op is Op.NEG:
            stack.append(n.a)
        elif isinstance(n, Cast) and n.a.dtype.is_float:
            stack.append(n.a)
        else:
            return False
    return True


# --------------------------------------------------------------------------------------
# expanding a tangent source into products
# --------------------------------------------------------------------------------------

def _expand(e: Expr, depth: int = 0) -> list[Product]:
    """``e`` as a sum of signed products of its own sub-expressions (exactly: constants
    stay factors, so no rounding creeps in). Raises _Refuse past MAX_TERMS products or
    MAX_EXPAND_DEPTH nested operators (the recursion stays shallow)."""
    if depth > MAX_EXPAND_DEPTH:
        raise _Refuse("a deep tangent")
    d = depth + 1
    match e:
        case Binary(Op.ADD, a, b):
            out = _expand(a, d) + _expand(b, d)
        case Binary(Op.SUB, a, b):
            out = _expand(a, d) + [(-s, f) for s, f in _expand(b, d)]
        case Unary(Op.NEG, a):
            out = [(-s, f) for s, f in _expand(a, d)]
        case Binary(Op.MUL, a, b):
            out = [(sa * sb, fa + fb) for sa, fa in _expand(a, d) for sb, fb in _expand(b, d)]
        case Binary(Op.DIV, a, b):
            out = [(s, [*f, (b, -1)]) for s, f in _expand(a, d)]
        case _:
            out = [(1, [(e, 1)])]
    if len(out) > MAX_TERMS:
        raise _Refuse(f"{len(out)} products")
    return out


def _rebuild(sign: int, factors: list[tuple[Expr, int]], dtype: Any) -> Expr:
    """``sign * Π factor ** power`` as an expression."""
    acc: Expr = Const(1.0, dtype)
    for f, p in factors:
        acc = fold.binary(Op.MUL if p > 0 else Op.DIV, acc, f)
    return fold.unary(Op.NEG, acc) if sign < 0 else acc


# --------------------------------------------------------------------------------------
# rewriting Σ_k (outer * inner) as outer * K[idx] for a known sum K
# --------------------------------------------------------------------------------------

class _SumMatcher:
    """Rewrites the products of a sum's tangent source with known sums (R's own first)."""

    def __init__(self, r: Tensor, red: Reduce, sums: list[Tensor],
                 inline: Callable[[Expr], Expr]) -> None:
        self.r, self.red, self.inline = r, red, inline
        self.k = [iv.var for iv in red.axis]
        self.kset = set(self.k)
        self.dom = dom_of(r.op.axis)  # type: ignore[attr-defined]
        plain = _plain_sum(r)
        self.known = ([r] if plain is not None else []) + [s for s in sums if s is not r]

    def rewrite(self, product: Product) -> Expr:
        sign, factors = product
        dtype = self.r.dtype
        if not any(self._has_k(f) for f, _ in factors):
            # Σ_k c = c * |domain| (no condition to count points under)
            if not (isinstance(self.red.condition, Const) and self.red.condition.value):
                raise _Refuse(f"{self.r.name}: constant term under a condition")
            n = extent_product([iv.dom.extent for iv in self.red.axis])
            count = Const(float(n), dtype) if isinstance(n, int) else fold.cast(dtype, n)
            return fold.binary(Op.MUL, _rebuild(sign, factors, dtype), count)
        for k in self.known:
            got = self._match(k, factors)
            if got is not None:
                read, rest, k_sign = got
                return fold.binary(Op.MUL, _rebuild(sign * k_sign, rest, dtype), read)
        got = self._match_own_by_sympy(factors)
        if got is not None:
            read, rest, r_sign = got
            return fold.binary(Op.MUL, _rebuild(sign * r_sign, rest, dtype), read)
        raise _Refuse(f"{self.r.name}: a product of its tangent matches no known sum")

    def _has_k(self, e: Expr) -> bool:
        return bool(set(collect_vars(e)) & self.kset)

    def _match(self, k: Tensor, factors: list[tuple[Expr, int]]
               ) -> tuple[Expr, list[tuple[Expr, int]], int] | None:
        """``(K[idx] / Π K's constant factors, the product's other factors, K's sign)``
        when K's source, with its axes bound, is a sub-product of ``factors`` and the rest
        of ``factors`` is free of the reduce axes."""
        kred: Reduce = k.op.body[0]  # type: ignore[attr-defined]
        if len(kred.axis) != len(self.red.axis) or any(
                a.dom != b.dom for a, b in zip(kred.axis, self.red.axis)):
            return None
        single = _one_product(kred.source[0])
        if single is None or not single[2]:
            return None
        k_sign, consts, pattern = single
        axes = [iv.var for iv in k.op.axis]  # type: ignore[attr-defined]
        u = _Unifier(axes, dict(zip([iv.var for iv in kred.axis], self.k)), self.kset)
        for bind, used in u.sub_products(pattern, factors):
            if not u.unify(kred.condition, self.red.condition, bind):
                continue
            rest = [fp for n, fp in enumerate(factors) if n not in used]
            if any(self._has_k(f) for f, _ in rest):
                continue
            idx = self._indices(k, axes, bind)
            if idx is None:
                continue
            return self._divided(TensorRead(k, idx), consts), rest, k_sign
        return None

    def _indices(self, k: Tensor, axes: list[Var], bind: dict[Var, Expr]) -> list[Expr] | None:
        """K's read indices from the binding (an unused axis reads 0), within K's shape."""
        bounds = Bounds(self.dom)
        an: Analyzer | None = None
        out: list[Expr] = []
        for v, n in zip(axes, k.shape):
            ix = bind.get(v, Const(0, v.dtype))
            if isinstance(n, int):
                if not Interval(0, n - 1).contains(bounds(ix)):
                    return None
            else:  # a symbolic extent: proved on linear forms
                an = an or Analyzer(self.dom)
                if not an.within(ix, 0, n - 1):
                    return None
            out.append(ix)
        return out

    def _match_own_by_sympy(self, factors: list[tuple[Expr, int]]
                            ) -> tuple[Expr, list[tuple[Expr, int]], int] | None:
        """Like ``_match`` for R itself, the factors on the reduce axes compared with those
        of R's source by sympy after inlining (``w[i, k] * exp(x[i, k] - m[i])`` against
        ``e[i, k]``); R's source may carry constant factors, nothing else free of k."""
        if _plain_sum(self.r) is None:
            return None
        single = _one_product(self.red.source[0])
        if single is None or not all(self._has_k(f) for f, _ in single[2]):
            return None
        r_sign, consts, own = single
        inner = [fp for fp in factors if self._has_k(fp[0])]
        rest = [fp for fp in factors if not self._has_k(fp[0])]
        dtype = self.r.dtype
        diff = fold.binary(Op.SUB, _rebuild(1, inner, dtype), _rebuild(1, own, dtype))
        if float_is_zero(self.inline(diff)) is not True:
            return None
        return self._divided(TensorRead(self.r, _axis_vars(self.r)), consts), rest, r_sign

    @staticmethod
    def _divided(read: Expr, consts: list[tuple[Expr, int]]) -> Expr:
        """``K / Π consts``: K = Σ c * rest  ->  Σ rest = K / c."""
        for c, p in consts:
            read = fold.binary(Op.DIV if p > 0 else Op.MUL, read, c)
        return read


def _one_product(source: Expr) -> tuple[int, list[tuple[Expr, int]],
                                          list[tuple[Expr, int]]] | None:
    """A sum's source as one signed product: ``(sign, constant factors, other factors)``;
    None when it expands into several products, too many, or has a zero constant."""
    try:
        terms = _expand(source)
    except _Refuse:
        return None
    if len(terms) != 1:
        return None
    sign, factors = terms[0]
    consts = [(f, p) for f, p in factors if isinstance(f, Const)]
    if any(f.value == 0 for f, _ in consts):  # type: ignore[attr-defined]
        return None
    return sign, consts, [(f, p) for f, p in factors if not isinstance(f, Const)]


class _Unifier:
    """Structural matching of a known sum's source (``pattern``) against a tangent
    product: K's data axes bind to index expressions free of the reduce axes; K's reduce
    axes must meet R's, position by position."""

    def __init__(self, axes: list[Var], fixed: dict[Var, Var], reduce_vars: set[Var]) -> None:
        self.axes = set(axes)
        self.fixed = fixed
        self.reduce_vars = reduce_vars

    def unify(self, p: Expr, t: Expr, bind: dict[Var, Expr]) -> bool:
        """Whether ``p`` matches ``t``; extends ``bind`` in place (callers pass a copy)."""
        pattern_vars = self.axes | set(self.fixed)
        stack = [(p, t)]
        while stack:
            p, t = stack.pop()
            if isinstance(p, Var) and p in self.fixed:
                if self.fixed[p] is not t:
                    return False
            elif isinstance(p, Var) and p in self.axes:
                # K[idx] is read outside the sum: idx may not use the reduce axes
                if set(collect_vars(t)) & self.reduce_vars or bind.setdefault(p, t) is not t:
                    return False
            elif p is t and not set(collect_vars(p)) & pattern_vars:
                continue  # the same node, no pattern variable inside
            elif not _same_head(p, t):
                return False
            else:
                stack.extend(zip(p.children(), t.children()))
        return True

    def sub_products(self, pattern: list[tuple[Expr, int]], factors: list[tuple[Expr, int]]
                     ) -> Iterator[tuple[dict[Var, Expr], set[int]]]:
        """Each way to match every pattern factor to a distinct factor (same power):
        yields ``(binding, indices of the factors used)``."""
        def go(n: int, bind: dict[Var, Expr], used: tuple[int, ...]
               ) -> Iterator[tuple[dict[Var, Expr], set[int]]]:
            if n == len(pattern):
                yield bind, set(used)
                return
            p, pw = pattern[n]
            for j, (f, fw) in enumerate(factors):
                if j in used or fw != pw:
                    continue
                trial = dict(bind)
                if self.unify(p, f, trial):
                    yield from go(n + 1, trial, (*used, j))

        yield from go(0, {}, ())


def _same_head(p: Expr, t: Expr) -> bool:
    """Whether two nodes agree on everything but their children (leaves must be equal:
    an equal pair was already accepted, so a leaf here is a mismatch)."""
    if type(p) is not type(t) or p.dtype is not t.dtype:
        return False
    match p:
        case TensorRead():
            return p.tensor is t.tensor  # type: ignore[attr-defined]
        case Unary() | Binary() | Compare():
            return p.op is t.op  # type: ignore[attr-defined]
        case Select() | Cast():
            return True
    return False  # Const, Var, Reduce
