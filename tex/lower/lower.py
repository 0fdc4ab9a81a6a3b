"""``lower``: a schedule and its arguments -> a loop nest over flat buffers (``LoweredFunc``).

How a schedule becomes loops (as in TVM's ScheduleOps + InferBound, on static shapes):

1. **Inlining.** Every stage marked ``compute_inline`` is substituted into its readers:
   ``T[i] = A[i] * 2; C[i] = T[i + 1]`` gives ``C[i] = A[i + 1] * 2``.
2. **Loop nests.** Each remaining stage iterates over its leaf variables in order. A leaf
   loop runs ``[0, extent)``; the original axes are rebuilt from the leaves by inverting the
   relations (split: ``i = i.outer * f + i.inner``; fuse: ``i = f // n_j``, ``j = f % n_j``).
   A split whose factor does not divide the extent guards the body with
   ``i.outer * f + i.inner < extent``, placed right inside the innermost loop it uses.
3. **Reductions.** ``C = reduce(src, k, where=c, init=v)`` becomes an init store before the
   first reduction loop (inside the data-parallel loops that precede it) and an update
   ``C = combine(C, src)`` under ``if (c)`` inside all loops.
4. **Scatters.** A one-hot sum over data-dependent indices (``tex.ir.scatter``: the gradient
   of ``take`` or of a max, ``C[p, q] = sum(H[i, q], i, where=p == I[i])``) becomes an init
   of ``C`` and one pass over its free and reduction loops that binds ``let p = I[i]``,
   checks ``0 <= p < extent`` (dropped when bounds prove it, as for clipped indices) and the
   rest of the condition, and adds into ``C[p, q]``: outputs + free x reduction points
   instead of outputs x reduction points. Each element receives the gather's terms in the
   gather's order: the same bits, deterministic, no atomics (leading parallel or
   thread-bound free loops enclose both parts; each iteration owns its elements). Chosen
   for a root stage whose scatter axes are plain serial loops (not split, fused, annotated
   or bound, and no stage computed at its loops); otherwise the gather of 3 runs. Affine
   invertible index maps never get here (the autodiff's integer solver already turns them
   into exact gathers); data-dependent ones (``take``, ``argsel``) do. A vectorized loop the
   index depends on runs serially: its lanes would scatter.
5. **compute_at (bound inference).** A stage attached at loop ``L`` of a consumer computes
   only the region the consumer reads during one iteration of ``L``: each read index is
   affine in the loops inside ``L``, so its range is ``[base + Σ min(c*(n-1), 0),
   ... + Σ |c|*(n-1)]`` with a constant extent. The producer's buffer holds just that region
   (allocated inside ``L``); non-affine indices fall back to the whole dimension. Points of
   the region outside the producer's shape are skipped by a guard. Other stages computed
   inside ``L`` may read the producer too: regions are inferred consumers first, so the
   producer's box covers their boxes' reads (softmax: max, exp and sum per row).
   A stage whose output is an argument is computed in place, in the caller's array: the
   boxes of the iterations must cover the tensor (checked on the enclosing loops), else the
   box is the whole tensor (serial loops) or the build is refused (parallel or thread
   loops), so that every argument ends up fully written. A box placed by data (a producer
   read at ``I[j]``) is the whole dimension.
6. **Storage flattening.** Every tensor lives in a 1-D buffer: arguments are parameters,
   other root stages are allocated around the whole body, attached ones inside their loop.
   Flat offsets into buffers of more than 2**31 - 1 elements, fused loops over more points
   and split remainders past it are computed in int64.
7. **Bounds of reads** (``tex.lower.bounds_check``, before any nest is built): a read out of
   bounds, unguarded, with an exact (affine) index range, is a ``ValueError``; a read not
   proven in bounds is wrapped in a run-time check (``select(ok, read, report)``), reads
   of inlined stages included (their checks wrap the inlined value).

Then the passes of ``PASSES`` run in order (each dumpable with ``TEX_DUMP=lower.<name>``):
simplification of indices and conditions with ``tex.arith`` on the loop domains, hoisting
of bounds checks out of the loops they do not depend on, loop partitioning, removal of
conditions it proves, and removal of empty statements.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import debug
from ..arith import Analyzer, Interval, bounds, dom_of
from ..arith.linear import AS_LE
from ..dtype import DTYPES, int32
from ..ir import fold
from ..ir.expr import (
    Binary,
    Compare,
    Const,
    Expr,
    IterVar,
    Op,
    Reduce,
    Select,
    TensorRead,
    Var,
)
from ..ir.scatter import ScatterForm, scatter_form_of
from ..ir.tensor import PlaceholderOp, Tensor
from ..ir.visit import post_order, rewrite, substitute
from ..schedule.inline import Inliner
from ..schedule.schedule import (
    PARALLEL,
    THREAD,
    UNROLL,
    VECTORIZE,
    Schedule,
    Split,
    Stage,
    create_schedule,
)
from .bounds_check import ReadChecker, is_report
from .stmt import (
    Allocate,
    BufferParam,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    LoweredFunc,
    Nested,
    Param,
    ScalarParam,
    Seq,
    Stmt,
    Store,
    each_nested,
    make_buffer,
    map_exprs,
    run_nested,
    seq,
    stmt_children,
    stmt_exprs,
    walk_stmts,
    with_stmt_children,
)

__all__ = ["lower", "PASSES"]

int64 = DTYPES["int64"]

_KIND = {PARALLEL: ForKind.PARALLEL, VECTORIZE: ForKind.VECTORIZED, UNROLL: ForKind.UNROLLED,
         THREAD: ForKind.THREAD}
_INT32_LIMIT = 2**31 - 1


def _i32(v: int) -> Const:
    return fold.const(int(v), int32)


# --------------------------------------------------------------------------------------
# Storage
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Storage:
    """Where a tensor's elements live: a flat buffer holding the box ``offsets + [0, extents)``
    of the tensor (the whole tensor unless computed at a loop of another stage)."""

    buffer: Tensor
    extents: tuple[int, ...]
    offsets: tuple[Expr, ...] | None = None  # None: all zero

    def flat_index(self, indices: Sequence[Expr]) -> Expr:
        """Row-major flat index of ``tensor[indices]`` in the buffer."""
        if not self.extents:
            return _i32(0)
        wide = math.prod(self.extents) > _INT32_LIMIT
        acc: Expr | None = None
        for d, (ix, n) in enumerate(zip(indices, self.extents)):
            if self.offsets is not None:
                ix = ix - self.offsets[d]
            if wide:
                ix = fold.cast(int64, ix)
            acc = ix if acc is None else acc * n + ix
        assert acc is not None  # for the type checker: extents is not empty
        return acc


class _Names:
    """Unique buffer names within one function."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def fresh(self, name: str) -> str:
        base = name.replace(" ", "_") or "buf"
        cand, n = base, 1
        while cand in self.used:
            n += 1
            cand = f"{base}_{n}"
        self.used.add(cand)
        return cand


# --------------------------------------------------------------------------------------
# One stage's loop nest
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Region:
    """The box of a tensor a stage computed at a loop produces: ``los + [0, exts)``."""

    los: tuple[Expr, ...]
    exts: tuple[int, ...]


