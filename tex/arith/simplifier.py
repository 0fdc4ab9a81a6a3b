"""Simplification and proofs: the fast rules first, sympy only where they are stuck.

``simplify(e, dom)`` rewrites ``e`` with the rule families of ``tex.arith.rules`` to a
fixed point, using interval bounds over ``dom``. What the rules cannot resolve goes to
sympy, one maximal integer/bool sub-expression at a time, and only when it holds one of:

- a product of non-constants with a sum as a factor, or an integer power (polynomial
  expansion may cancel terms: ``(i + 1)*j - i*j``);
- a comparison of non-affine operands (``i*j < 6``);
- a ``//`` or ``%`` of a sum that itself holds ``//`` or ``%`` (nested, unresolved).

Affine conditions stay with the rules: they merge the ranges of each linear part and run
Fourier-Motzkin across parts (``i < j && j < k && k < i -> False``), in microseconds, where
sympy's relational logic takes hundreds of milliseconds per chain.

The sympy result is converted back, run through the rules again, and kept only where it has
fewer nodes. ``prove(c, dom)`` does the same for a condition: rules and bounds first, then,
for each non-affine comparison left undecided, sympy (``solveset`` over a finite range for
one variable, else the sign sympy's assumptions give ``lhs - rhs``), combined through
``&&``/``||``/``!`` in three-valued logic.

Both are exact: the result equals the input at every point of the domain (the rules assume
that int32/int64 index arithmetic does not overflow). Sympy work is bounded by size
(``SYMPY_MAX_NODES``) and memoized in ``tex.arith.sympy_bridge``; pass ``use_sympy=False``
where speed matters more than the rare extra simplification.
"""
from __future__ import annotations

from typing import Any

from ..ir.expr import Binary, Compare, Const, Expr, IterVar, Op, Reduce, Unary, Var, as_expr
from ..ir.visit import post_order, substitute
from .bounds import DomainLike, Interval, dom_of, normalize_dom
from .linear import is_index_dtype
from .logic_rules import chain_operands
from .rules import Analyzer
from .sympy_bridge import is_structural, sympy_prove, sympy_simplify

__all__ = ["simplify", "prove", "can_prove", "node_count", "SYMPY_MAX_NODES"]

# sub-expressions larger than this never go to sympy (its simplify can take seconds)
SYMPY_MAX_NODES = 30
# conditions larger than this are not split into parts for sympy by prove
_PROVE_MAX_NODES = 200


def node_count(expr: Expr) -> int:
    """The number of distinct nodes (the size of the expression DAG)."""
    return sum(1 for _ in post_order(expr))


def _domain(expr: Expr, dom: DomainLike) -> dict[Var, Interval]:
    """``dom`` plus the axes of the reductions inside ``expr`` (each axis is its own,
    unique variable, so its range holds wherever it occurs)."""
    d = normalize_dom(dom)
    axes: list[IterVar] = []
    for n in post_order(expr):
        if isinstance(n, Reduce):
            axes.extend(iv for iv in n.axis if iv.var not in d)
    if axes:
        d = {**dom_of(axes), **d}
    return d


def _check_use_sympy(value: Any, where: str) -> None:
    # bool("no") is True: a switch must be a bool, never read through truthiness
    if not isinstance(value, bool):
        raise TypeError(f"{where}: use_sympy must be a bool (True or False), got "
                        f"{type(value).__name__} {value!r}")


def simplify(expr: Any, dom: DomainLike = None, *, use_sympy: bool = True) -> Expr:
    """An equivalent, simpler expression.

    Parameters
    ----------
    expr : Expr
        Any expression; integer index arithmetic and conditions get the full rules, float
        arithmetic only exact ones (constant folding, no reassociation).
    dom : mapping or list, optional
        Variable domains: ``{Var | IterVar: Interval | Range | IterVar}`` or a list of
        IterVars. Reduction axes inside ``expr`` are added automatically.
    use_sympy : bool
        Try sympy on what the rules leave unresolved (see the module docstring).

    Returns
    -------
    Expr
        Equal to ``expr`` at every point of the domain, with the same dtype.

    Example
    -------
    >>> i, j = tex.var("i"), tex.var("j")
    >>> str(simplify((i*4 + j) // 4, {i: Interval(0, 9), j: Interval(0, 3)}))
    'i'
    """
    e = as_expr(expr, "simplify")
    _check_use_sympy(use_sympy, "simplify")
    an = Analyzer(_domain(e, dom))
    fast = an.rewrite(e)
    if not use_sympy:
        return fast
    return _sympy_pass(fast, an)


def prove(cond: Any, dom: DomainLike = None, *, use_sympy: bool = True) -> bool | None:
    """Whether a condition holds everywhere on the domain.

    Returns True if ``cond`` is provably true at every point, False if provably false at
    every point, None when neither could be shown (it may hold at some points only).
    The rules and bounds decide first; with ``use_sympy``, the comparisons they leave
    undecided that are non-affine go to sympy one by one, and ``&&``, ``||``, ``!``
    combine the verdicts (three-valued: an unknown part makes the whole unknown unless
    another part decides it).

    Raises
    ------
    TypeError
        If ``cond`` is not a bool expression.
    """
    c = as_expr(cond, "prove")
    _check_use_sympy(use_sympy, "prove")
    if not c.dtype.is_bool:
        raise TypeError(f"prove: expected a bool condition, got '{c}' of dtype {c.dtype}; "
                        "compare it first (e.g. x != 0)")
    an = Analyzer(_domain(c, dom))
    s = an.rewrite(c)
    if isinstance(s, Const):
        return bool(s.value)
    if not use_sympy or node_count(s) > _PROVE_MAX_NODES:
        return None
    return _prove_parts(s, an)


