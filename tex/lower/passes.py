"""The loop passes run on a lowered function, in the order of ``PASSES`` (each dumpable with
``TEX_DUMP=lower.<name>``): simplification of indices and conditions with ``tex.arith`` on
the loop domains, hoisting of bounds checks out of the loops they do not depend on, loop
partitioning and the tightening of the vectorized loops it leaves guarded, removal of
conditions proven and of empty statements, removal of guards already checked by an
enclosing one.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from ..arith import Analyzer, Interval, range_interval
from ..arith.bounds import extent_facts
from ..arith.linear import AS_LE
from ..arith.logic_rules import chain_operands
from ..ir import fold
from ..ir.expr import Binary, Compare, Const, Expr, IterVar, Op, Range, Select, TensorRead, Var
from ..ir.tensor import Tensor
from ..ir.visit import post_order, rewrite, substitute
from .bounds_check import is_report
from .stmt import (
    Allocate,
    BufferParam,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    LoweredFunc,
    Nested,
    Seq,
    Stmt,
    Store,
    each_nested,
    map_exprs,
    run_nested,
    seq,
    stmt_children,
    stmt_exprs,
    walk_stmts,
    with_stmt_children,
)
from .storage import i32

__all__ = ["PASSES", "hoist_checks", "loop_domains", "partition_loops", "remove_no_op",
           "tighten_vector_loops",
           "remove_redundant_guards", "simplify_pass"]


def loop_domains(body: Stmt) -> dict[Var, Interval]:
    """The values each loop variable of ``body`` takes (a symbolic loop's as a
    ``SymbolicInterval``)."""
    dom: dict[Var, Interval] = {}
    symbolic: dict[Var, list[For]] = {}
    for s in walk_stmts(body):
        if isinstance(s, For) and not (isinstance(s.min, Const) and
                                       isinstance(s.extent, Const)):
            symbolic.setdefault(s.var, []).append(s)
            continue
        if isinstance(s, For) and isinstance(s.min, Const) and isinstance(s.extent, Const):
            lo = int(s.min.value)
            hi = lo + int(s.extent.value) - 1
            if s.extent.value <= 0:
                continue
            seen = dom.get(s.var)
            if seen is not None:  # one variable, several loops: their hull
                lo, hi = min(lo, seen.lo), max(hi, seen.hi)  # type: ignore[type-var]
            dom[s.var] = Interval(lo, hi)
    # a loop over a symbolic range (a shape variable's): its ends as expressions, when it
    # is the variable's only loop and they use shape variables only (loop variables are
    # bound per iteration, not in a domain's ends)
    for v, fors in symbolic.items():
        if len(fors) == 1 and v not in dom and not any(
                isinstance(n, Var) and n.kind not in ("var", "size")
                for e in (fors[0].min, fors[0].extent) for n in post_order(e)):
            dom[v] = range_interval(Range(_as_int(fors[0].min), _as_int(fors[0].extent)))
    return dom


def function_domains(func: LoweredFunc) -> dict[Var, Interval]:
    """``loop_domains`` of the function's body, and what its arguments' shapes say of its
    shape variables: one that is a dimension is at least 1 (a call refuses less)."""
    dom = loop_domains(func.body)
    for p in func.params:
        if isinstance(p, BufferParam):
            for d in p.tensor.shape:
                if isinstance(d, Var) and d not in dom:
                    dom.update(extent_facts(IterVar(d, Range(0, d))))
    return dom


def _as_int(e: Expr) -> int | Expr:
    return int(e.value) if isinstance(e, Const) else e


def simplify_pass(func: LoweredFunc) -> LoweredFunc:
    """Indices and conditions simplified on the loop domains (tex.arith rules, no sympy)."""
    an = Analyzer(function_domains(func))
    # (original node -> result) for every sub-term, shared by all the function's
    # expressions: an index term common to many statements is simplified once
    memo: dict[Expr, Expr] = {}

    def fn(e: Expr) -> Expr:
        return an.rewrite(e, memo)

    return LoweredFunc(func.name, func.params, map_exprs(func.body, fn), func.attrs)


def remove_no_op(func: LoweredFunc) -> LoweredFunc:
    """Conditions decided by constants resolved; empty branches and loops removed."""

    def visit(s: Stmt) -> Nested[Stmt | None]:
        new = yield from each_nested(visit, stmt_children(s))
        if isinstance(s, IfThenElse):
            then, other = new[0], new[1] if len(new) > 1 else None
            if isinstance(s.cond, Const):
                return then if bool(s.cond.value) else other
            if then is None:
                if other is None:
                    return None
                return IfThenElse(fold.logical_not(s.cond), other)
            return IfThenElse(s.cond, then, other)
        if isinstance(s, Seq):
            kept = [c for c in new if c is not None]
            return seq(*kept) if kept else None
        if any(c is None for c in new):
            return None
        return with_stmt_children(s, new)  # type: ignore[arg-type]

    body = run_nested(visit(func.body))
    return LoweredFunc(func.name, func.params, body if body is not None else Seq(()),
                       func.attrs)


def _comparisons(cond: Expr, var: Var, an: Analyzer
                 ) -> list[tuple[Expr, tuple[int, int, int | None, int | None] | None]]:
    """Each conjunct of ``cond`` (right to left, as the guards were read), with, when it is
    an affine comparison in ``var``, ``(a, slack, lo, hi)``: it reads ``a*var + rest <=
    slack`` with ``rest`` in ``[lo, hi]`` over the loop domains (None: unbounded)."""
    out: list[tuple[Expr, tuple[int, int, int | None, int | None] | None]] = []
    for c in chain_operands(cond, Op.AND)[::-1]:
        if not (isinstance(c, Compare) and c.op in AS_LE and c.a.dtype.is_int):
            out.append((c, None))
            continue
        sign, slack = AS_LE[c.op]
        lf = an.linear(an.rewrite(c.a - c.b if sign > 0 else c.b - c.a))
        a = lf.terms.get(var, 0)
        rest = type(lf)({t: k for t, k in lf.terms.items() if t is not var}, lf.const, lf.dtype)
        if a == 0 or any(isinstance(n, Var) and n is var
                         for t in rest.terms for n in post_order(t)):
            out.append((c, None))
            continue
        b = an.linear_bounds(rest)
        out.append((c, (a, slack, b.lo, b.hi)))
    return out


def _narrow(lo: int | None, hi: int | None, a: int, bound: int
            ) -> tuple[int | None, int | None]:
    """``[lo, hi)`` intersected with the integers where ``a * var <= bound``."""
    if a > 0:
        top = bound // a + 1
        return lo, top if hi is None else min(hi, top)
    bottom = -(bound // -a)
    return (bottom if lo is None else max(lo, bottom)), hi


def _true_range(cond: Expr, var: Var, an: Analyzer
                ) -> tuple[int | None, int | None, list[Expr]] | None:
    """``[lo, hi)`` (None: unbounded) of ``var`` on which the conjuncts of ``cond`` that are
    affine comparisons in ``var`` hold whatever the other variables are (within their loop
    domains), and the conjuncts that are left; None if no conjunct is such a comparison."""
    lo: int | None = None
    hi: int | None = None
    found = False
    rest_parts: list[Expr] = []
    for c, form in _comparisons(cond, var, an):
        if form is None or form[3] is None:
            rest_parts.append(c)
            continue
        found = True
        a, slack, _, r_hi = form
        lo, hi = _narrow(lo, hi, a, slack - r_hi)  # the worst case of the rest
    return (lo, hi, rest_parts) if found else None


def _possible_range(cond: Expr, var: Var, an: Analyzer) -> tuple[int | None, int | None]:
    """``[lo, hi)`` (None: unbounded) outside which the affine comparisons in ``var`` among
    the conjuncts of ``cond`` fail whatever the other variables are (within their loop
    domains): the hull of where ``cond`` can hold."""
    lo: int | None = None
    hi: int | None = None
    for _, form in _comparisons(cond, var, an):
        if form is not None and form[2] is not None:
            a, slack, r_lo, _ = form
            lo, hi = _narrow(lo, hi, a, slack - r_lo)  # the best case of the rest
    return lo, hi


def _symbolic_split(loop: For, found: list[tuple[Stmt, Expr, bool]],
                    dom: Mapping[Var, Interval], an: Analyzer
                    ) -> tuple[Expr, dict[int, list[Expr]], list[Expr]] | None:
    """Where guards bound ``loop``'s variable from above by an expression of shape
    variables or enclosing loops (``i + 2*o + base < n`` with ``i`` in ``[0, 2)`` inside):
    the point ``P`` (an expression, clamped to the loop's range) below which each such
    conjunct holds for every value of the loops inside, and what each guard keeps there;
    None when no guard has such a conjunct."""
    lo0: Expr = loop.min
    hi0: Expr = fold.binary(Op.ADD, loop.min, loop.extent)
    var = loop.var
    inner = {st.var for st in walk_stmts(loop.body) if isinstance(st, For)}
    tops: list[Expr] = []
    decided: dict[int, list[Expr]] = {}
    holding: list[Expr] = []
    for g, cond, drop in found:
        if not drop:
            continue
        kept: list[Expr] = []
        used = False
        for c in chain_operands(cond, Op.AND)[::-1]:
            top = _symbolic_top(c, var, inner, dom, an)
            if top is None:
                kept.append(c)
            else:
                tops.append(top)
                holding.append(c)
                used = True
        if used:
            decided[id(g)] = kept
    if not tops:
        return None
    point: Expr = tops[0]
    for t in tops[1:]:
        point = fold.binary(Op.MIN, point, t)
    point = fold.binary(Op.MAX, fold.binary(Op.MIN, point, hi0), lo0)
    return an.rewrite(point), decided, holding


def _fold_known(e: Expr, known: Mapping[Expr, Expr]) -> Expr | None:
    """``e`` with known conditions replaced (for ``rewrite``: children first), and the
    selects and conjunctions they decide folded."""
    if e in known:
        return known[e]
    if isinstance(e, Select) and isinstance(e.cond, Const):
        return e.a if e.cond.value else e.b
    if isinstance(e, Binary) and e.op is Op.AND and isinstance(e.a, Const):
        return e.b if e.a.value else e.a
    if isinstance(e, Binary) and e.op is Op.AND and isinstance(e.b, Const):
        return e.a if e.b.value else e.b
    return None


def _possible_end(loop: For, dom: Mapping[Var, Interval], an: Analyzer) -> Expr | None:
    """The end of the iterations of ``loop`` that may do something: every store in its
    body sits under a guard with a conjunct ``a*var + inner + outer <= slack`` of a
    symbolic ``outer`` (a split tail's), false for every value of the loops inside from
    ``(slack - min(inner) - outer) // a + 1`` on; the latest of those points (None when a
    store has no such guard)."""
    var = loop.var
    inner = {st.var for st in walk_stmts(loop.body) if isinstance(st, For)}
    ends: list[Expr] = []
    stack: list[tuple[Stmt, tuple[Expr, ...]]] = [(loop.body, ())]
    while stack:
        st, conds = stack.pop()
        if isinstance(st, Store):
            mine = [e for c in conds for a in chain_operands(c, Op.AND)
                    if (e := _symbolic_top(a, var, inner, dom, an, best=True)) is not None]
            if not mine:
                return None
            end = mine[0]
            for e in mine[1:]:
                end = fold.binary(Op.MIN, end, e)
            ends.append(end)
            continue
        if not isinstance(st, (Seq, For, IfThenElse, Allocate, LetStmt)):
            return None  # (a statement of another kind: assumed to act)
        if isinstance(st, IfThenElse):
            stack.append((st.then_case, (*conds, st.cond)))
            if st.else_case is not None:
                stack.append((st.else_case, conds))
            continue
        stack.extend((c, conds) for c in stmt_children(st))
    if not ends:
        return None
    out = ends[0]
    for e in ends[1:]:
        out = fold.binary(Op.MAX, out, e)
    return out


def _symbolic_top(c: Expr, var: Var, inner: set[Var], dom: Mapping[Var, Interval],
                  an: Analyzer, best: bool = False) -> Expr | None:
    """For a conjunct ``a*var + inner + outer <= slack`` (``a > 0``; ``inner`` over the
    loops inside, of constant ranges; ``outer`` holding a shape variable): the first value
    of ``var`` at which it may fail, ``(slack - max(inner) - outer) // a + 1`` (``best``:
    from which it fails for every value of ``inner``, with ``min(inner)``)."""
    if not (isinstance(c, Compare) and c.op in AS_LE and c.a.dtype.is_int):
        return None
    sign, slack = AS_LE[c.op]
    lf = an.linear(an.rewrite(c.a - c.b if sign > 0 else c.b - c.a))
    a = lf.terms.get(var, 0)
    if a <= 0:
        return None
    top = slack - lf.const
    outer: dict[Expr, int] = {}
    symbolic = False
    for t, k in lf.terms.items():
        if t is var:
            continue
        names = [n for n in post_order(t) if isinstance(n, Var)]
        if var in names:
            return None
        if t in inner:
            iv = dom.get(t)  # type: ignore[call-overload]
            if iv is None or iv.lo is None or iv.hi is None or \
                    getattr(iv, "sym_hi", None) is not None:
                return None
            top -= (min if best else max)(k * iv.lo, k * iv.hi)
            continue
        if any(n in inner for n in names):
            return None
        symbolic |= any(n.kind in ("var", "size") for n in names)
        outer[t] = k
    if not symbolic:
        return None  # (int bounds: the constant partition handles it)
    rest = an.rebuild(type(lf)(outer, 0, lf.dtype)) if outer else i32(0)
    bound = fold.binary(Op.SUB, i32(top), rest) if rest.dtype is i32(0).dtype else None
    if bound is None:
        return None
    return fold.binary(Op.ADD, fold.binary(Op.FLOORDIV, bound, i32(a)), i32(1))


def partition_loops(func: LoweredFunc) -> LoweredFunc:
    """Peel the iterations of a serial loop where guards inside it may fail:
    ``for (o, 0, 13) { if (i + o*8 < 100) s }`` -> ``for (o, 0, 12) { s }`` then
    ``for (o, 12, 1) { if (...) s }``. Only guards in or around vectorized loops are
    considered (split remainders of vectorized axes), and only the guard-free middle part is
    partitioned further, so code grows at most threefold per loop."""
    dom = function_domains(func)
    an = Analyzer(dom)
    vector_memo: dict[Stmt, bool] = {}  # statement -> whether it holds a vectorized loop

    def vectorized(st: Stmt) -> Nested[bool]:
        got = vector_memo.get(st)
        if got is None:
            inside = yield from each_nested(vectorized, stmt_children(st))
            got = vector_memo[st] = any(inside) or (isinstance(st, For) and
                                                    st.kind is ForKind.VECTORIZED)
        return got

    def has_vector(root: Stmt) -> bool:
        return run_nested(vectorized(root))

    def guards(body: Stmt) -> list[tuple[Stmt, Expr, bool]]:
        """Guards worth peeling, with their conditions and whether the guard is dropped
        where they hold (else a select the narrowed domain decides, ``_decided_selects``):
        ifs in or around a vectorized loop, where a guard costs lane masks on every
        iteration (elsewhere a branch is cheap and the copies only lengthen compilation),
        the blends of guarded reduction updates in vectorized loops (``acc = select(c, acc
        + x, acc)``: a blend per update), and the selects stored by vectorized loops
        (``pad[..] = select(interior, x[..], 0)``: a padded copy, a blend per vector)."""
        found: list[tuple[Stmt, Expr, bool]] = []
        stack: list[tuple[Stmt, bool]] = [(body, False)]
        while stack:
            st, in_vector = stack.pop()
            if isinstance(st, IfThenElse) and st.else_case is None and (
                    in_vector or has_vector(st.then_case)):
                found.append((st, st.cond, True))
            elif in_vector and _blend(st) is not None:
                found.append((st, _blend(st).cond, True))  # type: ignore[union-attr]
            elif in_vector and isinstance(st, Store) and isinstance(st.value, Select):
                found.append((st, st.value.cond, False))
            vec = in_vector or (isinstance(st, For) and st.kind is ForKind.VECTORIZED)
            stack.extend((c, vec) for c in stmt_children(st))
        return found

    def split_at_runtime(s: For, found: list[tuple[Stmt, Expr, bool]]) -> Nested[Stmt | None]:
        """``s`` in two loops at the run-time point ``_symbolic_split`` finds: unguarded
        below it, guarded after it; None when there is none."""
        split = _symbolic_split(s, found, dom, an)
        if split is None:
            return None
        point, decided, holding = split
        end = fold.binary(Op.ADD, s.min, s.extent)
        # below the point the guards' conjuncts hold: so do the same conditions elsewhere
        # in the body (the run-time bounds checks of inlined reads at the tile's indices)
        true = Const(True, holding[0].dtype)
        known = dict.fromkeys(holding, true)
        body = map_exprs(_drop_guards(s.body, decided),
                         lambda e: rewrite(e, lambda x: _fold_known(x, known)))
        middle = yield visit(For(s.var, s.min, an.rewrite(point - s.min), s.kind, body,
                                 s.thread_tag))
        # the tail: where the guards start to fail, a partial tile; past its possible end
        # the iterations do nothing (a tile of rows past a small batch) and are left out;
        # serial, as a parallel region for it would cost more
        last = _possible_end(s, dom, an)
        if last is not None:
            end = fold.binary(Op.MAX, fold.binary(Op.MIN, last, end), point)
        kind = ForKind.SERIAL if s.kind is ForKind.PARALLEL else s.kind
        tail = _rename_loop(For(s.var, point, an.rewrite(end - point), kind, s.body,
                                s.thread_tag))
        return seq(middle, tail)

    def visit(s: Stmt) -> Nested[Stmt]:
        if isinstance(s, For) and s.kind in (ForKind.SERIAL, ForKind.PARALLEL) and not (
                isinstance(s.min, Const) and isinstance(s.extent, Const)) or \
                isinstance(s, For) and s.kind is ForKind.PARALLEL:
            # a loop of symbolic range, or a parallel one: split where guards of symbolic
            # split tails start to fail (the constant partition below is for serial loops
            # of constant range)
            found = guards(s.body)
            if found:
                got = yield split_at_runtime(s, found)
                if got is not None:
                    return got
        elif isinstance(s, For) and s.kind is ForKind.SERIAL and isinstance(s.min, Const) \
                and isinstance(s.extent, Const):
            lo0, n = int(s.min.value), int(s.extent.value)
            hi0 = lo0 + n
            lo, hi = lo0, hi0
            decided: dict[int, list[Expr]] = {}
            narrowed = False
            found = guards(s.body)
            # where a split's shifted last tile (``min(o * 8, 50)``) is not yet in play,
            # the conditions are affine in the loop variable: partitioned there
            top = _linear_top(s.var, [c for _, c, _ in found], hi0, an)
            if top is not None:
                hi = top
                an_v = Analyzer({**dom, s.var: Interval(lo0, top - 1)})
            for g, cond, drop in found:
                r = _true_range(cond if top is None else an_v.rewrite(cond), s.var, an)
                if r is None:
                    continue
                new_lo = max(lo, r[0]) if r[0] is not None else lo
                new_hi = min(hi, r[1]) if r[1] is not None else hi
                if new_lo >= new_hi:
                    continue  # holds nowhere together with the others: stays a guard
                lo, hi = new_lo, new_hi
                if drop:
                    decided[id(g)] = r[2]
                narrowed = True
            if narrowed and lo < hi and (lo, hi) != (lo0, hi0):
                # in [lo, hi) the comparisons on the loop variable hold: keep only the rest,
                # and the selects they decide there (an inlined producer's guards) resolved
                body = _decided_selects(_drop_guards(s.body, decided),
                                        Analyzer({**dom, s.var: Interval(lo, hi - 1)}))
                middle = yield visit(For(s.var, i32(lo), i32(hi - lo), s.kind, body,
                                         s.thread_tag))
                # the peeled parts keep their guards, less the selects their own ranges
                # decide (a padded copy's border rows: zeros); their loops get fresh
                # variables (a loop variable is bound by exactly one loop)
                def peeled(a: int, b: int) -> For:
                    part = _decided_selects(s.body, Analyzer({**dom, s.var: Interval(a, b - 1)}))
                    return _rename_loop(For(s.var, i32(a), i32(b - a), s.kind, part,
                                            s.thread_tag))

                head = peeled(lo0, lo) if lo > lo0 else None
                tail = peeled(hi, hi0) if hi < hi0 else None
                return seq(head, middle, tail)
            if not narrowed and found:
                # the guards hold below a run-time point (a split remainder of a symbolic
                # extent): unguarded there, guarded after it
                got = yield split_at_runtime(s, found)
                if got is not None:
                    return got
            if not narrowed:
                top = _linear_top(s.var, _vector_divisions(s.body, has_vector), hi0, an)
                if top is not None and top > lo0:
                    # the tiles before the shifted last one start at multiples of the
                    # split factor: divisions of the lane index by a constant dividing it
                    # simplify there (an upsampling's ``(v + 8*o) // 2`` becomes a
                    # duplicated load ``v // 2 + 4*o``, ``% 2`` a fixed lane pattern, and
                    # reads the shifted tile could overrun stay in bounds: 0.95 -> 0.42 ms
                    # for a 2x nearest-neighbour upsampling at 57 wide, gathers before)
                    an_mid = Analyzer({**dom, s.var: Interval(lo0, top - 1)})
                    memo: dict[Expr, Expr] = {}

                    def narrowed_expr(e: Expr) -> Expr:
                        if e not in memo:
                            memo[e] = an_mid.rewrite(e)
                        return memo[e]

                    body = map_exprs(s.body, narrowed_expr)
                    middle = yield visit(For(s.var, i32(lo0), i32(top - lo0), s.kind, body,
                                             s.thread_tag))
                    tail = _rename_loop(For(s.var, i32(top), i32(hi0 - top), s.kind, s.body,
                                            s.thread_tag))
                    return seq(middle, tail)
        return with_stmt_children(s, (yield from each_nested(visit, stmt_children(s))))

    return LoweredFunc(func.name, func.params, run_nested(visit(func.body)), func.attrs)


def tighten_vector_loops(func: LoweredFunc) -> LoweredFunc:
    """A vectorized loop whose whole body is guarded by comparisons on its variable runs
    over just the range where they hold: ``vectorized for (v, 0, 8) { if (v + 24*8 < 197)
    s }`` (a split remainder ``partition_loops`` peeled) -> ``vectorized for (v, 0, 5) s``,
    a narrower vector instead of masked loads and stores on every access."""
    dom = function_domains(func)
    an = Analyzer(dom)

    def visit(s: Stmt) -> Nested[Stmt]:
        s = with_stmt_children(s, (yield from each_nested(visit, stmt_children(s))))
        if not (isinstance(s, For) and s.kind is ForKind.VECTORIZED and
                isinstance(s.min, Const) and isinstance(s.extent, Const)):
            return s
        guard = s.body if isinstance(s.body, IfThenElse) and s.body.else_case is None \
            else None
        sel = _blend(s.body)  # acc = select(c, acc + x, acc): a guarded update
        cond = guard.cond if guard is not None else sel.cond if sel is not None else None
        if cond is None:
            return s
        lo0 = int(s.min.value)
        hi0 = lo0 + int(s.extent.value)
        p_lo, p_hi = _possible_range(cond, s.var, an)
        lo = lo0 if p_lo is None else max(lo0, p_lo)
        hi = hi0 if p_hi is None else min(hi0, p_hi)
        if lo >= hi or (lo, hi) == (lo0, hi0):
            return s  # (never true: left to the guard; or nothing to tighten)
        # on [lo, hi) the comparisons may still fail for some values of the other
        # variables: they stay, unless they hold on all of it
        sure = _true_range(cond, s.var, an)
        kept: list[Expr] | None = None
        if sure is not None and (sure[0] is None or sure[0] <= lo) and \
                (sure[1] is None or sure[1] >= hi):
            kept = sure[2]
        if guard is not None:
            body = guard if kept is None else guard.then_case if not kept else \
                IfThenElse(fold.conjoin(kept), guard.then_case)
        else:
            assert isinstance(s.body, Store) and sel is not None
            body = s.body if kept is None else Store(
                s.body.buffer, s.body.index,
                sel.a if not kept else Select(fold.conjoin(kept), sel.a, sel.b))
        body = _decided_selects(body, Analyzer({**dom, s.var: Interval(lo, hi - 1)}))
        return For(s.var, i32(lo), i32(hi - lo), s.kind, body, s.thread_tag)

    return LoweredFunc(func.name, func.params, run_nested(visit(func.body)), func.attrs)


def _linear_top(var: Var, conds: list[Expr], hi: int, an: Analyzer) -> int | None:
    """The end of the loop range below ``hi`` where every ``min(a * var + k, c)`` (a > 0;
    the index of a split's tile shifted inwards) in ``conds`` is its first operand, when
    some is not there; None when none is, or it is nowhere."""
    top: int | None = None
    for cond in conds:
        for node in post_order(cond):
            if not (isinstance(node, Binary) and node.op is Op.MIN and
                    isinstance(node.b, Const) and node.dtype.is_int):
                continue
            lf = an.linear(node.a)
            a = lf.terms.get(var, 0)
            if a <= 0 or len(lf.terms) != 1:
                continue
            end = (int(node.b.value) - lf.const) // a + 1  # the first value where it is c
            if end < hi:
                top = end if top is None else min(top, end)
    return top if top is not None and top > 0 else None


def _vector_divisions(body: Stmt, has_vector: Callable[[Stmt], bool]) -> list[Expr]:
    """The expressions of the stores inside vectorized loops of ``body`` that divide (or
    take the remainder) by a constant above 1: what a tile's start that is not a multiple
    of the divisor keeps from simplifying (``partition_loops``)."""
    found: list[Expr] = []
    stack: list[tuple[Stmt, bool]] = [(body, False)]
    while stack:
        st, in_vector = stack.pop()
        if in_vector and isinstance(st, Store):
            found.extend(e for e in (st.index, st.value) if any(
                isinstance(n, Binary) and n.op in (Op.FLOORDIV, Op.FLOORMOD) and
                isinstance(n.b, Const) and int(n.b.value) > 1 for n in post_order(e)))
        inside = in_vector or (isinstance(st, For) and st.kind is ForKind.VECTORIZED)
        if inside or has_vector(st):
            stack.extend((c, inside) for c in stmt_children(st))
    return found


def _blend(s: Stmt) -> Select | None:
    """The select of a guarded update ``buf[i] = select(c, new, buf[i])``, else None."""
    if isinstance(s, Store) and isinstance(s.value, Select):
        old = s.value.b
        if isinstance(old, TensorRead) and old.tensor is s.buffer and \
                len(old.indices) == 1 and old.indices[0] == s.index:
            return s.value
    return None


def _drop_guards(root: Stmt, keep: Mapping[int, list[Expr]]) -> Stmt:
    """Guards in ``keep`` reduced to their listed conjuncts (removed when none is left);
    a blended update keeps a select on the conjuncts left, or none."""

    def visit(s: Stmt) -> Nested[Stmt]:
        if isinstance(s, Store) and id(s) in keep:
            sel = _blend(s)
            assert sel is not None
            parts = keep[id(s)]
            value = Select(fold.conjoin(parts), sel.a, sel.b) if parts else sel.a
            return Store(s.buffer, s.index, value)
        if isinstance(s, IfThenElse) and id(s) in keep:
            then = yield visit(s.then_case)
            parts = keep[id(s)]
            return IfThenElse(fold.conjoin(parts), then) if parts else then
        return with_stmt_children(s, (yield from each_nested(visit, stmt_children(s))))

    return run_nested(visit(root))


def _decided_selects(body: Stmt, an: Analyzer) -> Stmt:
    """``body`` with every select whose condition ``an``'s domains decide replaced by the
    side it takes (simplify_pass ran on the domains before partitioning: a peeled loop
    variable's was the hull of both parts, so the main part's guards stayed)."""
    memo: dict[Expr, Expr] = {}

    def decide(e: Expr) -> Expr | None:
        if isinstance(e, Select):
            c = an.rewrite(e.cond)
            if isinstance(c, Const):
                return e.a if c.value else e.b
            if c is not e.cond:  # what the domain decides of it goes (the rest stays)
                return Select(c, e.a, e.b)
        return None

    return map_exprs(body, lambda e: rewrite(e, decide, memo))


def _rename_loop(loop: For) -> For:
    """``loop`` with fresh variables for it and every loop inside it."""
    mapping: dict[Expr, Expr] = {}
    for st in walk_stmts(loop):
        if isinstance(st, For):
            mapping[st.var] = Var(st.var.name, st.var.dtype, st.var.kind)

    def fresh(st: Stmt) -> Nested[Stmt]:
        st = with_stmt_children(st, (yield from each_nested(fresh, stmt_children(st))))
        if isinstance(st, For):
            new_var = mapping[st.var]
            assert isinstance(new_var, Var)
            return For(new_var, st.min, st.extent, st.kind, st.body, st.thread_tag)
        return st

    renamed = map_exprs(run_nested(fresh(loop)), lambda e: substitute(e, mapping))
    assert isinstance(renamed, For)
    return renamed


def remove_redundant_guards(func: LoweredFunc) -> LoweredFunc:
    """A condition already checked by an enclosing ``if`` (the same expression) is dropped:
    ``if (c) { ... if (c) { s } }`` -> ``if (c) { ... s }``."""

    def visit(s: Stmt, known: frozenset[Expr]) -> Nested[Stmt]:
        if isinstance(s, IfThenElse):
            if s.cond in known and s.else_case is None:
                return (yield visit(s.then_case, known))
            then = yield visit(s.then_case, known | {s.cond})
            other = None if s.else_case is None else (yield visit(s.else_case, known))
            return IfThenElse(s.cond, then, other)
        return with_stmt_children(s, (yield from each_nested(lambda c: visit(c, known),
                                                             stmt_children(s))))

    return LoweredFunc(func.name, func.params, run_nested(visit(func.body, frozenset())),
                       func.attrs)


def hoist_checks(func: LoweredFunc) -> LoweredFunc:
    """Bounds checks whose condition does not vary in a loop leave it (loop unswitching):
    ``for j { .. select(ok, A[..], report) .. }`` with ``ok`` independent of ``j`` ->
    ``if (ok) { for j { .. A[..] .. } } else { the loop as it was }``; an enclosing
    loop whose whole body is such an ``if`` moves into both branches (no copy), so a
    check on an embedding row ``I[i]`` is tested once per row. Only conditions safe to
    evaluate before the loop move (reads proven in bounds, none of a buffer the loop
    writes, no integer division by a variable); one condition per loop, so code at most
    doubles per check. Functions without checks are returned unchanged."""
    if not _has_checks(func) or any(isinstance(st, For) and st.kind is ForKind.THREAD
                                     for st in walk_stmts(func.body)):
        return func  # on a GPU an if around a loop could split a block at its barriers
    body = run_nested(_Unswitcher(Analyzer(function_domains(func))).visit(func.body))
    return LoweredFunc(func.name, func.params, body, func.attrs)


class _Unswitcher:
    """The loops of one function unswitched on their invariant bounds checks
    (``hoist_checks``); ``an`` knows the loop domains."""

    def __init__(self, an: Analyzer) -> None:
        self.an = an
        self.safe_memo: dict[Expr, bool] = {}
        self.made: set[int] = set()  # the ifs made here (an enclosing loop may move into them)

    def safe(self, e: Expr) -> bool:
        """``e`` may be evaluated anywhere: its reads are in bounds, it divides by
        constants only."""
        got = self.safe_memo.get(e)
        if got is None:
            got = True
            for n in post_order(e):
                if isinstance(n, TensorRead):
                    iv = self.an.bounds(n.indices[0]) if len(n.indices) == 1 else None
                    size = n.tensor.shape[0] if len(n.indices) == 1 else 0
                    if is_report(n.tensor) or iv is None or iv.lo is None or iv.lo < 0 or (
                            not self.an.at_most(n.indices[0], size - 1)
                            if not isinstance(size, int)
                            else iv.hi is None or iv.hi >= size):
                        got = False
                        break
                elif isinstance(n, Binary) and n.op in (Op.DIV, Op.FLOORDIV, Op.FLOORMOD) \
                        and not isinstance(n.b, Const):
                    got = False
                    break
            self.safe_memo[e] = got
        return got

    def movable(self, cond: Expr, loop: For) -> bool:
        """``cond`` has one value during ``loop`` and may be computed before it."""
        inner: set[Var] = {loop.var}
        stored: set[Tensor] = set()
        for st in walk_stmts(loop.body):
            if isinstance(st, (For, LetStmt)):
                inner.add(st.var)
            elif isinstance(st, (Store, Allocate)):
                stored.add(st.buffer)
        return self.safe(cond) and not any(
            (isinstance(x, Var) and x in inner) or (isinstance(x, TensorRead) and
                                                     x.tensor in stored)
            for x in post_order(cond))

    def invariant_check(self, loop: For) -> Expr | None:
        """The condition of the first bounds check in ``loop`` that may move before it."""
        for st in walk_stmts(loop.body):
            for e in stmt_exprs(st):
                for n in post_order(e):
                    if isinstance(n, Select) and _is_check(n) and self.movable(n.cond, loop):
                        return n.cond
        return None

    def unswitch(self, loop: For, cond: Expr, then: Stmt, other: Stmt) -> Stmt:
        """``if (cond) loop over then else loop over other`` (fresh loop variables)."""
        out = IfThenElse(cond, For(loop.var, loop.min, loop.extent, loop.kind, then,
                                   loop.thread_tag),
                         _rename_loop(For(loop.var, loop.min, loop.extent, loop.kind, other,
                                          loop.thread_tag)))
        self.made.add(id(out))
        return out

    def visit(self, s: Stmt) -> Nested[Stmt]:
        """``s`` with its loops unswitched, innermost first."""
        s = with_stmt_children(s, (yield from each_nested(self.visit, stmt_children(s))))
        if not isinstance(s, For) or s.kind is ForKind.THREAD:
            return s
        body = s.body
        if isinstance(body, IfThenElse) and id(body) in self.made and \
                body.else_case is not None and self.movable(body.cond, s):
            return self.unswitch(s, body.cond, body.then_case, body.else_case)
        cond = self.invariant_check(s)
        if cond is None:
            return s
        # the other copy keeps its checks (they fail there): strip_checks still sees them
        return self.unswitch(s, cond, _decide(body, cond), body)


def _decide(body: Stmt, cond: Expr) -> Stmt:
    """``body`` where ``cond`` holds: its checks on ``cond`` pass."""
    def fn(node: Expr) -> Expr | None:
        if isinstance(node, Select) and node.cond is cond and _is_check(node):
            return node.a
        return None
    memo: dict[Expr, Expr] = {}
    return map_exprs(body, lambda e: rewrite(e, fn, memo))


def _has_checks(func: LoweredFunc) -> bool:
    for st in walk_stmts(func.body):
        for e in stmt_exprs(st):
            if any(isinstance(n, TensorRead) and is_report(n.tensor) for n in post_order(e)):
                return True
    return False


def _is_check(s: Select) -> bool:
    """A bounds check: ``select(ok, read, report)``."""
    return isinstance(s.b, TensorRead) and is_report(s.b.tensor)


# the loop passes, in the order ``lower`` runs them (``TEX_DUMP=lower.<name>`` after each)
PASSES: tuple[tuple[str, Callable[[LoweredFunc], LoweredFunc]], ...] = (
    ("simplify", simplify_pass),
    ("hoist_checks", hoist_checks),
    ("partition_loops", partition_loops),
    ("tighten_vector_loops", tighten_vector_loops),
    ("remove_no_op", remove_no_op),
    ("remove_redundant_guards", remove_redundant_guards),
)

