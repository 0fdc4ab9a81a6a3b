"""The body of a stage's loop nest, one builder per kind (``BODY_BUILDERS``, chosen by
``body_kind``): element-wise stores, reductions, reductions across GPU threads, scatters.

- **Element-wise.** One store per output inside all loops.
- **Reductions.** ``C = reduce(src, k, where=c, init=v)`` becomes an init store before the
  first reduction loop (inside the data-parallel loops that precede it) and an update
  ``C = combine(C, src)`` under ``if (c)`` inside all loops.
- **Cross-thread reductions.** A reduction axis bound to GPU threads: each thread reduces
  its share in a register, the threads combine their partial results through shared memory.
- **Scatters.** A one-hot sum over data-dependent indices (``tex.ir.scatter``: the gradient
  of ``take`` or of a max, ``C[p, q] = sum(H[i, q], i, where=p == I[i])``) becomes an init
  of ``C`` and one pass over its free and reduction loops that binds ``let p = I[i]``,
  checks ``0 <= p < extent`` (dropped when bounds prove it, as for clipped indices) and the
  rest of the condition, and adds into ``C[p, q]``: outputs + free x reduction points
  instead of outputs x reduction points. Each element receives the gather's terms in the
  gather's order: the same bits, deterministic, no atomics (leading parallel or
  thread-bound free loops enclose both parts; each iteration owns its elements). A scatter
  axis split once into chunks of rows (the chunk loop serial or parallel, outside the rows)
  partitions the rows instead: each chunk zero-fills its rows, contiguous, then scans all
  the indices and keeps those in its rows. Chosen for a root stage whose scatter axes are
  plain serial loops or such chunks (not fused, annotated or bound otherwise, and no stage
  computed at its loops); otherwise the reduction nest runs. Affine
  invertible index maps never get here (the autodiff's integer solver already turns them
  into exact gathers); data-dependent ones (``take``, ``argsel``) do. A vectorized loop the
  index depends on runs serially: its lanes would scatter.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from ..arith import bounds
from ..arith.extent import is_one
from ..ir import fold
from ..ir.expr import CommReducer, Const, Expr, IterVar, Reduce, Select, TensorRead, Var
from ..ir.scatter import ScatterForm, scatter_form_of
from ..ir.tensor import Tensor
from ..ir.visit import post_order, substitute
from ..schedule import Split, Stage
from .bounds_check import ReadChecker
from .loops import Level, assemble, copy_level, store_all, wrap_guards, wrap_lets
from .stmt import Allocate, ForKind, IfThenElse, Stmt, Store, make_buffer, seq
from .storage import Names, Storage, flatten_reads, i32

__all__ = ["BODY_BUILDERS", "StageBody", "body_kind"]


@dataclass(frozen=True)
class StageBody:
    """What a body builder knows of one stage's nest: its expanded ``body`` (inlined
    stages substituted), its leaf loops (guards placed, producers attached), the value of
    each root axis variable in those loops (``point``), where tensors live (``env``), the
    guards that wrap only the stage's own stores, and its scatter form if it has one."""

    stage: Stage
    body: list[Expr]
    levels: list[Level]
    point: Mapping[Var, Expr]
    env: Mapping[Tensor, Storage]
    own_guards: Sequence[Expr]
    names: Names
    checker: ReadChecker
    scalars: AbstractSet[Var]
    form: ScatterForm | None = None

    def flatten(self, e: Expr) -> Expr:
        """``e`` reading flat buffers."""
        return flatten_reads(e, self.env, self.scalars)

    def read_at(self, e: Expr, point: Mapping[Var, Expr]) -> Expr:
        """``e`` (over the root axes) checked, at ``point``, reading flat buffers."""
        return self.flatten(substitute(self.checker.checked(e), point))

    def read(self, e: Expr) -> Expr:
        """``e`` at the nest's point."""
        return self.read_at(e, self.point)

    def store_index(self, t: Tensor) -> Expr:
        """The flat index of the element of output ``t`` at the nest's point."""
        return self.env[t].flat_index([self.point[iv.var] for iv in self.stage.op.axis])


