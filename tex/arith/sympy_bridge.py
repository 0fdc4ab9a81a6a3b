"""The bridge between tex integer/bool expressions and sympy, and sympy as the fallback of
``simplify``/``prove`` (with ``sympy_float.py``, the only sympy imports in tex).

Conversion table (``to_sympy``; ``from_sympy`` inverts it):

    Var i                 Symbol("i", integer=True[, nonnegative/positive... from the domain])
    a + b, a - b, a * b   Add, Mul            -a        -a
    a // b                floor(a / b)        a % b     Mod(a, b)   (Python signs, as tex)
    a / b  (truncating)   Piecewise((floor(a/b), a*b >= 0), (ceiling(a/b), True))
    min, max, abs         Min, Max, Abs       a ** k    Pow (constant k >= 0)
    a < b ...             StrictLessThan ...  &&, ||, ! And, Or, Not
    select(c, a, b)       Piecewise((a, c), (b, True))  (ITE for bool branches)
    int64(a), int32(a)    a (index arithmetic does not overflow); bool -> int: Piecewise;
                          int8/int16/uint8 arithmetic and casts that may wrap: refused
    T[i, j], reductions   an opaque integer Symbol named after the printed node
                          (as is any node a bridge's ``opaque`` predicate selects)

Invariants:

- ``to_sympy``: only integer and bool expressions convert; a float node raises TypeError
  naming it, an operator without a sympy meaning (e.g. ``x ** y`` with a variable
  exponent) raises NotImplementedError naming the operator. ``from_sympy`` converts
  ``floor(p/q)`` back to ``p // q``, ``Mod`` to ``%``, ``Piecewise`` to nested ``select``;
  a non-integer rational outside a floor raises NotImplementedError (never rounded
  silently).
- Distinct variables are distinct symbols even when they share a name: a ``SympyBridge``
  names them ``i``, ``i_1``, ``i_2``... in the order it meets them, so results depend only
  on the expressions converted, never on ids or earlier calls.
- Caching: each ``SympyBridge`` holds its Var<->Symbol map and an expr->sympy memo. The
  one module-level state is ``_MEMO``, a ``weakref.WeakKeyDictionary`` keyed by interned
  nodes that memoizes the *results* of ``sympy_simplify`` and ``sympy_prove`` per domain:
  a pure memo (the same inputs always give the same result; entries die with the node).
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import Any

import sympy
from sympy.logic.boolalg import BooleanFalse, BooleanTrue

from ..dtype import DType, boolean, int32
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
from .bounds import Bounds, DomainLike, Interval, dtype_interval, normalize_dom

__all__ = ["SympyBridge", "to_sympy", "from_sympy", "sympy_simplify", "sympy_prove",
           "is_structural", "convert_post_order", "SYMPY_MAX_DEPTH", "SYMPY_BINARY",
           "SYMPY_UNARY", "SYMPY_COMPARE", "SYMPY_BOOL_COMPARE", "exact_quotient"]

SympyExpr = Any  # sympy.Basic: an integer expression or a Boolean

_MEMO: weakref.WeakKeyDictionary[Expr, dict[tuple, Any]] = weakref.WeakKeyDictionary()


def _trunc_div(a: SympyExpr, b: SympyExpr) -> SympyExpr:
    q = a / b
    return sympy.Piecewise((sympy.floor(q), a * b >= 0), (sympy.ceiling(q), True))


def _pow(a: SympyExpr, b: SympyExpr) -> SympyExpr:
    if not (b.is_Integer and b >= 0):
        raise NotImplementedError(
            f"to_sympy: integer '{Op.POW.value}' needs a constant exponent >= 0, got {b}")
    return a ** b


# one entry per integer operator; bool operators are handled on their own below
SYMPY_BINARY: dict[Op, Callable[[SympyExpr, SympyExpr], SympyExpr]] = {
    Op.ADD: lambda a, b: a + b,
    Op.SUB: lambda a, b: a - b,
    Op.MUL: lambda a, b: a * b,
    Op.FLOORDIV: lambda a, b: sympy.floor(a / b),
    Op.FLOORMOD: lambda a, b: sympy.Mod(a, b),
    Op.DIV: _trunc_div,
    Op.MIN: lambda a, b: sympy.Min(a, b),
    Op.MAX: lambda a, b: sympy.Max(a, b),
    Op.POW: _pow,
    Op.AND: lambda a, b: sympy.And(a, b),
    Op.OR: lambda a, b: sympy.Or(a, b),
}
SYMPY_UNARY: dict[Op, Callable[[SympyExpr], SympyExpr]] = {
    Op.NEG: lambda a: -a,
    Op.ABS: lambda a: sympy.Abs(a),
    Op.NOT: lambda a: sympy.Not(a),
    # rounding is the identity on integers
    Op.FLOOR: lambda a: a,
    Op.CEIL: lambda a: a,
    Op.ROUND: lambda a: a,
    Op.TRUNC: lambda a: a,
}
SYMPY_COMPARE: dict[Op, Callable[[SympyExpr, SympyExpr], SympyExpr]] = {
    Op.LT: lambda a, b: sympy.Lt(a, b),
    Op.LE: lambda a, b: sympy.Le(a, b),
    Op.GT: lambda a, b: sympy.Gt(a, b),
    Op.GE: lambda a, b: sympy.Ge(a, b),
    Op.EQ: lambda a, b: sympy.Eq(a, b),
    Op.NE: lambda a, b: sympy.Ne(a, b),
}
# comparisons of two booleans (False < True)
SYMPY_BOOL_COMPARE: dict[Op, Callable[[SympyExpr, SympyExpr], SympyExpr]] = {
    Op.LT: lambda a, b: sympy.And(sympy.Not(a), b),
    Op.LE: lambda a, b: sympy.Or(sympy.Not(a), b),
    Op.GT: lambda a, b: sympy.And(a, sympy.Not(b)),
    Op.GE: lambda a, b: sympy.Or(a, sympy.Not(b)),
    Op.EQ: lambda a, b: sympy.Equivalent(a, b),
    Op.NE: lambda a, b: sympy.Xor(a, b),
}


def _wraps(dtype: DType) -> bool:
    """Integer dtypes whose arithmetic wraps around in practice (int8, int16, uint8); int32
    and int64 index arithmetic is assumed not to overflow, as everywhere in tex.arith."""
    return dtype.is_int and dtype.bits < 32


def _exact_cast(src: DType, dst: DType) -> bool:
    """Whether an integer-to-integer cast keeps every value (int32 <-> int64: by the
    no-overflow convention)."""
    if src.bits >= 32 and dst.bits >= 32 and src.kind == dst.kind == "int":
        return True
    return dtype_interval(dst).contains(dtype_interval(src))


def _assumptions(dtype: DType, iv: Interval | None) -> dict[str, bool]:
    """Sympy assumptions for a variable of this dtype ranging over ``iv``."""
    if dtype.is_bool:
        return {}
    lo = iv.lo if iv is not None else None
    hi = iv.hi if iv is not None else None
    if dtype.kind == "uint":
        lo = 0 if lo is None else max(lo, 0)
    out = {"integer": True}
    if lo is not None and lo >= 1:
        out["positive"] = True
    elif lo is not None and lo >= 0:
        out["nonnegative"] = True
    elif hi is not None and hi <= -1:
        out["negative"] = True
    elif hi is not None and hi <= 0:
        out["nonpositive"] = True
    return out


def is_structural(node: Expr) -> bool:
    """Whether the sympy fallback converts ``node`` operator by operator.

    The fallback (``sympy_simplify``/``sympy_prove``) turns every other integer or bool
    node into an opaque symbol: sympy's Piecewise/Min/Max reasoning is slow and rarely
    beats the rules, while polynomial and floor/Mod algebra over atoms is where it helps.
    """
    match node:
        case Const() | Var():
            return True
        case Binary() | Unary() if _wraps(node.dtype):
            return False  # int8/int16/uint8 arithmetic wraps: keep it opaque
        case Binary(op, _, b):
            if op in (Op.ADD, Op.SUB, Op.MUL, Op.AND, Op.OR):
                return True
            if op in (Op.FLOORDIV, Op.FLOORMOD):
                return isinstance(b, Const) and b.value != 0
            return op is Op.POW and isinstance(b, Const) and b.value >= 0
        case Unary(op, _):
            return op in (Op.NEG, Op.NOT)
        case Compare(_, a, _):
            return a.dtype.is_integral
    return False


def convert_post_order(expr: Expr, memo: dict[Expr, SympyExpr],
                        is_atom: Callable[[Expr], bool],
                        convert: Callable[[Expr], SympyExpr],
                        check: Callable[[Expr], None] | None = None) -> SympyExpr:
    """``convert`` every node of ``expr`` children first, memoized in ``memo``, without
    entering atoms: an explicit stack, so deep expressions do not hit the recursion limit.
    An expression more than ``SYMPY_MAX_DEPTH`` operators deep is refused
    (``NotImplementedError``) before sympy sees it: sympy builds, evaluates and simplifies
    its expressions recursively, a few Python frames per level."""
    if expr in memo:
        return memo[expr]
    _check_depth(expr, memo, is_atom)
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, ready = stack.pop()
        if node in memo:
            continue
        if check is not None:
            check(node)
        kids = () if is_atom(node) else node.children()
        if not ready and any(k not in memo for k in kids):
            stack.append((node, True))
            stack.extend((k, False) for k in reversed(kids) if k not in memo)
            continue
        memo[node] = convert(node)
    return memo[expr]


# expressions deeper than this (in operators, atoms not counted) never go to sympy
SYMPY_MAX_DEPTH = 48


def _check_depth(expr: Expr, memo: Mapping[Expr, SympyExpr],
                 is_atom: Callable[[Expr], bool]) -> None:
    depth: dict[Expr, int] = {}
    for node in post_order(expr):
        if node in memo or is_atom(node):
            depth[node] = 0  # converted nodes were checked when they were converted
            continue
        d = 1 + max((depth.get(k, 0) for k in node.children()), default=0)
        if d > SYMPY_MAX_DEPTH:
            raise NotImplementedError(
                f"sympy: the expression is more than {SYMPY_MAX_DEPTH} operators deep "
                "(sympy recurses once per level); not converted")
        depth[node] = d


class SympyBridge:
    """Converts between tex and sympy with one consistent Var <-> Symbol map.

    Parameters
    ----------
    dom : mapping or list, optional
        Variable domains (as for ``tex.arith.bounds``); their signs become symbol
        assumptions (``i`` in ``[0, n)`` is a nonnegative integer symbol).
    opaque : callable, optional
        ``opaque(node) -> bool``: integer/bool nodes to convert as opaque symbols (their
        children are not looked at). Tensor reads and reductions always are.
    atom_bounds : callable, optional
        ``atom_bounds(node) -> Interval`` for the sign assumptions of opaque symbols.
    """

    def __init__(self, dom: DomainLike = None, *,
                 opaque: Callable[[Expr], bool] | None = None,
                 atom_bounds: Callable[[Expr], Interval] | None = None) -> None:
        self.dom: dict[Var, Interval] = normalize_dom(dom)
        self._opaque = opaque
        self._atom_bounds = atom_bounds
        self._to_symbol: dict[Expr, sympy.Symbol] = {}
        self.symbols: dict[sympy.Symbol, Expr] = {}  # Symbol -> Var or opaque atom
        self._names: set[str] = set()
        self._memo: dict[Expr, SympyExpr] = {}

    def symbol(self, atom: Expr) -> sympy.Symbol:
        """The symbol standing for a variable or an opaque atom (made on first use)."""
        sym = self._to_symbol.get(atom)
        if sym is not None:
            return sym
        base = atom.name if isinstance(atom, Var) else str(atom)
        name, n = base, 0
        while name in self._names:  # distinct Vars that share a name get i, i_1, i_2...
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        if isinstance(atom, Var):
            iv = self.dom.get(atom)
            if iv is None and atom.kind == "size":
                iv = Interval(0, None)  # (a size: non-negative)
        else:
            iv = self._atom_bounds(atom) if self._atom_bounds is not None else None
        sym = sympy.Symbol(name, **_assumptions(atom.dtype, iv))
        self._to_symbol[atom] = sym
        self.symbols[sym] = atom
        return sym

    # -- tex -> sympy ---------------------------------------------------------------------
    def to_sympy(self, expr: Expr) -> SympyExpr:
        """The sympy form of an integer or bool expression (see the module docstring)."""
        def check(node: Expr) -> None:
            if not node.dtype.is_integral:
                raise TypeError(
                    f"to_sympy: only integer and bool expressions convert, but '{node}' is "
                    f"{node.dtype}")
        return convert_post_order(expr, self._memo, self._is_atom, self._convert, check)

    def _is_atom(self, node: Expr) -> bool:
        if isinstance(node, (Var, TensorRead, Reduce)):
            return True
        return self._opaque is not None and not isinstance(node, Const) and self._opaque(node)

    def _convert(self, node: Expr) -> SympyExpr:
        m = self._memo
        if self._is_atom(node):
            return self.symbol(node)
        match node:
            case Const(value, dtype):
                if dtype.is_bool:
                    return sympy.true if value else sympy.false
                return sympy.Integer(int(value))
            case Unary(op, a) | Binary(op, a, _) if _wraps(node.dtype) and op is not Op.NOT:
                raise NotImplementedError(
                    f"to_sympy: {node.dtype} arithmetic '{node}' wraps around on overflow; "
                    "sympy integers do not (convert int32/int64 index arithmetic only)")
            case Unary(op, a):
                fn = SYMPY_UNARY.get(op)
                if fn is None:
                    raise NotImplementedError(f"to_sympy: operator '{op.value}' has no sympy "
                                              "form for integers")
                return fn(m[a])
            case Binary(op, a, b):
                fn = SYMPY_BINARY.get(op)
                if fn is None:
                    raise NotImplementedError(f"to_sympy: operator '{op.value}' has no sympy "
                                              "form for integers")
                return fn(m[a], m[b])
            case Compare(op, a, b):
                table = SYMPY_BOOL_COMPARE if a.dtype.is_bool else SYMPY_COMPARE
                return table[op](m[a], m[b])
            case Select(c, a, b):
                if node.dtype.is_bool:
                    return sympy.ITE(m[c], m[a], m[b])
                return sympy.Piecewise((m[a], m[c]), (m[b], True))
            case Cast(dtype, a):
                if dtype.is_bool:
                    return m[a] if a.dtype.is_bool else sympy.Ne(m[a], 0)
                if a.dtype.is_bool:
                    return sympy.Piecewise((sympy.Integer(1), m[a]), (sympy.Integer(0), True))
                if not _exact_cast(a.dtype, dtype):
                    raise NotImplementedError(
                        f"to_sympy: the cast '{node}' may wrap around ({a.dtype} values do not "
                        f"all fit in {dtype}); sympy integers do not")
                return m[a]  # the value is unchanged
        raise NotImplementedError(f"to_sympy: cannot convert {type(node).__name__} '{node}'")

    # -- sympy -> tex ---------------------------------------------------------------------
    def from_sympy(self, sexpr: SympyExpr, dtype: DType | None = None) -> Expr:
        """Convert back with this bridge's symbols (see ``from_sympy``)."""
        return from_sympy(sexpr, self.symbols, dtype)


