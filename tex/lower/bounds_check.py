"""Read bounds of a stage: proven, refused at build time, or checked when the kernel runs.

``lower`` asks ``ReadChecker.analyze`` about every stage: its own body over its own
domain (inlined stages too), then, for stages that are not inlined, the body with the
inlined stages expanded (over the stage's root domains: the schedule's splits and their
remainder guards play no part). Each read ``A[i0, .., ik]`` is classified dimension by
dimension, with its *guards* (the ``if_then_else`` branches and reduction ``where=``
around it; ``&&``/``||`` do not guard, as in ``tex.testing.evaluate``):

- **in bounds** when interval bounds (``tex.arith``) put the index inside ``[0, n)``; the
  guards' conjuncts that compare a loop variable, the index or one of its sub-terms with
  constants narrow the range (``select(i >= 1, A[i - 1], 0)``; ``select(I[i] < 4, A[I[i]],
  0)`` keeps a check of ``I[i] >= 0`` only). Or, when the index and its guards use loop
  variables only (no tensor read, no scalar argument) over at most ``EXACT_POINTS``
  points, when the index evaluated on that grid (NumPy, ``tex.ir.semantics``) is inside
  wherever the guards hold.
- **refused** (``ValueError`` naming the stage, the tensor, the dimension and the index
  range against the valid one) when that evaluation finds an active point out of bounds,
  or when the read is unguarded and its index is an affine function of bounded loop
  variables whose interval (then exact) leaves ``[0, n)``.
- **checked at run time** otherwise: indices read from data or computed from scalar
  arguments, and the rare static index neither decided nor small enough to evaluate.

A checked read becomes ``select(0 <= ix && ix < n, A[..], report)`` for each checked
dimension, where ``report`` is a read of a ``BoundsReportOp`` tensor at the index. The code
generators evaluate a select's sides lazily when a side may fault, so ``A`` is read only
in bounds; the report records the first violation (check, index value) in the kernel's
error slot and yields 0. A read of an inlined stage disappears when it is inlined: its
checks wrap the inlined value instead (``wrap_inlined``, the ``Inliner`` hook).
``strip_checks`` takes the checks out again (``build(..., bounds_check=False)``).

A checked index whose interval leaves the int32 range (``i + n`` with a scalar ``n``,
``I[i] * 4``) is checked and reported in int64 (``wide_index``): computed in int32 it could
wrap and pass the check at a wrong element, or report a wrapped value. The read itself
keeps the int32 index when only ``+``, ``-`` and ``*`` compute it (wrapping is modular:
where the wide value is in bounds the narrow one equals it), else reads at the int64 index.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..arith import Analyzer, Bounds, Interval, dom_of
from ..arith.bounds import extent_facts
from ..arith.linear import AS_LE, LinearForm
from ..dtype import DTYPES, DType, boolean
from ..ir import fold
from ..ir.expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    IterVar,
    Op,
    Range,
    Reduce,
    Select,
    TensorRead,
    Unary,
    Var,
)
from ..ir.semantics import NUMPY_BINARY, NUMPY_UNARY
from ..ir.tensor import ComputeOp, PlaceholderOp, Tensor
from ..ir.visit import post_order, rewrite, topo_sort_ops
from .stmt import LoweredFunc, map_exprs, stmt_exprs, walk_stmts

__all__ = ["BoundsReportOp", "ReadChecker", "check_program", "is_report", "strip_checks",
           "report_ops", "wide_index"]


class BoundsReportOp(PlaceholderOp):
    """The report of an out-of-bounds read of dimension ``dim`` of ``tensor_name``
    (extent ``extent``): ``TensorRead(op.output(0), [index])`` records ``index`` as the
    first violation (unless one is recorded already) and yields 0. Not a buffer."""

    __slots__ = ("tensor_name", "dim", "extent")
    tensor_name: str
    dim: int
    extent: int | Expr | str  # (symbolic: its expression, or that printed)

    def __init__(self, tensor_name: str, dim: int, extent: int | Expr | str,
                 dtype: DType) -> None:
        super().__init__(f"{tensor_name}.oob{dim}", (1,), dtype)
        self._init(tensor_name=tensor_name, dim=dim, extent=extent)

    def describe(self, value: int) -> str:
        """The message for a violation with index ``value``."""
        valid = f"[0, {self.extent - 1}]" if isinstance(self.extent, int) else \
            f"[0, {self.extent})"  # (symbolic: its expression, or that printed)
        return (f"index {value} in dimension {self.dim} of '{self.tensor_name}' is out of "
                f"bounds (valid range {valid})")


def is_report(t: Tensor) -> bool:
    """Whether ``t`` is a bounds report (not a buffer)."""
    return isinstance(t.op, BoundsReportOp)


def _is_report_read(e: Expr) -> bool:
    return isinstance(e, TensorRead) and isinstance(e.tensor.op, BoundsReportOp)


def report_ops(func: LoweredFunc) -> list[BoundsReportOp]:
    """The bounds reports of ``func``, in order of first appearance."""
    found: dict[BoundsReportOp, None] = {}
    seen: set[Expr] = set()
    for s in walk_stmts(func.body):
        for e in stmt_exprs(s):
            for node in post_order(e):
                if node in seen:
                    continue
                seen.add(node)
                if isinstance(node, TensorRead) and isinstance(node.tensor.op, BoundsReportOp):
                    found.setdefault(node.tensor.op, None)
    return list(found)




def _facts(an: Analyzer, cond: Expr) -> list[tuple[dict[Expr, int], int]]:
    """The ``(coefs, c0)`` facts (``sum coef * atom <= c0``) that ``cond`` states: its
    conjuncts comparing integers (an equality gives two)."""
    out: list[tuple[dict[Expr, int], int]] = []

    def add(diff: Expr, slack: int) -> None:
        lf = an.linear(diff)
        if lf.terms:
            out.append((dict(lf.terms), slack - lf.const))

    for c in fold.conjuncts(cond):
        if isinstance(c, Compare) and c.op is Op.EQ and c.a.dtype.is_int:
            add(c.a - c.b, 0)
            add(c.b - c.a, 0)
        elif isinstance(c, Compare) and c.op in AS_LE and c.a.dtype.is_int:
            sign, slack = AS_LE[c.op]
            add(c.a - c.b if sign > 0 else c.b - c.a, slack)
    return out


class _Guard:
    """What a set of guard conditions tells about values: ``(coefs, c0)`` facts meaning
    ``sum coef * atom <= c0``, and a narrowed domain for the loop variables."""

    def __init__(self, an: Analyzer, dom: Mapping[Var, Interval], conds: Sequence[Expr],
                 memo: dict[Expr, list[tuple[dict[Expr, int], int]]] | None = None) -> None:
        self.facts: list[tuple[dict[Expr, int], int]] = []
        narrowed = dict(dom)
        memo = {} if memo is None else memo  # condition -> its facts (shared by guards)
        for cond in conds:
            facts = memo.get(cond)
            if facts is None:
                facts = memo[cond] = _facts(an, cond)
            self.facts.extend(facts)
        for terms, c0 in self.facts:
            if len(terms) == 1:
                (atom, k), = terms.items()
                if isinstance(atom, Var) and atom in narrowed:
                    iv = narrowed[atom]
                    lo, hi = iv.lo, iv.hi
                    if k > 0:
                        top = c0 // k
                        hi = top if hi is None else min(hi, top)
                    else:
                        bottom = -(c0 // -k)
                        lo = bottom if lo is None else max(lo, bottom)
                    if lo is not None and hi is not None and lo > hi:
                        lo = hi  # the guard holds nowhere: any point will do
                    narrowed[atom] = Interval(lo, hi)
        self.bounds = Bounds(narrowed)


    def within(self, an: Analyzer, ix: Expr, hi: Expr) -> bool:
        """Whether ``ix <= hi`` (``hi`` symbolic) on the domain or by a guard's fact."""
        if an.at_most(ix, hi):
            return True
        lf = an.linear(ix).sub(an.linear(hi))  # need lf <= 0
        return any(terms == lf.terms and c0 + lf.const <= 0 for terms, c0 in self.facts)

    def range_of(self, an: Analyzer, ix: Expr) -> tuple[int | None, int | None]:
        """Bounds of ``ix``: interval bounds on the narrowed domain, tightened at every
        node of ``ix`` by the facts on that node (``(r - ry + 1) // 2`` with the guard
        ``r >= ry - 1 && r < ry + 3`` is in ``[0, 1]``)."""
        memo: dict[Expr, tuple[int | None, int | None]] = {}
        for node in post_order(ix):
            if node in memo:
                continue
            iv = self.bounds(node) if node.dtype.is_integral else Interval(None, None)
            lo, hi = iv.lo, iv.hi
            if isinstance(node, Binary) and node.a in memo and node.b in memo:
                (alo, ahi), (blo, bhi) = memo[node.a], memo[node.b]
                c = int(node.b.value) if isinstance(node.b, Const) else None
                nlo: int | None = None
                nhi: int | None = None
                if node.op is Op.ADD:
                    nlo = None if alo is None or blo is None else alo + blo
                    nhi = None if ahi is None or bhi is None else ahi + bhi
                elif node.op is Op.SUB:
                    nlo = None if alo is None or bhi is None else alo - bhi
                    nhi = None if ahi is None or blo is None else ahi - blo
                elif node.op is Op.FLOORDIV and c is not None and c > 0:
                    nlo = None if alo is None else alo // c
                    nhi = None if ahi is None else ahi // c
                elif node.op is Op.MUL and c is not None and c >= 0:
                    nlo = None if alo is None else alo * c
                    nhi = None if ahi is None else ahi * c
                lo = nlo if lo is None else lo if nlo is None else max(lo, nlo)
                hi = nhi if hi is None else hi if nhi is None else min(hi, nhi)
            if node.dtype.is_int and self.facts:
                flo, fhi = self._fact_range(an.linear(node))
                lo = flo if lo is None else lo if flo is None else max(lo, flo)
                hi = fhi if hi is None else hi if fhi is None else min(hi, fhi)
                # x + y // c == (c*x + y) // c: facts may bound c*x + y as a whole
                # (x = s2, y = s - rx + 1 after a split s = 2*s2 + s.phase)
                if isinstance(node, Binary) and node.op is Op.ADD:
                    for x, y in ((node.a, node.b), (node.b, node.a)):
                        if isinstance(y, Binary) and y.op is Op.FLOORDIV and \
                                isinstance(y.b, Const) and int(y.b.value) > 0:
                            c = int(y.b.value)
                            flo, fhi = self._fact_range(an.linear(x).scale(c).add(
                                an.linear(y.a)))
                            if flo is not None:
                                lo = flo // c if lo is None else max(lo, flo // c)
                            if fhi is not None:
                                hi = fhi // c if hi is None else min(hi, fhi // c)
            memo[node] = (lo, hi)
        return memo[ix]

    def _fact_range(self, lf: LinearForm) -> tuple[int | None, int | None]:
        """Bounds of the linear form ``lf`` from the facts whose terms are a multiple of its."""
        lo: int | None = None
        hi: int | None = None
        if not lf.terms:
            return lf.const, lf.const
        first, c_first = next(iter(lf.terms.items()))
        for terms, c0 in self.facts:
            f_first = terms.get(first)
            if len(terms) != len(lf.terms) or not f_first or c_first % f_first:
                continue
            m = c_first // f_first
            # lf's terms == m * the fact's terms: m * (fact) <= or >= m * c0
            if all(terms.get(a) is not None and c == m * terms[a] for a, c in lf.terms.items()):
                if m > 0:
                    top = m * c0 + lf.const
                    hi = top if hi is None else min(hi, top)
                else:
                    bottom = m * c0 + lf.const
                    lo = bottom if lo is None else max(lo, bottom)
        return lo, hi