def _prove_parts(cond: Expr, an: Analyzer) -> bool | None:
    """Three-valued verdict of a condition the rules left undecided."""
    match cond:
        case Binary(Op.AND | Op.OR as op, _, _):
            verdicts = [_prove_parts(e, an) for e in chain_operands(cond, op)]
            decisive = op is Op.OR  # True decides ||, False decides &&
            if decisive in verdicts:
                return decisive
            return (not decisive) if all(v is not None for v in verdicts) else None
        case Unary(Op.NOT, a):
            verdict = _prove_parts(a, an)
            return None if verdict is None else not verdict
        case Compare() if _worth_proving(cond, an):
            try:
                return sympy_prove(cond, an.dom)
            except (TypeError, NotImplementedError, ValueError):  # not convertible
                return None
    return None


def can_prove(cond: Any, dom: DomainLike = None, *, use_sympy: bool = True) -> bool:
    """Whether ``cond`` is provably true everywhere on the domain."""
    return prove(cond, dom, use_sympy=use_sympy) is True


# --------------------------------------------------------------------------------------
# deciding what goes to sympy
# --------------------------------------------------------------------------------------

def _is_sum(e: Expr) -> bool:
    return (isinstance(e, Binary) and e.op in (Op.ADD, Op.SUB)) or \
        (isinstance(e, Unary) and e.op is Op.NEG)


def _is_product(e: Expr) -> bool:
    """A product of two non-constants."""
    return isinstance(e, Binary) and e.op is Op.MUL and e.dtype.is_int and \
        not isinstance(e.a, Const) and not isinstance(e.b, Const)


def _triggers(node: Expr, nonaffine: dict[Expr, bool], divmod_in: dict[Expr, bool]) -> bool:
    """Whether ``node`` itself is something the rules leave to sympy."""
    match node:
        case Binary(Op.MUL, a, b) if _is_product(node):
            return _is_sum(a) or _is_sum(b)
        case Binary(Op.POW) if node.dtype.is_int:
            return True
        case Compare(_, a, b) if a.dtype.is_int:
            return nonaffine[a] or nonaffine[b]
        case Binary(Op.FLOORDIV | Op.FLOORMOD, a, _):
            return _is_sum(a) and divmod_in[a]
    return False


class _Scan:
    """Per node, for the sympy fallback: whether it converts structurally (``ok``),
    whether it or a structural descendant triggers sympy (``want``), whether anything
    below wants it (``below``), and its structural size (capped)."""

    def __init__(self, expr: Expr) -> None:
        self.ok: dict[Expr, bool] = {}
        self.want: dict[Expr, bool] = {}
        self.below: dict[Expr, bool] = {}
        self.size: dict[Expr, int] = {}
        nonaffine: dict[Expr, bool] = {}
        divmod_in: dict[Expr, bool] = {}
        cap = SYMPY_MAX_NODES + 1
        for n in post_order(expr):
            kids = n.children()
            ok = self.ok[n] = n.dtype.is_integral and is_structural(n)
            inner = [k for k in kids if self.ok[k]] if ok else []
            self.size[n] = min(cap, 1 + sum(self.size[k] if self.ok[k] else 1 for k in kids))
            nonaffine[n] = _is_product(n) or any(nonaffine[k] for k in inner)
            divmod_in[n] = (isinstance(n, Binary) and n.op in (Op.FLOORDIV, Op.FLOORMOD)) \
                or any(divmod_in[k] for k in inner)
            self.want[n] = ok and (any(self.want[k] for k in inner) or
                                   _triggers(n, nonaffine, divmod_in))
            self.below[n] = self.want[n] or any(self.below[k] for k in kids)


def _sympy_pass(fast: Expr, an: Analyzer) -> Expr:
    """Send the maximal sub-expressions that want sympy there; keep smaller results."""
    scan = _Scan(fast)
    if not scan.below[fast]:
        return fast
    candidates: list[Expr] = []
    stack = [fast]
    seen: set[Expr] = set()
    while stack:  # top-down: the largest structural sub-expressions that want sympy
        n = stack.pop()
        if n in seen or not scan.below[n]:
            continue
        seen.add(n)
        if scan.want[n] and scan.size[n] <= SYMPY_MAX_NODES:
            candidates.append(n)
        else:
            stack.extend(n.children())
    mapping: dict[Expr, Expr] = {}
    for cand in candidates:
        try:
            alt = sympy_simplify(cand, an.dom)
        except (TypeError, NotImplementedError, ValueError):  # no exact tex form
            continue
        alt = an.rewrite(alt)
        if alt.dtype is cand.dtype and node_count(alt) < node_count(cand):
            mapping[cand] = alt
    if not mapping:
        return fast
    out = an.rewrite(substitute(fast, mapping))
    return out if node_count(out) < node_count(fast) else fast


def _worth_proving(cmp: Compare, an: Analyzer) -> bool:
    """Whether sympy might decide a comparison the bounds could not.

    Bounds decide an inequality between affine functions of distinct variables exactly
    (its extremes lie at corners of the domain box), so sympy is only asked about small
    comparisons with a product, ``//`` or ``%`` among their atoms.
    """
    if not (is_index_dtype(cmp.a.dtype) and node_count(cmp) <= SYMPY_MAX_NODES):
        return False
    con = an.compare_constraint(cmp)
    return not isinstance(con, bool) and any(
        isinstance(t, Binary) and is_structural(t) for t in con.part.terms)