def to_sympy(expr: Expr, bridge: SympyBridge | None = None) -> SympyExpr:
    """The sympy form of an integer or bool tex expression.

    Parameters
    ----------
    expr : Expr
        Integer or bool expression.
    bridge : SympyBridge, optional
        Keeps the Var <-> Symbol map (``bridge.symbols``) for ``from_sympy``; a fresh one
        is used when omitted.

    Raises
    ------
    TypeError
        For a float sub-expression (named in the message).
    NotImplementedError
        For an operator without an integer sympy form (named in the message), or an
        expression more than ``SYMPY_MAX_DEPTH`` operators deep.
    """
    return (bridge or SympyBridge()).to_sympy(expr)


def from_sympy(sexpr: SympyExpr, symbols: Mapping[sympy.Symbol, Expr],
               dtype: DType | None = None) -> Expr:
    """A tex expression for a sympy integer expression or Boolean.

    Parameters
    ----------
    sexpr : sympy expression
        Built from integers, the symbols in ``symbols``, ``+ - *``, non-negative integer
        powers, ``floor``/``ceiling`` of quotients, ``Mod``, ``Min``/``Max``, ``Abs``,
        ``Piecewise``/``ITE``, relationals and ``And``/``Or``/``Not``/``Xor``/
        ``Equivalent``/``Implies``.
    symbols : mapping
        Each sympy Symbol to the tex variable (or atom) it stands for.
    dtype : DType, optional
        The dtype of integer literals (default: the dtype of the first mapped integer
        symbol, by name, or int32).

    Raises
    ------
    ValueError
        For a symbol missing from ``symbols``.
    NotImplementedError
        For a non-integer rational or an unsupported sympy function (named).
    """
    sexpr = sympy.sympify(sexpr)
    if dtype is None or not dtype.is_int:
        syms = sorted((s for s in sexpr.free_symbols if s in symbols), key=lambda s: s.name)
        dtype = next((symbols[s].dtype for s in syms if not symbols[s].dtype.is_bool), int32)
    return _FromSympy(symbols, dtype).convert(sexpr)