def body_kind(st: Stage, body: Sequence[Expr], levels: Sequence[Level], nested: bool
              ) -> tuple[str, ScatterForm | None]:
    """The key of ``BODY_BUILDERS`` for ``st``, and its scatter form for a scatter
    (``nested``: stages are computed at its loops, or it is computed at another's)."""
    if not isinstance(st.op.body[0], Reduce):
        return "elementwise", None
    if any(lv.is_thread and lv.iv.kind == "reduce" for lv in levels):
        return "cross_thread_reduction", None
    form = None if nested else _scatter_plan(st, body, levels)
    if form is not None:
        return "scatter", form
    return "reduction", None


def _scatter_plan(st: Stage, body: Sequence[Expr], levels: Sequence[Level]
                  ) -> ScatterForm | None:
    """The scatter form of a root stage when its schedule lets the scatter nest run it
    (see the module docstring), else None (the reduction nest)."""
    if st.attach_type != "root" or len(st.op.body) != 1:
        return None
    form = scatter_form_of(st.op.axis, body[0])
    if form is None:
        return None
    by_iv = {lv.iv: lv for lv in levels}
    chunked = _row_chunks(st, form, levels)
    for iv in form.axes:
        if iv in chunked:
            continue
        lv = by_iv.get(iv)
        # a scatter axis must still be a plain loop of its own (or split once into chunks,
        # see ``_row_chunks``): fused, annotated or bound to a thread index, it no longer is
        # one value per point
        if lv is None or lv.kind is not ForKind.SERIAL or lv.tag or lv.guards:
            return None
    return form


def _row_chunks(st: Stage, form: ScatterForm, levels: Sequence[Level]
                ) -> dict[IterVar, tuple[Level, Level, int]]:
    """The scatter axes split once into chunks of rows, each with its outer level (the
    chunk: a serial or parallel loop), its inner level (the rows of a chunk: a plain serial
    loop, guarded only by the split) and the chunk size. A chunk's iteration initializes
    its rows, then runs the whole scatter keeping only the indices that fall in them: the
    rows are partitioned across the chunks, each element still gets its terms in order."""
    by_iv = {lv.iv: lv for lv in levels}
    out: dict[IterVar, tuple[Level, Level, int]] = {}
    for rel in st.relations:
        if not (isinstance(rel, Split) and rel.parent in form.axes and rel.tail == "guard"):
            continue
        lo, li = by_iv.get(rel.outer), by_iv.get(rel.inner)
        if lo is None or li is None or lo.kind not in (ForKind.SERIAL, ForKind.PARALLEL) or \
                lo.tag or li.kind is not ForKind.SERIAL or li.tag or lo.guards or \
                levels.index(lo) > levels.index(li):
            continue
        out[rel.parent] = (lo, li, rel.factor)
    return out


def elementwise(b: StageBody) -> Stmt:
    """One store per output inside all loops."""
    stores = [Store(b.env[t].buffer, b.store_index(t), b.read(e))
              for t, e in zip(b.stage.op.outputs, b.body)]
    return assemble(b.levels, wrap_guards(b.own_guards, seq(*stores)))