# exact decisions by evaluation: at most this many points of the variables an index uses
EXACT_POINTS = 1 << 16


def _exact_range(ix: Expr, conds: Sequence[Expr], dom: Mapping[Var, Interval]
                 ) -> tuple[int, int] | None | bool:
    """``(lo, hi)`` of ``ix`` over the points of ``dom`` where every condition holds,
    computed on the grid of the loop variables they use (NumPy, ``tex.ir.semantics``, in
    int64); True when no point is active; None when that cannot be computed (a tensor
    read, a scalar argument, an unbounded or too large domain)."""
    roots = [ix, *conds]
    used: dict[Var, None] = {}
    for r in roots:
        for n in post_order(r):
            if isinstance(n, (TensorRead, Reduce)):
                return None
            if isinstance(n, Var):
                iv = dom.get(n)
                if iv is None or iv.lo is None or iv.hi is None:
                    return None
                used.setdefault(n, None)
    sizes = [int(dom[v].hi) - int(dom[v].lo) + 1 for v in used]  # type: ignore[operator]
    if math.prod(sizes) > EXACT_POINTS:
        return None
    env: dict[Expr, np.ndarray] = {}
    for k, v in enumerate(used):
        shape = [1] * len(sizes)
        shape[k] = sizes[k]
        env[v] = np.arange(dom[v].lo, dom[v].hi + 1, dtype=np.int64).reshape(shape)
    with np.errstate(all="ignore"):
        for r in roots:
            for n in post_order(r):
                if n in env:
                    continue
                if isinstance(n, Const):
                    env[n] = np.asarray(n.value, np.int64 if n.dtype.is_int else
                                        n.dtype.numpy)
                elif isinstance(n, Unary) and n.op in NUMPY_UNARY:
                    env[n] = np.asarray(NUMPY_UNARY[n.op](env[n.a]))
                elif isinstance(n, (Binary, Compare)) and n.op in NUMPY_BINARY:
                    env[n] = np.asarray(NUMPY_BINARY[n.op](env[n.a], env[n.b]))
                elif isinstance(n, Select):
                    env[n] = np.where(env[n.cond], env[n.a], env[n.b])
                elif isinstance(n, Cast) and n.dtype.is_int and env[n.a].dtype.kind in "iub":
                    env[n] = env[n.a].astype(np.int64)  # no overflow in index arithmetic
                else:
                    return None
        full = tuple(sizes)
        values = np.broadcast_to(env[ix], full)
        active = np.ones(full, bool)
        for c in conds:
            active &= np.broadcast_to(env[c].astype(bool), full)
    if not active.any():
        return True
    chosen = values[active]
    return int(chosen.min()), int(chosen.max())