class _FromSympy:
    """One from_sympy conversion (recursive: sympy trees from simplification are shallow)."""

    def __init__(self, symbols: Mapping[sympy.Symbol, Expr], dtype: DType) -> None:
        self.symbols = symbols
        self.dtype = dtype
        self.memo: dict[SympyExpr, Expr] = {}

    def convert(self, e: SympyExpr) -> Expr:
        hit = self.memo.get(e)
        if hit is None:
            hit = self.memo[e] = self._convert(e)
        return hit

    def _int(self, v: int) -> Const:
        return Const(v, self.dtype)

    def _convert(self, e: SympyExpr) -> Expr:
        if e is True or e is False:
            return Const(e, boolean)
        for cls in type(e).__mro__:  # the most specific sympy class with a rule
            rule = _FROM_SYMPY.get(cls)
            if rule is not None:
                return rule(self, e)
        raise NotImplementedError(f"from_sympy: sympy {type(e).__name__} ({e}) has no tex "
                                  "form")

    def _symbol(self, e: SympyExpr) -> Expr:
        if e not in self.symbols:
            raise ValueError(f"from_sympy: symbol {e} is not in the symbol map "
                             f"({', '.join(sorted(s.name for s in self.symbols))})")
        return self.symbols[e]

    def _rational(self, e: SympyExpr) -> Expr:
        raise NotImplementedError(f"from_sympy: non-integer rational {e} has no exact "
                                  "integer form")

    def _mul(self, e: SympyExpr) -> Expr:
        coef, rest = e.as_coeff_Mul()
        if not coef.is_Integer:
            raise NotImplementedError(f"from_sympy: {e} has the non-integer coefficient "
                                      f"{coef}")
        out = self._product(sympy.Mul.make_args(rest))
        if coef == -1:
            return fold.unary(Op.NEG, out)
        return out if coef == 1 else fold.binary(Op.MUL, out, int(coef))

    def _pow(self, e: SympyExpr) -> Expr:
        base, k = e.args
        if not (k.is_Integer and k >= 0):
            raise NotImplementedError(f"from_sympy: power {e} needs a constant exponent "
                                      ">= 0")
        return self._product([base] * int(k)) if k > 0 else self._int(1)

    def _floor_or_ceiling(self, e: SympyExpr) -> Expr:
        c = self.convert
        num, den = sympy.fraction(sympy.together(e.args[0]))
        if den.is_Number and den < 0:
            num, den = -num, -den
        if den == 1:
            return c(num)  # floor of an integer
        if isinstance(e, sympy.floor):
            return fold.binary(Op.FLOORDIV, c(num), c(den))
        # ceiling(p/q) == -((-p) // q)
        return fold.unary(Op.NEG, fold.binary(Op.FLOORDIV, c(-num), c(den)))

    def _min_max(self, e: SympyExpr) -> Expr:
        op = Op.MIN if isinstance(e, sympy.Min) else Op.MAX
        args = sorted(e.args, key=sympy.default_sort_key)
        out = self.convert(args[0])
        for a in args[1:]:
            out = fold.binary(op, out, self.convert(a))
        return out

    def _piecewise(self, e: SympyExpr) -> Expr:
        c = self.convert
        pieces = list(e.args)
        if pieces[-1].cond is not sympy.true:
            raise NotImplementedError(f"from_sympy: Piecewise {e} is undefined where no "
                                      "condition holds")
        out = c(pieces[-1].expr)
        for p in reversed(pieces[:-1]):
            out = fold.select(c(p.cond), c(p.expr), out)
        return out

    def _relational(self, e: SympyExpr) -> Expr:
        lhs, rhs = e.lhs, e.rhs
        if _has_fraction(lhs) or _has_fraction(rhs):
            # sympy divides relations through (2*i < j -> i < j/2): multiply back by the
            # positive common denominator, which keeps the direction
            num, den = sympy.fraction(sympy.together(lhs - rhs))
            if not (den.is_Integer and den > 0):
                raise NotImplementedError(f"from_sympy: {e} has no exact integer form")
            lhs, rhs = num, sympy.Integer(0)
        return fold.compare(_RELATIONAL[type(e)], self.convert(lhs), self.convert(rhs))

    def _and_or(self, e: SympyExpr) -> Expr:
        op = Op.AND if isinstance(e, sympy.And) else Op.OR
        args = [self.convert(a) for a in e.args]
        out = args[0]
        for a in args[1:]:
            out = fold.binary(op, out, a)
        return out

    def _xor(self, e: SympyExpr) -> Expr:
        out = self.convert(e.args[0])
        for a in e.args[1:]:
            b = self.convert(a)
            out = fold.binary(Op.OR, fold.binary(Op.AND, out, fold.logical_not(b)),
                              fold.binary(Op.AND, fold.logical_not(out), b))
        return out

    def _equivalent(self, e: SympyExpr) -> Expr:
        args = [self.convert(a) for a in e.args]
        every = args[0]
        none = fold.logical_not(args[0])
        for a in args[1:]:
            every = fold.binary(Op.AND, every, a)
            none = fold.binary(Op.AND, none, fold.logical_not(a))
        return fold.binary(Op.OR, every, none)

    def _sum(self, args: tuple) -> Expr:
        # positive terms first, then negative ones, constants last, as tex prints them
        args = sorted(args, key=lambda a: (bool(a.is_Number), bool(a.could_extract_minus_sign())))
        out = self.convert(args[0])
        for a in args[1:]:
            coef, rest = a.as_coeff_Mul()
            if coef.is_Number and coef < 0:  # x + (-2)*y -> x - y*2
                out = fold.binary(Op.SUB, out, self.convert(-a))
            else:
                out = fold.binary(Op.ADD, out, self.convert(a))
        return out

    def _product(self, args: Any) -> Expr:
        args = list(args)
        out = self.convert(args[0])
        for a in args[1:]:
            out = fold.binary(Op.MUL, out, self.convert(a))
        return out