def reduction(b: StageBody) -> Stmt:
    """An init store before the first reduction loop, the update inside all loops."""
    st, levels, env = b.stage, b.levels, b.env
    reduce_pos = next((k for k, lv in enumerate(levels) if lv.iv.kind == "reduce"),
                      len(levels))
    outputs = st.op.outputs
    red = b.body[0]
    assert isinstance(red, Reduce)  # body_kind
    combiner = red.combiner
    inits = list(red.init) or list(combiner.identity)
    init_stores = seq(*(Store(env[t].buffer, b.store_index(t), b.read(inits[r.value_index]))
                        for t, r in zip(outputs, b.body) if isinstance(r, Reduce)))
    cur = {combiner.lhs[r.value_index]: TensorRead(env[t].buffer, [b.store_index(t)])
           for t, r in zip(outputs, b.body) if isinstance(r, Reduce)}
    src = {rhs: b.read(s) for rhs, s in zip(combiner.rhs, red.source)}
    new_values = [substitute(res, {**cur, **src}) for res in combiner.result]
    slots = [(t, r.value_index) for t, r in zip(outputs, b.body) if isinstance(r, Reduce)]
    update = store_all([(env[t].buffer, b.store_index(t)) for t, _ in slots],
                       [new_values[vi] for _, vi in slots],
                       [f"{t.name}.next" for t, _ in slots])
    cond = b.read(red.condition)
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
            old_value = TensorRead(env[t].buffer, [b.store_index(t)])
            update = Store(env[t].buffer, b.store_index(t),
                           Select(fold.conjoin(lane), new_values[vi], old_value))
            cond = fold.conjoin(rest)
    if not (isinstance(cond, Const) and bool(cond.value)):
        update = IfThenElse(cond, update)
    update = wrap_guards(b.own_guards, update)
    init_stores = wrap_guards(b.own_guards, init_stores)
    main = assemble(levels[reduce_pos:], update)
    spatial_inner = [lv for lv in levels[reduce_pos:] if lv.iv.kind != "reduce"]
    init = assemble([copy_level(lv) for lv in spatial_inner], init_stores)
    return assemble(levels[:reduce_pos], seq(init, main))


def cross_thread_reduction(b: StageBody) -> Stmt:
    """A reduction with an axis bound to thread indices: each thread reduces its share
    into a register, the partial results meet in shared memory and are combined by a
    tree (``_tree_combine``), and the threads whose reduction index is 0 store the
    result::

        acc = identity; for k: acc = combine(acc, src)      # per thread
        (the tree over the block's reduction threads; then C[...] = its result)
    """
    st, levels = b.stage, b.levels
    red = b.body[0]
    assert isinstance(red, Reduce)
    combiner = red.combiner
    threads = [lv for lv in levels if lv.is_thread]
    rest = [lv for lv in levels if not lv.is_thread]
    first = next((k for k, lv in enumerate(rest) if lv.iv.kind == "reduce"), len(rest))
    pre, red_loops = rest[:first], rest[first:]
    for lv in red_loops:
        if lv.iv.kind != "reduce":
            raise ValueError(
                f"lower: '{st.name}' reduces across GPU threads, so its data-parallel "
                f"loop '{lv.iv.name}' must come before its reduction loops; reorder it "
                "outside them")
    accs = [make_buffer(b.names.fresh(f"{st.name}.acc"), 1, v.dtype) for v in combiner.lhs]
    acc = [TensorRead(a, [i32(0)]) for a in accs]
    init = seq(*(Store(a, i32(0), combiner.identity[j]) for j, a in enumerate(accs)))
    src = {rhs: b.read(e) for rhs, e in zip(combiner.rhs, red.source)}
    update = _combine(combiner, acc, src, [(a, i32(0)) for a in accs], st.name)
    cond = b.read(red.condition)
    if not (isinstance(cond, Const) and bool(cond.value)):
        update = IfThenElse(cond, update)
    main = assemble(red_loops, wrap_guards(b.own_guards, update))
    for lv in threads:
        if lv.iv.kind == "reduce" and not lv.tag.startswith("threadIdx"):
            raise ValueError(
                f"lower: the reduction axis '{lv.iv.name}' of '{st.name}' is bound to "
                f"{lv.tag}; blocks cannot combine their results in one kernel: bind it to "
                "threadIdx, or rfactor it and bind the new data-parallel axis to blocks")
    block = seq(init, main, _tree_combine(b, red, threads, acc))
    for a in reversed(accs):
        block = Allocate(a, "local", block)
    return assemble([*threads, *pre], block)