# contexts (guard sets) a node is analyzed under before its common guards (those that hold
# on every path to it) and "some unknown guard" stand for the others: the common guards
# still prove reads in bounds; the unknown guard allows no refusal (a run-time check)
MAX_CONTEXTS = 8
_UNKNOWN = Var("unknown guard", boolean)
# guards kept per context, innermost first (deeper nests: the unknown guard stands for the
# outer ones), so that each context costs a bounded amount whatever the nesting depth
MAX_GUARDS = 24


def _within(conds: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """``conds`` with at most ``MAX_GUARDS`` guards: the innermost, and the unknown guard
    for those dropped."""
    if len(conds) <= MAX_GUARDS:
        return conds
    return (_UNKNOWN, *(c for c in conds[-MAX_GUARDS:] if c is not _UNKNOWN))


def _edges(node: Expr) -> list[tuple[Expr, Expr | None]]:
    """The children of ``node`` with the guard each is evaluated under (None: no guard of
    its own): select sides, reduction sources and the right side of ``&&``/``||`` (which
    the code generators evaluate only where the left side leaves the result open) are
    guarded, everything else is not."""
    if isinstance(node, Select):
        return [(node.cond, None), (node.a, node.cond),
                (node.b, fold.logical_not(node.cond))]
    if isinstance(node, Binary) and node.op is Op.AND:
        return [(node.a, None), (node.b, node.a)]
    if isinstance(node, Binary) and node.op is Op.OR:
        return [(node.a, None), (node.b, fold.logical_not(node.a))]
    if isinstance(node, Reduce):
        inner = None if isinstance(node.condition, Const) else node.condition
        return [*((src, inner) for src in node.source), (node.condition, None),
                *((i, None) for i in node.init)]
    return [(k, None) for k in node.children()]


def _common_guards(roots: Sequence[Expr]) -> dict[Expr, tuple[Expr, ...]]:
    """For every node under ``roots``, guards that hold on every path from a root to it:
    the innermost ``MAX_GUARDS`` of them (in the order of the first path; fewer known
    guards only prove less), in one pass over the DAG, parents first."""
    common: dict[Expr, tuple[Expr, ...]] = {r: () for r in roots}
    for node in reversed(list(post_order(*roots))):
        mine = common[node]
        for child, guard in _edges(node):
            path = mine if guard is None else (*mine[1 - MAX_GUARDS:], guard)
            seen = common.get(child)
            if seen is None:
                common[child] = path
            elif seen:
                keep = set(path)
                common[child] = tuple(c for c in seen if c in keep)
    return common


def _inside(iv: Interval, n: int) -> bool:
    return iv.lo is not None and iv.hi is not None and iv.lo >= 0 and iv.hi <= n - 1


_INT64 = DTYPES["int64"]
_INT32_RANGE = (-(2**31), 2**31 - 1)
_MODULAR = (Op.ADD, Op.SUB, Op.MUL)  # int32 results congruent to the exact ones mod 2^32
_NON_MODULAR = (Op.DIV, Op.FLOORDIV, Op.FLOORMOD, Op.MIN, Op.MAX)


def wide_index(ix: Expr, folded: bool = True) -> tuple[Expr, bool]:
    """``ix`` computed in int64 (the integer arithmetic rebuilt over its leaves, each cast:
    variables, reads, constants, casts), and whether only modular operations (``+ - *``,
    negation, selects between such values) compute it. ``folded``: rebuilt through
    ``tex.ir.fold`` (its local rules); else node for node (the code generators' addresses,
    already simplified: the rules would only cost time)."""
    memo: dict[Expr, Expr] = {}
    modular = True
    binary, unary, select = (fold.binary, fold.unary, fold.select) if folded else \
        (Binary, Unary, Select)
    for node in post_order(ix):
        if not (node.dtype.is_int and node.dtype.bits < 64):
            memo[node] = node  # not narrow integer arithmetic (a condition, a float)
        elif isinstance(node, Binary) and node.op in _MODULAR:
            memo[node] = binary(node.op, memo[node.a], memo[node.b])
        elif isinstance(node, Binary) and node.op in _NON_MODULAR:
            modular = False
            memo[node] = binary(node.op, memo[node.a], memo[node.b])
        elif isinstance(node, Unary) and node.op is Op.NEG:
            memo[node] = unary(Op.NEG, memo[node.a])
        elif isinstance(node, Select):
            memo[node] = select(node.cond, memo[node.a], memo[node.b])
        else:
            memo[node] = fold.cast(_INT64, node)
    return memo[ix], modular


class ReadChecker:
    """Per-``lower`` state: which reads need a run-time check, and their reports."""

    def __init__(self, scalars: Iterable[Var]) -> None:
        self.scalars = set(scalars)
        self.checks: dict[TensorRead, tuple[int, ...]] = {}
        # checked dimensions whose index may leave int32: checked in int64
        self.wide: set[tuple[TensorRead, int]] = set()
        self.seen: set[TensorRead] = set()  # every read classified
        self._reports: dict[tuple[Tensor, int, DType], BoundsReportOp] = {}
        # intervals of the indices of inlined reads, memoized across reads (an index
        # inlined n deep is shared by the n reads above it: linear, not quadratic)
        self._bounds = Bounds()

    def analyze(self, stage: str, roots: Sequence[Expr], dom: Mapping[Var, Interval]) -> None:
        """Classify every read of ``roots`` (a stage's body, its axes ranging over
        ``dom``); raise ``ValueError`` for a read that is out of bounds at some point
        of the domain where it is evaluated unconditionally (see the module docstring)."""
        # a shape variable that is a dimension of a tensor read is at least 1 (a call
        # refuses an empty or negative extent), which proves reads of its first rows
        sizes: dict[Var, Interval] = {}
        for node in post_order(*roots):
            if isinstance(node, TensorRead):
                for d in node.tensor.shape:
                    if isinstance(d, Var) and d not in dom:
                        sizes.update(extent_facts(IterVar(d, Range(0, d))))
        an = Analyzer({**sizes, **dom})
        guards: dict[tuple[Expr, ...], _Guard] = {}
        facts: dict[Expr, list[tuple[dict[Expr, int], int]]] = {}
        seen: set[tuple[Expr, tuple[Expr, ...]]] = set()
        contexts: dict[Expr, int] = {}
        common: dict[Expr, tuple[Expr, ...]] | None = None
        stack: list[tuple[Expr, tuple[Expr, ...]]] = [(r, ()) for r in roots]
        while stack:
            node, conds = stack.pop()
            if (node, conds) in seen:
                continue
            # a node shared under many different guards (nested selects) is visited under
            # a few of them, then once under its common guards and "some unknown guard":
            # linear, not exponential, and what holds on every path still proves bounds
            count = contexts.get(node, 0)
            if count >= MAX_CONTEXTS:
                if common is None:
                    common = _common_guards(roots)
                conds = _within((_UNKNOWN, *common[node]))
                if (node, conds) in seen:
                    continue
            contexts[node] = count + 1
            seen.add((node, conds))
            if isinstance(node, TensorRead) and not isinstance(node.tensor.op, BoundsReportOp):
                g = guards.get(conds)
                if g is None:
                    g = guards[conds] = _Guard(an, dom, conds, facts)
                self._classify(stage, node, conds, g, an, dom)
            stack.extend((child, conds if guard is None else _within((*conds, guard)))
                         for child, guard in _edges(node))

    def _classify(self, stage: str, read: TensorRead, conds: tuple[Expr, ...], g: _Guard,
                  an: Analyzer, dom: Mapping[Var, Interval]) -> None:
        self.seen.add(read)
        dims: list[int] = []
        for d, (ix, n) in enumerate(zip(read.indices, read.tensor.shape)):
            lo, hi = g.range_of(an, ix)
            if not isinstance(n, int):
                # a symbolic extent: proved on linear forms over the symbolic loop ranges,
                # else checked when the function runs
                if not (lo is not None and lo >= 0 and g.within(an, ix, n - 1)):
                    dims.append(d)
                    if ix.dtype.is_int and ix.dtype.bits < 64 and (
                            lo is None or hi is None or lo < _INT32_RANGE[0]
                            or hi > _INT32_RANGE[1]):
                        self.wide.add((read, d))
                continue
            if lo is not None and hi is not None and lo >= 0 and hi <= n - 1:
                continue
            exact = _exact_range(ix, conds, dom)
            if exact is True or (isinstance(exact, tuple) and exact[0] >= 0 and
                                 exact[1] <= n - 1):
                continue  # in bounds at every point where it is evaluated
            if isinstance(exact, tuple):
                where = " where its guard holds" if conds else ""
                raise ValueError(
                    f"lower: '{stage}' reads '{read.tensor.name}' out of bounds in "
                    f"dimension {d}: the index {ix} ranges over [{exact[0]}, {exact[1]}]"
                    f"{where} but the valid range is [0, {n - 1}] (shape "
                    f"{tuple(read.tensor.shape)}). Fix the index, or guard the read with "
                    "tex.if_then_else(cond, read, other) or a reduction's where=")
            if not conds and self._affine_in_loops(an, ix, dom):
                raise ValueError(
                    f"lower: '{stage}' reads '{read.tensor.name}' out of bounds in "
                    f"dimension {d}: the index {ix} ranges over [{lo}, {hi}] but the valid "
                    f"range is [0, {n - 1}] (shape {tuple(read.tensor.shape)}). Fix the "
                    "index, or guard the read with tex.if_then_else(cond, read, other) or "
                    "a reduction's where=")
            dims.append(d)
            if ix.dtype.is_int and ix.dtype.bits < 64 and (
                    lo is None or hi is None or lo < _INT32_RANGE[0] or hi > _INT32_RANGE[1]):
                self.wide.add((read, d))
        if dims:
            old = self.checks.get(read, ())
            self.checks[read] = tuple(sorted(set(old) | set(dims)))

    def _affine_in_loops(self, an: Analyzer, ix: Expr, dom: Mapping[Var, Interval]) -> bool:
        """An affine function of bounded loop variables only (its interval is exact)."""
        lf = an.linear(ix)
        for atom in lf.terms:
            if not (isinstance(atom, Var) and atom in dom and atom not in self.scalars):
                return False
            iv = dom[atom]
            if iv.lo is None or iv.hi is None:
                return False
        return True

    def report(self, t: Tensor, dim: int) -> Tensor:
        """The report tensor for dimension ``dim`` of ``t``."""
        key = (t, dim, t.dtype)
        op = self._reports.get(key)
        if op is None:
            op = self._reports[key] = BoundsReportOp(t.name, dim, t.shape[dim], t.dtype)
        return op.output(0)

    def wrap_inlined(self, read: TensorRead, value: Expr) -> Expr:
        """The inlined ``value`` of ``read`` (a read of an inlined stage), under the
        read's checks: a read the analysis of its body did not see (inside indices that
        were inlined themselves) is checked unless its interval is inside the shape."""
        dims = self.checks.get(read)
        if dims is None and read not in self.seen:
            dims = tuple(d for d, (ix, n) in enumerate(zip(read.indices, read.tensor.shape))
                         if not isinstance(n, int) or not _inside(self._bounds(ix), n))
        return self._wrap(read, read, value, dims or ())

    def _wrap(self, key: TensorRead, read: TensorRead, value: Expr, dims: Sequence[int]
              ) -> Expr:
        for d in reversed(dims):
            ix = read.indices[d]
            n = read.tensor.shape[d]
            if (key, d) in self.wide:
                ix, modular = wide_index(ix)
                if not modular and value is read:  # a direct read: at the exact index
                    indices = list(read.indices)
                    indices[d] = ix
                    value = read = TensorRead(read.tensor, indices)
            ok = fold.binary(Op.AND, ix >= 0, ix < n)
            value = Select(ok, value, TensorRead(self.report(key.tensor, d), [ix]))
        return value

    def checked(self, root: Expr) -> Expr:
        """``root`` with each read needing a check wrapped in its checks."""
        checks = self.checks
        if not checks:
            return root
        memo: dict[Expr, Expr] = {}
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node in memo:
                continue
            if not expanded:
                stack.append((node, True))
                stack.extend((k, False) for k in node.children() if k not in memo)
                continue
            kids = node.children()
            new = node.with_children([memo[k] for k in kids]) if kids else node
            dims = checks.get(node) if isinstance(node, TensorRead) else None
            if dims:
                assert isinstance(new, TensorRead) and isinstance(node, TensorRead)
                new = self._wrap(node, new, new, dims)
            memo[node] = new
        return memo[root]


def check_program(tensors: Sequence[Tensor]) -> None:
    """Refuse the reads of the computes ``tensors`` depend on that are out of bounds (see
    ``ReadChecker``), on the program as written: run before a schedule rewrites it (an
    auto-scheduler's rfactor stage ``R.rf``), the message names the user's tensors."""
    checker = ReadChecker(())
    for op in topo_sort_ops(list(tensors)):
        if isinstance(op, ComputeOp):
            checker.analyze(op.name, list(op.body), dom_of([*op.axis, *op.reduce_axis]))


def strip_checks(func: LoweredFunc) -> LoweredFunc:
    """``func`` without its run-time bounds checks (each checked read reads directly)."""
    if not report_ops(func):
        return func
    memo: dict[Expr, Expr] = {}

    def unchecked(e: Expr) -> Expr:
        def fn(node: Expr) -> Expr | None:
            if isinstance(node, Select):
                if _is_report_read(node.b):
                    return node.a
                if _is_report_read(node.a):
                    return node.b
            return None
        return rewrite(e, fn, memo)

    return LoweredFunc(func.name, func.params, map_exprs(func.body, unchecked), func.attrs)