def _has_fraction(e: SympyExpr) -> bool:
    """Whether a non-integer rational occurs outside floor/ceiling."""
    if isinstance(e, sympy.Rational):
        return not e.is_Integer
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        return False
    return any(_has_fraction(a) for a in e.args)


_RELATIONAL: dict[type, Op] = {
    sympy.StrictLessThan: Op.LT, sympy.LessThan: Op.LE, sympy.StrictGreaterThan: Op.GT,
    sympy.GreaterThan: Op.GE, sympy.Equality: Op.EQ, sympy.Unequality: Op.NE,
}

# sympy class -> its conversion to tex (the most specific class of a node's MRO wins)
_FROM_SYMPY: dict[type, Callable[[_FromSympy, Any], Expr]] = {
    BooleanTrue: lambda fs, e: Const(True, boolean),
    BooleanFalse: lambda fs, e: Const(False, boolean),
    sympy.Symbol: _FromSympy._symbol,
    sympy.Integer: lambda fs, e: fs._int(int(e)),
    sympy.Rational: _FromSympy._rational,
    sympy.Add: lambda fs, e: fs._sum(e.args),
    sympy.Mul: _FromSympy._mul,
    sympy.Pow: _FromSympy._pow,
    sympy.floor: _FromSympy._floor_or_ceiling,
    sympy.ceiling: _FromSympy._floor_or_ceiling,
    sympy.Mod: lambda fs, e: fold.binary(Op.FLOORMOD, fs.convert(e.args[0]),
                                         fs.convert(e.args[1])),
    sympy.Min: _FromSympy._min_max,
    sympy.Max: _FromSympy._min_max,
    sympy.Abs: lambda fs, e: fold.unary(Op.ABS, fs.convert(e.args[0])),
    sympy.Piecewise: _FromSympy._piecewise,
    sympy.ITE: lambda fs, e: fold.select(*(fs.convert(a) for a in e.args)),
    **{rel: _FromSympy._relational for rel in _RELATIONAL},
    sympy.And: _FromSympy._and_or,
    sympy.Or: _FromSympy._and_or,
    sympy.Not: lambda fs, e: fold.logical_not(fs.convert(e.args[0])),
    sympy.Xor: _FromSympy._xor,
    sympy.Equivalent: _FromSympy._equivalent,
    sympy.Implies: lambda fs, e: fold.binary(Op.OR, fold.logical_not(fs.convert(e.args[0])),
                                             fs.convert(e.args[1])),
}