@dataclass
class _Level:
    """One leaf loop of a stage: the loop, then what runs at the start of its body."""

    iv: IterVar
    var: Var
    extent: int
    kind: ForKind
    tag: str
    guards: list[Expr] = field(default_factory=list)
    # producers computed at the start of this loop's body: (nest, its buffers, their scope)
    attached: list[tuple[Stmt, list[Tensor], str]] = field(default_factory=list)
    # values bound inside the guards, each with its own guard or None (a scatter's index)
    lets: list[tuple[Var, Expr, Expr | None]] = field(default_factory=list)

    @property
    def is_thread(self) -> bool:
        """Bound to a GPU thread or block index (a hardware index, not a loop)."""
        return self.kind is ForKind.THREAD

    def relaxed_by(self, scope: str) -> bool:
        """Whether a buffer of ``scope`` computed inside this loop is shared by the
        loop's iterations (they run on other threads): ``shared`` memory by the threads of
        a block, ``global`` memory by every thread."""
        if not self.is_thread:
            return False
        if scope == "shared":
            return self.tag.startswith("threadIdx")
        return scope == "global"


class _Lowerer:
    def __init__(self, sch: Schedule, storage: dict[Tensor, _Storage], names: _Names,
                 scalars: set[Var]) -> None:
        self.sch = sch
        self.storage = storage
        self.params = {t: where for t, where in storage.items()}  # the arguments' storage
        self.names = names
        self.scalars = scalars
        self.checker = ReadChecker(scalars)
        self.inliner = Inliner(sch, self.checker.wrap_inlined)
        self.attached: dict[tuple[int, IterVar], list[Stage]] = {}
        for st in sch.stages:
            if st.attach_type == "scope":
                parent, iv = st.attach_stage, st.attach_ivar
                assert parent is not None and iv is not None
                if not any(iv is v for v in parent.leaf_iter_vars):
                    raise debug.InternalError(
                        f"lower: '{st.name}' is computed at '{iv.name}', which is no longer a "
                        f"loop of '{parent.name}' (its loops are "
                        f"{', '.join(v.name for v in parent.leaf_iter_vars)})")
                self.check_readers(st)
                self.attached.setdefault((id(parent), iv), []).append(st)
        self.bodies: dict[Stage, list[Expr]] = {}
        self.order = {stage: n for n, stage in enumerate(sch.stages)}
        # GPU lowering: loops bound to thread indices are hoisted outermost in each stage,
        # guards on thread indices wrap only the stage's own stores, reductions over a
        # thread-bound axis combine across threads through shared memory
        self.gpu = any(st.bindings for st in sch.stages)

    def body_of(self, st: Stage) -> list[Expr]:
        got = self.bodies.get(st)
        if got is None:
            got = [self.inliner.expand(e) for e in st.op.body]
            self.bodies[st] = got
        return got

    # -- ranges and relations ------------------------------------------------------------------
    def nest(self, st: Stage, root_min: Mapping[IterVar, Expr], root_ext: Mapping[IterVar, int],
             clip: Mapping[IterVar, int], env: dict[Tensor, _Storage],
             outer: Sequence[_Level] = ()) -> Nested[Stmt]:
        """The loop nest of ``st`` over the given root ranges (``clip``: root axes whose
        values must stay below the given bound, for regions larger than the tensor;
        ``env``: where each tensor is stored, extended by the stages attached inside this
        nest while it is built and restored after; ``outer``: the loops of the stages
        this one is computed inside, one-iteration loops left out). ``Nested`` with
        ``build_attached``: a chain of stages each computed at the next nests as deep as
        the chain is long, so nothing here costs more than the stage's own loops (no copy
        of ``env`` or ``outer`` per stage: that made a chain quadratic)."""
        undo: list[tuple[Tensor, _Storage | None]] = []
        try:
            return (yield self.stage_nest(st, root_min, root_ext, clip, env, outer, undo))
        finally:
            for t, old in reversed(undo):
                if old is None:
                    del env[t]
                else:
                    env[t] = old

    def stage_nest(self, st: Stage, root_min: Mapping[IterVar, Expr],
                   root_ext: Mapping[IterVar, int], clip: Mapping[IterVar, int],
                   env: dict[Tensor, _Storage], outer: Sequence[_Level],
                   undo: list[tuple[Tensor, _Storage | None]]) -> Nested[Stmt]:
        """The body of ``nest``; the stages attached here record in ``undo`` what they
        add to ``env``."""
        ext: dict[IterVar, int] = dict(root_ext)
        for rel in st.relations:
            if isinstance(rel, Split):
                n = ext[rel.parent]
                ext[rel.inner] = rel.factor
                ext[rel.outer] = max(1, -(-n // rel.factor))
            else:
                ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
        leaves = list(st.leaf_iter_vars)
        levels: list[_Level] = []
        value: dict[IterVar, Expr] = {}
        for iv in leaves:
            n = ext[iv]
            ann = st.annotations.get(iv, "serial")
            kind = _KIND.get(ann, ForKind.SERIAL)
            # a fused loop over more than 2**31 - 1 points counts in int64
            var = Var(iv.name, int64 if n > _INT32_LIMIT else int32, "axis")
            tag = st.bindings[iv].tag if iv in st.bindings else ""
            if tag == "vthread":  # a virtual thread: iterations interleaved in one thread
                kind, tag = ForKind.UNROLLED, ""
            levels.append(_Level(iv, var, n, kind, tag))
            # a one-iteration loop is no loop (unless bound to a GPU thread)
            value[iv] = _i32(0) if n == 1 and kind is not ForKind.THREAD else var
        guards: list[Expr] = []
        for rel in reversed(st.relations):
            if isinstance(rel, Split):
                o, i = value[rel.outer], value[rel.inner]
                if ext[rel.outer] * rel.factor > _INT32_LIMIT:  # the remainder overflows
                    o, i = fold.cast(int64, o), fold.cast(int64, i)
                v = o * fold.const(rel.factor, o.dtype) + i
                value[rel.parent] = v
                if ext[rel.outer] * rel.factor != ext[rel.parent]:
                    guards.append(v < ext[rel.parent])
            else:
                n_in = ext[rel.inner]
                value[rel.outer] = value[rel.fused] // n_in
                value[rel.inner] = value[rel.fused] % n_in
        roots = [*st.op.axis, *st.op.reduce_axis]
        point: dict[Var, Expr] = {}
        for iv in roots:
            v = value[iv]
            if v.dtype is not iv.var.dtype:  # computed in int64: in range, narrowed
                v = fold.cast(iv.var.dtype, v)
            lo = root_min.get(iv)
            if lo is not None and not (isinstance(lo, Const) and lo.value == 0):
                v = lo + v
            point[iv.var] = v
            bound = clip.get(iv)
            if bound is not None:
                guards.append((v >= 0) & (v < bound))
        if self.gpu:
            # a thread-bound loop is a hardware index: hoisted outermost it changes nothing
            # for the stage, and every loop inside it sees it as fixed
            levels.sort(key=lambda lv: not lv.is_thread)
        # each guard goes right inside the innermost loop whose variable it uses; on a GPU,
        # a guard on a thread index wraps only the stage's own stores: the threads it turns
        # off still take their part in the producers computed inside (a shared tile)
        depth = {lv.var: k for k, lv in enumerate(levels)}
        thread_vars = {lv.var for lv in [*outer, *levels]
                       if lv.is_thread and lv.tag.startswith("threadIdx")}
        top_guards: list[Expr] = []
        own_guards: list[Expr] = []
        for g in guards:
            used = [n for n in post_order(g) if isinstance(n, Var)]
            ks = [depth[n] for n in used if n in depth]
            if self.gpu and any(n in thread_vars for n in used):
                own_guards.append(g)
            elif ks:
                levels[max(ks)].guards.append(g)
            else:
                top_guards.append(g)
        reduce_pos = next((k for k, lv in enumerate(levels) if lv.iv.kind == "reduce"),
                          len(levels))
        is_reduction = isinstance(st.op.body[0], Reduce)

        # attached stages: regions consumers first (a producer's region covers what its
        # attached consumers read), then nests outermost level first, each extending the
        # environment inward
        children = [(k, child) for k, lv in enumerate(levels)
                    for child in self.attached.get((id(st), lv.iv), [])]
        regions: dict[Stage, _Region] = {}
        for k, child in sorted(children, key=lambda kc: -self.order[kc[1]]):
            regions[child] = self.infer_region(child, st, levels, k, point, children, regions,
                                               outer)
        for k, child in children:
            # GPU threads of the block that run inside the attach point share the box
            sharing = [lv for lv in levels[k + 1:]
                       if lv.is_thread and lv.tag.startswith("threadIdx")]
            levels[k].attached.append((yield self.build_attached(
                child, regions[child], env, undo, [*outer, *_loops(levels[:k + 1])],
                sharing)))
        body = self.body_of(st)
        outputs = st.op.outputs

        def read(e: Expr) -> Expr:
            return self.flatten_reads(substitute(self.checker.checked(e), point), env)

        def store_index(t: Tensor) -> Expr:
            return env[t].flat_index([point[iv.var] for iv in st.op.axis])

        if not is_reduction:
            stores = [Store(env[t].buffer, store_index(t), read(e)) for t, e in zip(outputs, body)]
            return _wrap_guards(top_guards, _assemble(
                levels, 0, len(levels), _wrap_guards(own_guards, seq(*stores))))
        if any(lv.is_thread and lv.iv.kind == "reduce" for lv in levels):
            return _wrap_guards(top_guards, self.cross_thread_reduction(
                st, levels, read, store_index, own_guards, env))
        form = None if children or outer else self.scatter_plan(st, levels)
        if form is not None:
            return _wrap_guards(top_guards, self.scatter_nest(
                st, form, levels, point, read, store_index, own_guards, env))

        red = body[0]
        assert isinstance(red, Reduce)  # is_reduction
        combiner = red.combiner
        inits = list(red.init) or list(combiner.identity)
        init_stores = seq(*(Store(env[t].buffer, store_index(t), read(inits[r.value_index]))
                            for t, r in zip(outputs, body) if isinstance(r, Reduce)))
        cur = {combiner.lhs[r.value_index]: TensorRead(env[t].buffer, [store_index(t)])
               for t, r in zip(outputs, body) if isinstance(r, Reduce)}
        src = {rhs: read(s) for rhs, s in zip(combiner.rhs, red.source)}
        new_values = [substitute(res, {**cur, **src}) for res in combiner.result]
        slots = [(t, r.value_index) for t, r in zip(outputs, body) if isinstance(r, Reduce)]
        update = _store_all([(env[t].buffer, store_index(t)) for t, _ in slots],
                            [new_values[vi] for _, vi in slots],
                            [f"{t.name}.next" for t, _ in slots])
        cond = read(red.condition)
        lane_vars = {lv.var for lv in levels if lv.kind is ForKind.VECTORIZED}
        if len(slots) == 1 and lane_vars:
            # conjuncts that vary across the lanes of a vectorized loop become a select
            # on the new value (a blend), not a masked branch around the update
            parts = fold.conjuncts(cond)
            lane = [c for c in parts if any(isinstance(n, Var) and n in lane_vars
                                            for n in post_order(c))]
            if lane:
                rest = [c for c in parts if c not in lane]
                t, vi = slots[0]
                old_value = TensorRead(env[t].buffer, [store_index(t)])
                update = Store(env[t].buffer, store_index(t),
                               Select(fold.conjoin(lane), new_values[vi], old_value))
                cond = fold.conjoin(rest)
        if not (isinstance(cond, Const) and bool(cond.value)):
            update = IfThenElse(cond, update)
        update = _wrap_guards(own_guards, update)
        init_stores = _wrap_guards(own_guards, init_stores)
        main = _assemble(levels, reduce_pos, len(levels), update)
        spatial_inner = [lv for lv in levels[reduce_pos:] if lv.iv.kind != "reduce"]
        init_levels = [_copy_level(lv) for lv in spatial_inner]
        init = _assemble(init_levels, 0, len(init_levels), init_stores)
        inner = seq(init, main)
        return _wrap_guards(top_guards, _assemble(levels, 0, reduce_pos, inner))

    # -- one-hot sums over data-dependent indices: scatters --------------------------------
    def scatter_plan(self, st: Stage, levels: Sequence[_Level]) -> ScatterForm | None:
        """The scatter form of a root stage when its schedule lets the scatter nest run it
        (see the module docstring), else None (the gather nest)."""
        if st.attach_type != "root" or len(st.op.body) != 1:
            return None
        form = scatter_form_of(st.op.axis, self.body_of(st)[0])
        if form is None:
            return None
        by_iv = {lv.iv: lv for lv in levels}
        for iv in form.axes:
            lv = by_iv.get(iv)
            # a scatter axis must still be a plain loop of its own: split, fused,
            # annotated or bound to a thread index, it no longer is one value per point
            if lv is None or lv.kind is not ForKind.SERIAL or lv.tag or lv.guards:
                return None
        return form

    def scatter_nest(self, st: Stage, form: ScatterForm, levels: Sequence[_Level],
                     point: Mapping[Var, Expr], read: Callable[[Expr], Expr],
                     store_index: Callable[[Tensor], Expr], own_guards: Sequence[Expr],
                     env: Mapping[Tensor, _Storage]) -> Stmt:
        """``C[.., p, ..] = sum(src, k, where=p == g && rest)`` as an init of ``C`` and
        one pass over the free and reduction loops that computes ``p = g`` and adds
        ``src`` into ``C[.., p, ..]`` when ``p`` is in range and ``rest`` holds::

            for p, q: C[p, q] = init
            for q: for k: let p = g; if (0 <= p < n) { if (rest) C[p, q] += src }

        Leading parallel or thread-bound free loops enclose both parts (each iteration
        owns its elements: one parallel region, one kernel). Every element receives the
        gather nest's contributions in the same order: the result is the same, bit for
        bit, with no atomics."""
        t = st.op.output(0)
        red = form.reduce
        scatter = set(form.axes)
        shape = [*st.op.axis, *st.op.reduce_axis]
        # p = g, bound once where g's loops are known; its range guard right after
        lets: list[tuple[Var, Expr, Expr | None]] = []
        bound: dict[Var, Expr] = dict(point)
        for iv, g in zip(form.axes, form.indices):
            value = self.flatten_reads(substitute(g, point), env)
            var = Var(iv.name, g.dtype, "axis")
            lo, hi = iv.dom.min, iv.dom.min + iv.dom.extent - 1
            known = bounds(g, shape)
            inside = known.lo is not None and known.hi is not None and \
                known.lo >= lo and known.hi <= hi
            guard = None if inside else (var >= lo) & (var < hi + 1)
            lets.append((var, value, guard))
            # a wider index is checked before it is narrowed to the axis' dtype
            bound[iv.var] = var if g.dtype is iv.var.dtype else fold.cast(iv.var.dtype, var)

        def read_at(e: Expr) -> Expr:
            return self.flatten_reads(substitute(self.checker.checked(e), bound), env)

        # the update
        buf = env[t].buffer
        index = env[t].flat_index([bound[iv.var] for iv in st.op.axis])
        combiner = red.combiner
        new_value = substitute(combiner.result[0], {
            combiner.lhs[0]: TensorRead(buf, [index]), combiner.rhs[0]: read_at(red.source[0])})
        update: Stmt = Store(buf, index, new_value)
        cond = read_at(form.condition)
        if not (isinstance(cond, Const) and bool(cond.value)):
            # a branch, not a blend across vector lanes: the store's index is data
            update = IfThenElse(cond, update)
        update = _wrap_guards(own_guards, update)
        init_value = read(red.init[0] if red.init else combiner.identity[0])
        init: Stmt = _wrap_guards(own_guards, Store(buf, store_index(t), init_value))

        rest = [lv for lv in levels if lv.iv not in scatter]
        n_shared = 0
        while n_shared < len(rest) and rest[n_shared].iv.kind != "reduce" and \
                rest[n_shared].kind in (ForKind.PARALLEL, ForKind.THREAD):
            n_shared += 1
        shared = rest[:n_shared]
        init_levels = [_copy_level(lv) for lv in levels
                       if lv.iv.kind != "reduce" and not any(lv is x for x in shared)]
        index_vars = {n for _, value, _ in lets for n in post_order(value) if isinstance(n, Var)}
        update_levels = [
            # lanes with different indices would scatter: that loop runs serially
            _copy_level(lv, ForKind.SERIAL if lv.kind is ForKind.VECTORIZED and
                        lv.var in index_vars else None)
            for lv in rest[n_shared:]]
        depth = {lv.var: k for k, lv in enumerate(update_levels)}
        top_lets = []
        for let in lets:
            ks = [depth[n] for n in post_order(let[1]) if isinstance(n, Var) and n in depth]
            if ks:
                update_levels[max(ks)].lets.append(let)
            else:
                top_lets.append(let)
        nests = seq(_assemble(init_levels, 0, len(init_levels), init),
                    _wrap_lets(top_lets, _assemble(update_levels, 0, len(update_levels),
                                                   update)))
        return _assemble(shared, 0, len(shared), nests)

    # -- compute_at -----------------------------------------------------------------------------
    def check_readers(self, child: Stage) -> None:
        """Every stage that reads ``child`` (but its attach stage) must be computed inside
        the same loop nest: attached to the same stage (the level is checked by
        ``infer_region``)."""
        parent = child.attach_stage
        assert parent is not None and child.attach_ivar is not None
        for other in self.sch.consumers(child):
            if other is not parent and other is not child and other.attach_stage is not parent:
                raise _outside_reader(child, parent, child.attach_ivar.name, other)

    def scope_of(self, child: Stage, enclosing: Sequence[_Level]) -> str:
        """The memory scope of an attached stage: its own if set; on a GPU, by default
        ``local`` inside a thread index, ``shared`` inside a block index only (as TVM)."""
        if child.scope != "global" or not self.gpu:
            return child.scope
        tags = [lv.tag for lv in enclosing if lv.is_thread]
        if any(t.startswith("threadIdx") for t in tags):
            return "local"
        return "shared" if tags else "global"

    def infer_region(self, child: Stage, parent: Stage, levels: list[_Level], k: int,
                     point: Mapping[Var, Expr], children: Sequence[tuple[int, Stage]],
                     regions: Mapping[Stage, _Region], outer: Sequence[_Level] = ()
                     ) -> _Region:
        """The box of ``child`` read during one iteration of loop ``k`` of ``parent``: by
        ``parent`` itself and by the stages attached inside that loop (regions known).
        On a GPU the box also covers the threads that share the child's buffer (a shared
        tile serves every thread of the block)."""
        loop = levels[k].iv.name
        ranging = {lv.var: lv.extent for lv in levels[k + 1:]}
        enclosing = [*outer, *_loops(levels[:k + 1])]
        scope = self.scope_of(child, enclosing)
        ranging.update({lv.var: lv.extent for lv in enclosing if lv.relaxed_by(scope)})
        reads = [r for e in self.body_of(parent) for r in post_order(substitute(e, point))
                 if isinstance(r, TensorRead) and r.tensor.op is child.op]
        siblings = {q: j for j, q in children}
        for other in self.sch.consumers(child):
            if other is parent or other is child:
                continue
            j = siblings.get(other)
            if j is None or j < k or other not in regions:
                raise _outside_reader(child, parent, loop, other)
            # the sibling's axes range over its own region, its reductions over their domains
            box = regions[other]
            qpoint: dict[Var, Expr] = {}
            for iv, lo, n in zip(other.op.axis, box.los, box.exts):
                v = Var(f"{iv.name}.r", int32, "axis")
                ranging[v] = n
                qpoint[iv.var] = lo + v
            for iv in other.op.reduce_axis:
                v = Var(f"{iv.name}.r", int32, "axis")
                ranging[v] = iv.dom.extent
                qpoint[iv.var] = v + iv.dom.min
            reads += [r for e in self.body_of(other) for r in post_order(substitute(e, qpoint))
                      if isinstance(r, TensorRead) and r.tensor.op is child.op]
        an = Analyzer({v: Interval(0, n - 1) for v, n in ranging.items()})
        los: list[Expr] = []
        exts: list[int] = []
        for d, n_d in enumerate(child.op.shape):
            region = Analyzer.union_range([an.affine_range(r.indices[d], ranging) for r in reads])
            if region is not None and any(isinstance(x, TensorRead)
                                          for x in post_order(region[0])):
                region = None  # a box placed by data: the whole dimension
            if region is None or region[1] >= n_d:
                los.append(_i32(0))
                exts.append(n_d)
            else:
                los.append(region[0])
                exts.append(region[1])
        return _Region(tuple(los), tuple(exts))

    def build_attached(self, child: Stage, box: _Region, env: dict[Tensor, _Storage],
                       undo: list[tuple[Tensor, _Storage | None]],
                       enclosing: Sequence[_Level] = (), sharing: Sequence[_Level] = ()
                       ) -> Nested[tuple[Stmt, list[Tensor], str]]:
        """The nest of ``child`` over its region; registers its buffers in ``env``, each
        with the entry it replaces in ``undo`` (``enclosing``: the loops around the attach
        point, outermost first; ``sharing``: the GPU thread indices inside it, whose
        threads share the box)."""
        root_min: dict[IterVar, Expr] = dict(zip(child.op.axis, box.los))
        root_ext: dict[IterVar, int] = dict(zip(child.op.axis, box.exts))
        for iv in child.op.reduce_axis:
            root_min[iv] = _i32(iv.dom.min)
            root_ext[iv] = iv.dom.extent
        if any(t in self.params for t in child.op.outputs):
            if sharing or any(lv.is_thread for lv in enclosing) and child.bindings:
                # the threads of a block would exchange the argument's elements through
                # global memory, with no barrier between writes and reads
                assert child.attach_ivar is not None and child.attach_stage is not None
                where = f"outside {', '.join(repr(lv.tag) for lv in sharing)}" if sharing \
                    else "with thread-bound loops of its own"
                raise ValueError(
                    f"lower: '{child.name}' is an argument computed at "
                    f"'{child.attach_ivar.name}' of '{child.attach_stage.name}' {where}: the "
                    "threads of a block would share it through global memory; compute it at "
                    "the innermost thread loop, compute_root it, or leave it out of the "
                    "arguments (a shared-memory copy is a stage of its own: cache_read)")
            box = self.argument_box(child, box, enclosing)
            root_min.update(zip(child.op.axis, box.los))
            root_ext.update(zip(child.op.axis, box.exts))
        clip: dict[IterVar, int] = {}
        for iv, lo, e, n_d in zip(child.op.axis, box.los, box.exts, child.op.shape):
            if not (isinstance(lo, Const) and lo.value == 0 and e == n_d):
                clip[iv] = n_d
        buffers: list[Tensor] = []
        for t in child.op.outputs:
            undo.append((t, env.get(t)))
            if t in self.params:  # an argument: computed in place, in the caller's array
                env[t] = self.params[t]
                continue
            buf = make_buffer(self.names.fresh(t.name), math.prod(box.exts), t.dtype)
            buffers.append(buf)
            env[t] = _Storage(buf, box.exts, box.los)
        return ((yield self.nest(child, root_min, root_ext, clip, env, enclosing)), buffers,
                self.scope_of(child, enclosing))

    def argument_box(self, child: Stage, box: _Region, enclosing: Sequence[_Level]
                     ) -> _Region:
        """The box an attached stage whose output is an argument computes per iteration:
        ``box`` (what its readers need) when the boxes of all iterations of the enclosing
        loops cover the whole tensor (without overlap when a loop runs in parallel), else
        the whole tensor when every enclosing loop is serial (each iteration recomputes
        it, in place); otherwise ``ValueError``."""
        shape = tuple(int(n) for n in child.op.shape)
        whole = _Region(tuple(_i32(0) for _ in shape), shape)
        if box.exts == shape and all(isinstance(lo, Const) and lo.value == 0
                                     for lo in box.los):
            return box
        parallel = [lv for lv in enclosing
                    if lv.kind in (ForKind.PARALLEL, ForKind.THREAD) and lv.extent > 1]
        tiling = _tiling(box, shape, enclosing)
        if tiling is not None and (tiling == "disjoint" or not parallel):
            return box
        if not parallel:
            return whole
        loops = ", ".join(f"'{lv.iv.name}'" for lv in parallel)
        assert child.attach_ivar is not None and child.attach_stage is not None
        raise ValueError(
            f"lower: '{child.name}' is an argument (the caller's array must be written in "
            f"full), but it is computed at '{child.attach_ivar.name}' of "
            f"'{child.attach_stage.name}' inside the parallel loop(s) {loops}, whose "
            f"iterations compute {'overlapping parts' if tiling else 'only parts'} of it; "
            f"compute_root '{child.name}', or leave it out of the arguments")

    # -- reductions across GPU threads -------------------------------------------------------
    def cross_thread_reduction(self, st: Stage, levels: list[_Level],
                               read: Callable[[Expr], Expr],
                               store_index: Callable[[Tensor], Expr],
                               own_guards: Sequence[Expr], env: Mapping[Tensor, _Storage]
                               ) -> Stmt:
        """A reduction with an axis bound to thread indices: each thread reduces its share
        into a register, the partial results meet in shared memory and are combined by a
        tree (halving the active threads each step, barriers between steps), and the
        threads whose reduction index is 0 store the result::

            acc = identity; for k: acc = combine(acc, src)      # per thread
            red[s*R + r] = acc                                   # r: reduce thread index
            if (r < R - p) red[s*R + r] = combine(red[s*R + r], red[s*R + r + p])
            if (r < p/2) ... ; ... ; if (r < 1) ...              # p: 2**floor(log2 R)
            if (r == 0) C[...] = combine(init, red[s*R])
        """
        body = self.body_of(st)
        red = body[0]
        assert isinstance(red, Reduce)
        combiner = red.combiner
        threads = [lv for lv in levels if lv.is_thread]
        rest = [lv for lv in levels if not lv.is_thread]
        first = next((k for k, lv in enumerate(rest) if lv.iv.kind == "reduce"), len(rest))
        pre, loops = rest[:first], rest[first:]
        for lv in loops:
            if lv.iv.kind != "reduce":
                raise ValueError(
                    f"lower: '{st.name}' reduces across GPU threads, so its data-parallel "
                    f"loop '{lv.iv.name}' must come before its reduction loops; reorder it "
                    "outside them")
        reduce_vars = {lv.var for lv in levels if lv.iv.kind == "reduce"}
        n_values = len(combiner.lhs)
        dtypes = [v.dtype for v in combiner.lhs]
        accs = [make_buffer(self.names.fresh(f"{st.name}.acc"), 1, d) for d in dtypes]
        acc = [TensorRead(a, [_i32(0)]) for a in accs]
        init = seq(*(Store(a, _i32(0), combiner.identity[j]) for j, a in enumerate(accs)))
        src = {rhs: read(e) for rhs, e in zip(combiner.rhs, red.source)}

        def combined(lhs: Sequence[Expr], rhs: Mapping[Var, Expr] | None,
                     targets: Sequence[tuple[Tensor, Expr]]) -> Stmt:
            mapping: dict[Var, Expr] = dict(zip(combiner.lhs, lhs))
            mapping.update(rhs if rhs is not None else {})
            values = [substitute(r, mapping) for r in combiner.result]
            return _store_all(targets, values, [f"{st.name}.next{j}" for j in range(n_values)])

        update = combined(acc, src, [(a, _i32(0)) for a in accs])
        cond = read(red.condition)
        if not (isinstance(cond, Const) and bool(cond.value)):
            update = IfThenElse(cond, update)
        main = _assemble(loops, 0, len(loops), _wrap_guards(own_guards, update))

        # the block's threads of this stage: reduction threads fastest (mixed radix)
        def radix(lvs: Sequence[_Level]) -> tuple[Expr, int]:
            ix: Expr = _i32(0)
            n = 1
            for lv in lvs:
                ix = ix * lv.extent + lv.var
                n *= lv.extent
            return ix, n

        for lv in threads:
            if lv.iv.kind == "reduce" and not lv.tag.startswith("threadIdx"):
                raise ValueError(
                    f"lower: the reduction axis '{lv.iv.name}' of '{st.name}' is bound to "
                    f"{lv.tag}; blocks cannot combine their results in one kernel: bind it to "
                    "threadIdx, or rfactor it and bind the new data-parallel axis to blocks")
        # shared memory is per block: its index is over the block's threads only
        r, n_r = radix([lv for lv in threads if lv.iv.kind == "reduce"])
        sp, n_s = radix([lv for lv in threads
                         if lv.iv.kind != "reduce" and lv.tag.startswith("threadIdx")])
        base = sp * n_r
        bufs = [make_buffer(self.names.fresh(f"{st.name}.red"), n_s * n_r, d) for d in dtypes]

        def at(j: int, offset: int = 0) -> Expr:
            return TensorRead(bufs[j], [base + r + offset] if offset else [base + r])

        steps: list[Stmt] = [seq(*(Store(b, base + r, acc[j]) for j, b in enumerate(bufs)))]
        p = 1 << (n_r.bit_length() - 1)
        strides = ([p] if n_r > p else []) + [1 << e for e in reversed(range(p.bit_length() - 1))]
        for step in strides:
            live = n_r - p if step == p else step
            partner = {rhs: at(j, step) for j, rhs in enumerate(combiner.rhs)}
            steps.append(IfThenElse(r < live, combined([at(j) for j in range(n_values)],
                                                       partner,
                                                       [(b, base + r) for b in bufs])))
        total = [TensorRead(b, [base]) for b in bufs]
        if red.init:
            inits = [read(e) for e in red.init]
            finals = [substitute(res, {**dict(zip(combiner.lhs, inits)),
                                       **dict(zip(combiner.rhs, total))})
                      for res in combiner.result]
        else:
            finals = total
        stores = seq(*(Store(env[t].buffer, store_index(t), finals[e.value_index])
                       for t, e in zip(st.op.outputs, body) if isinstance(e, Reduce)))
        spatial_guards = [g for g in own_guards
                          if not any(n in reduce_vars for n in post_order(g))]
        steps.append(IfThenElse(r == 0, _wrap_guards(spatial_guards, stores)))
        block: Stmt = seq(*steps)
        for b in reversed(bufs):
            block = Allocate(b, "shared", block)
        block = seq(init, main, block)
        for a in reversed(accs):
            block = Allocate(a, "local", block)
        return _assemble([*threads, *pre], 0, len(threads) + len(pre), block)

    # -- reads ------------------------------------------------------------------------------
    def check_reads(self) -> None:
        """Every stage's reads proven in bounds, refused (``ValueError``) or marked for a
        run-time check (``tex.lower.bounds_check``): every stage on its own body first
        (reads of inlined stages included: their checks wrap the inlined values), then
        the stages that are not inlined on their bodies with the inlined ones expanded."""
        for st in self.sch.stages:
            self.checker.analyze(st.name, list(st.op.body),
                                 dom_of([*st.op.axis, *st.op.reduce_axis]))
        for st in self.sch.stages:
            if st.attach_type != "inline":
                self.checker.analyze(st.name, self.body_of(st),
                                     dom_of([*st.op.axis, *st.op.reduce_axis]))

    def flatten_reads(self, e: Expr, env: Mapping[Tensor, _Storage]) -> Expr:
        def fn(node: Expr) -> Expr | None:
            if isinstance(node, TensorRead) and is_report(node.tensor):
                return None  # a bounds report: its index is a value, not a position
            if isinstance(node, TensorRead):
                where = env.get(node.tensor)
                if where is None:
                    raise debug.InternalError(f"lower: no storage for '{node.tensor.name}'")
                return TensorRead(where.buffer, [where.flat_index(node.indices)])
            if isinstance(node, Var) and node.kind == "var" and node not in self.scalars:
                raise ValueError(f"lower: the computation uses the free variable '{node.name}' "
                                 "(a tex.var); pass it in args to make it a scalar argument")
            return None
        return rewrite(e, fn)


def _tiling(box: _Region, shape: Sequence[int], enclosing: Sequence[_Level]) -> str | None:
    """How the boxes ``box.los + [0, box.exts)`` of all iterations of the enclosing loops
    cover a tensor of ``shape``: "disjoint" (each element once), "overlapping", or None
    when they may leave elements out (or that cannot be shown: each low must be affine in
    loop variables no other dimension uses, over at most 2**16 values)."""
    extent = {lv.var: lv.extent for lv in enclosing}
    an = Analyzer()
    used: set[Var] = set()
    disjoint = True
    for lo, ext, n in zip(box.los, box.exts, shape):
        lf = an.linear(lo)
        if any(not (isinstance(v, Var) and v in extent) or v in used for v in lf.terms):
            return None
        used.update(lf.terms)  # type: ignore[arg-type]
        values = [lf.const]
        for v, c in lf.terms.items():
            if math.prod(extent[w] for w in lf.terms) > 1 << 16:
                return None
            values = [x + c * k for x in values for k in range(extent[v])]  # type: ignore[index]
        values.sort()
        if values[0] > 0 or values[-1] + ext < n:
            return None
        for a, b in zip(values, values[1:]):
            if b - a > ext:
                return None
            if b - a < ext:
                disjoint = False
    if any(lv.extent > 1 and lv.var not in used for lv in enclosing):
        disjoint = False  # a loop the box does not move with recomputes it
    return "disjoint" if disjoint else "overlapping"


def _outside_reader(child: Stage, parent: Stage, loop: str, other: Stage) -> ValueError:
    return ValueError(
        f"lower: '{child.name}' is computed at loop '{loop}' of '{parent.name}', but "
        f"'{other.name}' reads it outside that loop; compute '{other.name}' inside it too "
        f"(at '{loop}' or deeper), or compute_root '{child.name}'")


def _store_all(targets: Sequence[tuple[Tensor, Expr]], values: Sequence[Expr],
               names: Sequence[str]) -> Stmt:
    """``buf[ix] = value`` for each target; several at once through let-bound temporaries,
    so every value is computed from the old contents (a multi-value combiner's update)."""
    if len(targets) == 1:
        return Store(targets[0][0], targets[0][1], values[0])
    tmps = [Var(n, v.dtype) for n, v in zip(names, values)]
    out: Stmt = seq(*(Store(b, ix, tmp) for (b, ix), tmp in zip(targets, tmps)))
    for tmp, v in reversed(list(zip(tmps, values))):
        out = LetStmt(tmp, v, out)
    return out


def _wrap_guards(guards: Sequence[Expr], body: Stmt) -> Stmt:
    for g in reversed(guards):
        body = IfThenElse(g, body)
    return body


def _wrap_lets(lets: Sequence[tuple[Var, Expr, Expr | None]], body: Stmt) -> Stmt:
    """``let v = value; if (guard) body`` for each binding, the first outermost."""
    for var, value, guard in reversed(lets):
        if guard is not None:
            body = IfThenElse(guard, body)
        body = LetStmt(var, value, body)
    return body


def _loops(levels: Sequence[_Level]) -> list[_Level]:
    """The levels that are loops: a one-iteration level (not a GPU index) is the
    constant 0 in the stage's indices, and no loop in the nest."""
    return [lv for lv in levels if lv.extent > 1 or lv.is_thread]


def _copy_level(lv: _Level, kind: ForKind | None = None) -> _Level:
    """The same loop (its guards, not its producers) for a second nest over it."""
    return _Level(lv.iv, lv.var, lv.extent, kind or lv.kind, lv.tag, list(lv.guards))


def _assemble(levels: Sequence[_Level], start: int, stop: int, inner: Stmt) -> Stmt:
    """Loops ``levels[start:stop]`` around ``inner``, with each level's guards and attached
    producers at the start of its body."""
    body = inner
    for lv in reversed(levels[start:stop]):
        body = _wrap_lets(lv.lets, body)
        for g in reversed(lv.guards):
            body = IfThenElse(g, body)
        if lv.attached:
            body = seq(*(nest for nest, _, _ in lv.attached), body)
            for _, bufs, scope in reversed(lv.attached):
                for buf in reversed(bufs):
                    body = Allocate(buf, scope, body)
        if lv.extent == 1 and lv.kind is not ForKind.THREAD:
            continue
        body = For(lv.var, fold.const(0, lv.var.dtype), fold.const(lv.extent, lv.var.dtype),
                   lv.kind, body, lv.tag)
    return body


# --------------------------------------------------------------------------------------
# Passes on the loop nest
# --------------------------------------------------------------------------------------

def loop_domains(body: Stmt) -> dict[Var, Interval]:
    """The values each loop variable of ``body`` takes (constant bounds only)."""
    dom: dict[Var, Interval] = {}
    for s in walk_stmts(body):
        if isinstance(s, For) and isinstance(s.min, Const) and isinstance(s.extent, Const):
            lo = int(s.min.value)
            hi = lo + int(s.extent.value) - 1
            if s.extent.value <= 0:
                continue
            seen = dom.get(s.var)
            if seen is not None:  # one variable, several loops: their hull
                lo, hi = min(lo, seen.lo), max(hi, seen.hi)  # type: ignore[type-var]
            dom[s.var] = Interval(lo, hi)
    return dom


def simplify_pass(func: LoweredFunc) -> LoweredFunc:
    """Indices and conditions simplified on the loop domains (tex.arith rules, no sympy)."""
    an = Analyzer(loop_domains(func.body))
    memo: dict[Expr, Expr] = {}

    def fn(e: Expr) -> Expr:
        got = memo.get(e)
        if got is None:
            got = an.rewrite(e)
            memo[e] = got
        return got

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


def _true_range(cond: Expr, var: Var, an: Analyzer
                ) -> tuple[int | None, int | None, list[Expr]] | None:
    """``[lo, hi)`` (None: unbounded) of ``var`` on which the conjuncts of ``cond`` that are
    affine comparisons in ``var`` hold whatever the other variables are (within their loop
    domains), and the conjuncts that are left; None if no conjunct is such a comparison."""
    parts: list[Expr] = []
    stack = [cond]
    while stack:
        c = stack.pop()
        if isinstance(c, Binary) and c.op is Op.AND:
            stack.extend((c.a, c.b))
        else:
            parts.append(c)
    lo: int | None = None
    hi: int | None = None
    found = False
    rest_parts: list[Expr] = []
    for c in parts:
        if not (isinstance(c, Compare) and c.op in AS_LE and c.a.dtype.is_int):
            rest_parts.append(c)
            continue
        # every comparison as f <= c0
        sign, slack = AS_LE[c.op]
        lf = an.linear(an.rewrite(c.a - c.b if sign > 0 else c.b - c.a))
        a = lf.terms.get(var, 0)
        rest = type(lf)({t: k for t, k in lf.terms.items() if t is not var}, lf.const, lf.dtype)
        r_hi = an.linear_bounds(rest).hi
        if a == 0 or r_hi is None or any(
                isinstance(n, Var) and n is var for t in rest.terms for n in post_order(t)):
            rest_parts.append(c)
            continue
        found = True
        bound = slack - r_hi  # a * var <= bound
        if a > 0:
            top = bound // a + 1
            hi = top if hi is None else min(hi, top)
        else:
            bottom = -(bound // -a)
            lo = bottom if lo is None else max(lo, bottom)
    return (lo, hi, rest_parts) if found else None




def partition_loops(func: LoweredFunc) -> LoweredFunc:
    """Peel the iterations of a serial loop where guards inside it may fail:
    ``for (o, 0, 13) { if (i + o*8 < 100) s }`` -> ``for (o, 0, 12) { s }`` then
    ``for (o, 12, 1) { if (...) s }``. Only guards in or around vectorized loops are
    considered (split remainders of vectorized axes), and only the guard-free middle part is
    partitioned further, so code grows at most threefold per loop."""
    an = Analyzer(loop_domains(func.body))
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

    def guards(body: Stmt) -> list[tuple[Stmt, Expr]]:
        """Guards worth peeling, with their conditions: ifs in or around a vectorized loop,
        where a guard costs lane masks on every iteration (elsewhere a branch is cheap and
        the copies only lengthen compilation), and the blends of guarded reduction updates
        in vectorized loops (``acc = select(c, acc + x, acc)``: a blend per update)."""
        found: list[tuple[Stmt, Expr]] = []
        stack: list[tuple[Stmt, bool]] = [(body, False)]
        while stack:
            st, in_vector = stack.pop()
            if isinstance(st, IfThenElse) and st.else_case is None and (
                    in_vector or has_vector(st.then_case)):
                found.append((st, st.cond))
            elif in_vector and _blend(st) is not None:
                found.append((st, _blend(st).cond))  # type: ignore[union-attr]
            vec = in_vector or (isinstance(st, For) and st.kind is ForKind.VECTORIZED)
            stack.extend((c, vec) for c in stmt_children(st))
        return found

    def visit(s: Stmt) -> Nested[Stmt]:
        if isinstance(s, For) and s.kind is ForKind.SERIAL and isinstance(s.min, Const) \
                and isinstance(s.extent, Const):
            lo0, n = int(s.min.value), int(s.extent.value)
            hi0 = lo0 + n
            lo, hi = lo0, hi0
            decided: dict[int, list[Expr]] = {}
            for g, cond in guards(s.body):
                r = _true_range(cond, s.var, an)
                if r is None:
                    continue
                new_lo = max(lo, r[0]) if r[0] is not None else lo
                new_hi = min(hi, r[1]) if r[1] is not None else hi
                if new_lo >= new_hi:
                    continue  # holds nowhere together with the others: stays a guard
                lo, hi = new_lo, new_hi
                decided[id(g)] = r[2]
            if decided and lo < hi and (lo, hi) != (lo0, hi0):
                # in [lo, hi) the comparisons on the loop variable hold: keep only the rest
                middle = yield visit(For(s.var, _i32(lo), _i32(hi - lo), s.kind,
                                         _drop_guards(s.body, decided), s.thread_tag))
                # the peeled parts keep their guards; their loops get fresh variables (a
                # loop variable is bound by exactly one loop)
                head = _rename_loop(For(s.var, _i32(lo0), _i32(lo - lo0), s.kind, s.body,
                                        s.thread_tag)) if lo > lo0 else None
                tail = _rename_loop(For(s.var, _i32(hi), _i32(hi0 - hi), s.kind, s.body,
                                        s.thread_tag)) if hi < hi0 else None
                return seq(head, middle, tail)
        return with_stmt_children(s, (yield from each_nested(visit, stmt_children(s))))

    return LoweredFunc(func.name, func.params, run_nested(visit(func.body)), func.attrs)


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
    an = Analyzer(loop_domains(func.body))
    safe_memo: dict[Expr, bool] = {}
    made: set[int] = set()  # the ifs made here (an enclosing loop may move into them)

    def safe(e: Expr) -> bool:
        got = safe_memo.get(e)
        if got is None:
            got = True
            for n in post_order(e):
                if isinstance(n, TensorRead):
                    iv = an.bounds(n.indices[0]) if len(n.indices) == 1 else None
                    if is_report(n.tensor) or iv is None or iv.lo is None or \
                            iv.hi is None or iv.lo < 0 or iv.hi >= int(n.tensor.shape[0]):
                        got = False
                        break
                elif isinstance(n, Binary) and n.op in (Op.DIV, Op.FLOORDIV, Op.FLOORMOD) \
                        and not isinstance(n.b, Const):
                    got = False
                    break
            safe_memo[e] = got
        return got

    def movable(cond: Expr, loop: For) -> bool:
        """``cond`` has one value during ``loop`` and may be computed before it."""
        inner: set[Var] = {loop.var}
        stored: set[Tensor] = set()
        for st in walk_stmts(loop.body):
            if isinstance(st, (For, LetStmt)):
                inner.add(st.var)
            elif isinstance(st, (Store, Allocate)):
                stored.add(st.buffer)
        return safe(cond) and not any(
            (isinstance(x, Var) and x in inner) or (isinstance(x, TensorRead) and
                                                     x.tensor in stored)
            for x in post_order(cond))

    def invariant_check(loop: For) -> Expr | None:
        for st in walk_stmts(loop.body):
            for e in stmt_exprs(st):
                for n in post_order(e):
                    if isinstance(n, Select) and _is_check(n) and movable(n.cond, loop):
                        return n.cond
        return None

    def decide(body: Stmt, cond: Expr) -> Stmt:
        """``body`` where ``cond`` holds: its checks on ``cond`` pass."""
        def fn(node: Expr) -> Expr | None:
            if isinstance(node, Select) and node.cond is cond and _is_check(node):
                return node.a
            return None
        memo: dict[Expr, Expr] = {}
        return map_exprs(body, lambda e: rewrite(e, fn, memo))

    def unswitch(loop: For, cond: Expr, then: Stmt, other: Stmt) -> Stmt:
        out = IfThenElse(cond, For(loop.var, loop.min, loop.extent, loop.kind, then,
                                   loop.thread_tag),
                         _rename_loop(For(loop.var, loop.min, loop.extent, loop.kind, other,
                                          loop.thread_tag)))
        made.add(id(out))
        return out

    def visit(s: Stmt) -> Nested[Stmt]:
        s = with_stmt_children(s, (yield from each_nested(visit, stmt_children(s))))
        if not isinstance(s, For) or s.kind is ForKind.THREAD:
            return s
        body = s.body
        if isinstance(body, IfThenElse) and id(body) in made and \
                body.else_case is not None and movable(body.cond, s):
            return unswitch(s, body.cond, body.then_case, body.else_case)
        cond = invariant_check(s)
        if cond is None:
            return s
        # the other copy keeps its checks (they fail there): strip_checks still sees them
        return unswitch(s, cond, decide(body, cond), body)

    return LoweredFunc(func.name, func.params, run_nested(visit(func.body)), func.attrs)


def _has_checks(func: LoweredFunc) -> bool:
    for st in walk_stmts(func.body):
        for e in stmt_exprs(st):
            if any(isinstance(n, TensorRead) and is_report(n.tensor) for n in post_order(e)):
                return True
    return False


def _is_check(s: Select) -> bool:
    """A bounds check: ``select(ok, read, report)``."""
    return isinstance(s.b, TensorRead) and is_report(s.b.tensor)


PASSES: list[tuple[str, Callable[[LoweredFunc], LoweredFunc]]] = [
    ("simplify", simplify_pass),
    ("hoist_checks", hoist_checks),
    ("partition_loops", partition_loops),
    ("remove_no_op", remove_no_op),
    ("remove_redundant_guards", remove_redundant_guards),
]


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------

def _check_args(args: Any) -> list[Tensor | Var]:
    if isinstance(args, (Tensor, Var)):
        args = [args]
    if isinstance(args, (str, bytes)) or not isinstance(args, Iterable):
        raise TypeError(f"lower: args must be a list of tensors (and tex.var scalars), got "
                        f"{type(args).__name__}")
    args = list(args)
    out: list[Tensor | Var] = []
    for pos, a in enumerate(args):
        if not isinstance(a, (Tensor, Var)):
            raise TypeError(f"lower: args[{pos}] is {type(a).__name__} {a!r}; expected a "
                            "Tensor or a tex.var")
        if isinstance(a, Var) and a.kind != "var":
            raise TypeError(f"lower: args[{pos}] '{a.name}' is a loop variable, not a tex.var")
        if any(a is b for b in out):
            raise ValueError(f"lower: args[{pos}] '{a.name}' appears twice in args")
        out.append(a)
    return out


def lower(sch: Schedule | Tensor | Sequence[Tensor], args: Sequence[Tensor | Var] | None = None,
          name: str = "main") -> LoweredFunc:
    """Lower a schedule to a loop nest.

    Parameters
    ----------
    sch : Schedule, or Tensor(s)
        The schedule (tensors get a default schedule).
    args : list of Tensor or tex.var
        The function's arguments in order: placeholders it reads, tensors it writes, and
        scalar variables. Computed tensors in ``args`` are outputs.
        Default (tensors only): the placeholders they read, then the tensors.
    name : str
        The function name.

    Returns
    -------
    LoweredFunc
        ``print()`` shows the loop nest.

    Raises
    ------
    TypeError, ValueError
        Bad args (not tensors, duplicates, a placeholder the computation reads is missing,
        an inlined tensor listed as an output, a free variable not passed); a read out of
        bounds at some point of its domain, unguarded; an argument computed at a parallel
        loop whose iterations would not write it exactly once.
    """
    if not isinstance(sch, Schedule):
        iterable = isinstance(sch, Iterable) and not isinstance(sch, (str, bytes))
        tensors = [sch] if isinstance(sch, Tensor) else list(sch) if iterable else None
        if tensors is None or not all(isinstance(t, Tensor) for t in tensors):
            raise TypeError(f"lower: expected a Schedule or a list of Tensors, got "
                            f"{type(sch).__name__} {sch!r}")
        if args is None:
            args = [*placeholders_of(tensors), *tensors]
        sch = create_schedule([t.op for t in tensors])
    if args is None:
        raise TypeError("lower: args is required with a Schedule (the argument list)")
    if not isinstance(name, str):
        raise TypeError(f"lower: name must be a string, got {type(name).__name__} {name!r}")
    if not name.isidentifier():
        raise ValueError(f"lower: name must be an identifier, got {name!r}")
    arg_list = _check_args(args)
    names = _Names()
    storage: dict[Tensor, _Storage] = {}
    params: list[Param] = []
    scalars: set[Var] = set()
    for a in arg_list:
        if isinstance(a, Var):
            params.append(ScalarParam(a))
            scalars.add(a)
            continue
        tensor = a
        is_output = not isinstance(a.op, PlaceholderOp)
        if is_output:
            st = sch.stage_map.get(a.op)
            if st is None:
                raise ValueError(f"lower: '{a.name}' is in args but not computed by this "
                                 "schedule")
            if st.attach_type == "inline":
                raise ValueError(f"lower: '{a.name}' is in args (an output) but its stage is "
                                 "compute_inline'd; outputs must be stored")
            tensor = st.op.output(a.value_index)
        buf = make_buffer(names.fresh(a.name), max(a.size, 1), a.dtype)
        storage[tensor] = _Storage(buf, tuple(a.shape))
        params.append(BufferParam(buf, a, is_output))

    lw = _Lowerer(sch, storage, names, scalars)
    lw.check_reads()
    # placeholders read by the computation must be arguments
    for st in sch.stages:
        if st.attach_type == "inline":
            continue
        for e in lw.body_of(st):
            for node in post_order(e):
                if isinstance(node, TensorRead) and isinstance(node.tensor.op, PlaceholderOp) \
                        and node.tensor not in storage and not is_report(node.tensor):
                    raise ValueError(f"lower: '{st.name}' reads the placeholder "
                                     f"'{node.tensor.name}', which is not in args")
    temps: list[Tensor] = []
    parts: list[Stmt] = []
    for st in sch.stages:
        if st.attach_type != "root":
            continue
        for t in st.op.outputs:
            if t not in storage:
                buf = make_buffer(names.fresh(t.name), max(t.size, 1), t.dtype)
                storage[t] = _Storage(buf, tuple(t.shape))
                temps.append(buf)
        root_min = {iv: _i32(iv.dom.min) for iv in [*st.op.axis, *st.op.reduce_axis]}
        root_ext = {iv: iv.dom.extent for iv in [*st.op.axis, *st.op.reduce_axis]}
        parts.append(run_nested(lw.nest(st, root_min, root_ext, {}, storage)))
    body = seq(*parts)
    for buf in reversed(temps):
        body = Allocate(buf, "global", body)
    func = LoweredFunc(name, tuple(params), body)
    debug.dump("lower.schedule_ops", func)
    for pass_name, fn in PASSES:
        func = fn(func)
        debug.dump(f"lower.{pass_name}", func)
    return func


def placeholders_of(tensors: Sequence[Tensor]) -> list[Tensor]:
    """The placeholders the tensors depend on, in creation order."""
    from ..ir.visit import topo_sort_ops
    found = [op.output(0) for op in topo_sort_ops(tensors) if isinstance(op, PlaceholderOp)]
    return sorted(found, key=lambda t: getattr(t.op, "seq", 0))