def _tree_combine(b: StageBody, red: Reduce, threads: Sequence[Level],
                  acc: Sequence[Expr]) -> Stmt:
    """The partial results ``acc`` of the block's reduction threads combined through
    shared memory by a tree (halving the active threads each step, barriers between
    steps), and stored by the threads whose reduction index is 0::

        red[s*R + r] = acc                                   # r: reduce thread index
        if (r < R - p) red[s*R + r] = combine(red[s*R + r], red[s*R + r + p])
        if (r < p/2) ... ; ... ; if (r < 1) ...              # p: 2**floor(log2 R)
        if (r == 0) C[...] = combine(init, red[s*R])
    """
    st, combiner = b.stage, red.combiner
    n_values = len(combiner.lhs)
    # the block's threads of this stage, reduction threads fastest (mixed radix); shared
    # memory is per block: its index is over the block's threads only
    r, n_r = _radix([lv for lv in threads if lv.iv.kind == "reduce"])
    sp, n_s = _radix([lv for lv in threads if lv.iv.kind != "reduce" and lv.is_thread_index])
    base = sp * n_r
    bufs = [make_buffer(b.names.fresh(f"{st.name}.red"), n_s * n_r, v.dtype)
            for v in combiner.lhs]

    def at(j: int, offset: int = 0) -> Expr:
        return TensorRead(bufs[j], [base + r + offset] if offset else [base + r])

    steps: list[Stmt] = [seq(*(Store(buf, base + r, acc[j]) for j, buf in enumerate(bufs)))]
    p = 1 << (n_r.bit_length() - 1)
    strides = ([p] if n_r > p else []) + [1 << e for e in reversed(range(p.bit_length() - 1))]
    for step in strides:
        live = n_r - p if step == p else step
        partner = {rhs: at(j, step) for j, rhs in enumerate(combiner.rhs)}
        steps.append(IfThenElse(r < live, _combine(combiner, [at(j) for j in range(n_values)],
                                                   partner, [(buf, base + r) for buf in bufs],
                                                   st.name)))
    total = [TensorRead(buf, [base]) for buf in bufs]
    if red.init:
        inits = [b.read(e) for e in red.init]
        finals = [substitute(res, {**dict(zip(combiner.lhs, inits)),
                                   **dict(zip(combiner.rhs, total))})
                  for res in combiner.result]
    else:
        finals = total
    stores = seq(*(Store(b.env[t].buffer, b.store_index(t), finals[e.value_index])
                   for t, e in zip(st.op.outputs, b.body) if isinstance(e, Reduce)))
    reduce_vars = {lv.var for lv in b.levels if lv.iv.kind == "reduce"}
    spatial_guards = [g for g in b.own_guards
                      if not any(n in reduce_vars for n in post_order(g))]
    steps.append(IfThenElse(r == 0, wrap_guards(spatial_guards, stores)))
    block: Stmt = seq(*steps)
    for buf in reversed(bufs):
        block = Allocate(buf, "shared", block)
    return block


def _radix(levels: Sequence[Level]) -> tuple[Expr, int]:
    """The mixed-radix index of ``levels`` (the last fastest) and the number of values."""
    ix: Expr = i32(0)
    n = 1
    for lv in levels:
        ix = ix * lv.extent + lv.var
        n *= lv.extent
    return ix, n


def _combine(combiner: CommReducer, lhs: Sequence[Expr], rhs: Mapping[Var, Expr],
             targets: Sequence[tuple[Tensor, Expr]], name: str) -> Stmt:
    """``targets = combine(lhs, rhs)`` (``rhs``: the combiner's right-hand variables)."""
    mapping: dict[Var, Expr] = dict(zip(combiner.lhs, lhs))
    mapping.update(rhs)
    values = [substitute(r, mapping) for r in combiner.result]
    return store_all(targets, values, [f"{name}.next{j}" for j in range(len(combiner.lhs))])