# --------------------------------------------------------------------------------------
# sympy as a fallback for tex.arith.simplify / prove (memoized in _MEMO)
# --------------------------------------------------------------------------------------

def _dom_key(expr: Expr, dom: Mapping[Var, Interval]) -> tuple:
    """The part of ``dom`` that ``expr`` depends on, as a hashable key."""
    return tuple((v, dom[v].lo, dom[v].hi) for v in post_order(expr)
                 if isinstance(v, Var) and v in dom)


def _memoized(kind: str, expr: Expr, dom: Mapping[Var, Interval],
              compute: Callable[[], Any]) -> Any:
    key = (kind, _dom_key(expr, dom))
    table = _MEMO.get(expr)
    if table is not None and key in table:
        out = table[key]
        return expr if out is _SELF else out
    out = compute()
    # an entry whose value held its own key would never be collected: store a marker for
    # the key itself, and nothing when the key is a strict sub-term of the value
    if out is expr:
        _MEMO.setdefault(expr, {})[key] = _SELF
    elif not (isinstance(out, Expr) and any(n is expr for n in post_order(out))):
        _MEMO.setdefault(expr, {})[key] = out
    return out


_SELF = object()


def _fallback_bridge(dom: dict[Var, Interval]) -> SympyBridge:
    """A bridge converting only ``is_structural`` nodes; the rest are opaque symbols with
    sign assumptions from their bounds."""
    b = Bounds(dom)
    return SympyBridge(dom, opaque=lambda n: not is_structural(n), atom_bounds=b)


def sympy_simplify(expr: Expr, dom: DomainLike = None) -> Expr:
    """``expr`` simplified by ``sympy.simplify`` with assumptions from ``dom``, converted
    back (same dtype). Only ``is_structural`` nodes are converted; others are opaque.
    Raises TypeError/NotImplementedError where conversion fails."""
    d = normalize_dom(dom)

    def compute() -> Expr:
        bridge = _fallback_bridge(d)
        s = bridge.to_sympy(expr)
        literals = expr.dtype if expr.dtype.is_int else None
        out = bridge.from_sympy(sympy.simplify(s), literals)
        return out if out.dtype is expr.dtype else fold.cast(expr.dtype, out)

    return _memoized("simplify", expr, d, compute)


def sympy_prove(cond: Expr, dom: DomainLike = None) -> bool | None:
    """Decide a bool expression with sympy: True/False when proved, None when unknown.

    A comparison on one variable with a finite domain is solved exactly with ``solveset``
    over that integer range; otherwise a comparison is decided when sympy's assumptions
    (signs from the domain) fix the sign of ``lhs - rhs``. Only ``is_structural`` nodes
    are converted.
    """
    d = normalize_dom(dom)

    def compute() -> bool | None:
        bridge = _fallback_bridge(d)
        s = bridge.to_sympy(cond)
        if s is sympy.true or s is sympy.false:
            return bool(s)
        if not isinstance(s, sympy.Rel):
            return None
        free = list(s.free_symbols)
        if len(free) == 1:
            atom = bridge.symbols[free[0]]
            iv = d.get(atom) if isinstance(atom, Var) else None
            if iv is not None and iv.lo is not None and iv.hi is not None:
                decided = _solve_on_range(s, free[0], iv.lo, iv.hi)
                if decided is not None:
                    return decided
        return _decide_by_sign(s)

    return _memoized("prove", cond, d, compute)