def scatter(b: StageBody) -> Stmt:
    """``C[.., p, ..] = sum(src, k, where=p == g && rest)`` as an init of ``C`` and
    one pass over the free and reduction loops that computes ``p = g`` and adds
    ``src`` into ``C[.., p, ..]`` when ``p`` is in range and ``rest`` holds::

        for p, q: C[p, q] = init
        for q: for k: let p = g; if (0 <= p < n) { if (rest) C[p, q] += src }

    Leading parallel or thread-bound free loops enclose both parts (each iteration
    owns its elements: one parallel region, one kernel). Every element receives the
    reduction nest's contributions in the same order: the result is the same, bit for
    bit, with no atomics."""
    st, form = b.stage, b.form
    assert form is not None  # body_kind
    t = st.op.output(0)
    red = form.reduce
    lets, bound = _scatter_indices(b, form)
    # the update
    buf = b.env[t].buffer
    index = b.env[t].flat_index([bound[iv.var] for iv in st.op.axis])
    combiner = red.combiner
    new_value = substitute(combiner.result[0], {
        combiner.lhs[0]: TensorRead(buf, [index]),
        combiner.rhs[0]: b.read_at(red.source[0], bound)})
    update: Stmt = Store(buf, index, new_value)
    cond = b.read_at(form.condition, bound)
    if not (isinstance(cond, Const) and bool(cond.value)):
        # a branch, not a blend across vector lanes: the store's index is data
        update = IfThenElse(cond, update)
    update = wrap_guards(b.own_guards, update)
    init_value = b.read(red.init[0] if red.init else combiner.identity[0])
    init: Stmt = wrap_guards(b.own_guards, Store(buf, b.store_index(t), init_value))

    chunks = _row_chunks(st, form, b.levels)
    if chunks:
        # a chunk of rows keeps the indices that fall in it (checked once per index)
        for k, iv in enumerate(form.axes):
            if iv not in chunks or is_one(chunks[iv][0].extent):
                continue  # (one chunk of all the rows: no loop, nothing to check)
            outer, _, size = chunks[iv]
            var, value, guard = lets[k]
            first = outer.var * size
            if first.dtype is not var.dtype:
                first = fold.cast(var.dtype, first)
            inside = (var >= first) & (var < first + size)
            lets[k] = (var, value, inside if guard is None else guard & inside)
    scatter_axes = set(form.axes) | {inner.iv for _, inner, _ in chunks.values()}
    rest = [lv for lv in b.levels if lv.iv not in scatter_axes]
    n_shared = 0
    while n_shared < len(rest) and rest[n_shared].iv.kind != "reduce" and \
            rest[n_shared].kind in (ForKind.PARALLEL, ForKind.THREAD):
        n_shared += 1
    shared = rest[:n_shared]
    init_levels = [copy_level(lv) for lv in b.levels
                   if lv.iv.kind != "reduce" and not any(lv is x for x in shared)]
    index_vars = {n for _, value, _ in lets for n in post_order(value) if isinstance(n, Var)}
    update_levels = [
        # lanes with different indices would scatter: that loop runs serially
        copy_level(lv, ForKind.SERIAL if lv.kind is ForKind.VECTORIZED and
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
    nests = seq(assemble(init_levels, init),
                wrap_lets(top_lets, assemble(update_levels, update)))
    return assemble(shared, nests)


def _scatter_indices(b: StageBody, form: ScatterForm
                     ) -> tuple[list[tuple[Var, Expr, Expr | None]], dict[Var, Expr]]:
    """``p = g`` for each scatter axis, bound once where ``g``'s loops are known, with its
    range guard (None when bounds prove it); and the point with the scatter axes at
    those values."""
    shape = [*b.stage.op.axis, *b.stage.op.reduce_axis]
    lets: list[tuple[Var, Expr, Expr | None]] = []
    bound: dict[Var, Expr] = dict(b.point)
    for iv, g in zip(form.axes, form.indices):
        value = b.flatten(substitute(g, b.point))
        var = Var(iv.name, g.dtype, "axis")
        lo, hi = iv.dom.min, iv.dom.min + iv.dom.extent - 1
        known = bounds(g, shape)
        inside = known.lo is not None and known.hi is not None and \
            known.lo >= lo and known.hi <= hi
        guard = None if inside else (var >= lo) & (var < hi + 1)
        lets.append((var, value, guard))
        # a wider index is checked before it is narrowed to the axis' dtype
        bound[iv.var] = var if g.dtype is iv.var.dtype else fold.cast(iv.var.dtype, var)
    return lets, bound


BODY_BUILDERS: dict[str, Callable[[StageBody], Stmt]] = {
    "elementwise": elementwise,
    "reduction": reduction,
    "cross_thread_reduction": cross_thread_reduction,
    "scatter": scatter,
}