def _solve_on_range(rel: SympyExpr, sym: sympy.Symbol, lo: int, hi: int) -> bool | None:
    """Whether ``rel`` holds on all / none of the integers ``lo..hi``."""
    full = sympy.Range(lo, hi + 1)
    try:
        sol = sympy.solveset(rel, sym, full)
        rest = sympy.Complement(full, sol)
    except Exception:  # sympy's solvers raise many kinds; nothing was proved
        return None
    if sol is sympy.S.EmptySet:
        return False
    if rest is sympy.S.EmptySet:
        return True
    return None


# (holds if lhs - rhs is ..., fails if lhs - rhs is ...) as sympy assumption names
_SIGN_TESTS: dict[type, tuple[str, str]] = {
    sympy.StrictLessThan: ("is_negative", "is_nonnegative"),
    sympy.LessThan: ("is_nonpositive", "is_positive"),
    sympy.StrictGreaterThan: ("is_positive", "is_nonpositive"),
    sympy.GreaterThan: ("is_nonnegative", "is_negative"),
    sympy.Equality: ("is_zero", "is_nonzero"),
    sympy.Unequality: ("is_nonzero", "is_zero"),
}


def _decide_by_sign(rel: SympyExpr) -> bool | None:
    """Decide a relational from the sign sympy's assumptions give ``lhs - rhs``."""
    tests = _SIGN_TESTS.get(type(rel))
    if tests is None:
        return None
    diff = sympy.expand(rel.lhs - rel.rhs)
    if getattr(diff, tests[0]) is True:
        return True
    if getattr(diff, tests[1]) is True:
        return False
    return None


def exact_quotient(a: Expr, b: Expr) -> Expr | None:
    """``a / b`` when it is a polynomial with integer coefficients in the variables (``8*n``
    over ``n`` is ``8``), else None: how ``reshape`` infers a ``-1`` extent of a symbolic
    shape. The quotient is exact wherever ``b`` is not 0."""
    bridge = SympyBridge()
    try:
        q = sympy.cancel(to_sympy(a, bridge) / to_sympy(b, bridge))
    except (TypeError, ValueError):
        return None
    num, den = sympy.fraction(q)
    gens = list(bridge.symbols)
    if den != 1 or (gens and not num.is_polynomial(*gens)):
        return None
    coeffs = sympy.Poly(num, *gens).coeffs() if gens else [num]
    if not all(c.is_integer for c in coeffs):
        return None
    return from_sympy(num, bridge.symbols, a.dtype)
