"""Loop nests of stages (TVM's ``operation/op_util.cc``): a stage's leaf loops, the guards
placed in them, the stages computed at them, then its body (``body.py``).

Each stage iterates over its leaf variables in order (``relations.py`` rebuilds the root
axes from them). A guard goes right inside the innermost loop whose variable it uses: a
split remainder's ``i.outer * f + i.inner < extent``, or the clip of a region larger than
the tensor. On a GPU, loops bound to thread indices are hoisted outermost, and a guard on a
thread index wraps only the stage's own stores: the threads it turns off still take their
part in the producers computed inside (a shared tile). A stage attached at a loop is
computed at the start of that loop's body over the region ``bound.py`` infers, into a
buffer allocated there (its own scope, or on a GPU ``local``/``shared`` by the thread
indices around it); an argument is computed in place, in the caller's array.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from .. import debug
from ..arith import dom_of
from ..arith.extent import exceeds_int32, is_one
from ..dtype import int32
from ..error import ScheduleError
from ..ir import fold
from ..ir.expr import Const, Expr, IterVar, Op, TensorRead, Var
from ..ir.tensor import ExternBuffer, ExternOp, ScanOp, Tensor
from ..ir.visit import post_order, substitute
from ..schedule import Schedule, Stage
from ..schedule.axes import PARALLEL, THREAD, UNROLL, VECTORIZE
from ..schedule.inline import Inliner
from .body import BODY_BUILDERS, StageBody, body_kind
from .bound import BoundInference, Region
from .bounds_check import ReadChecker
from .loops import Level, extent_expr, loops, wrap_guards
from .relations import check_shifted, leaf_extents, root_values
from .stmt import (
    Allocate,
    ExternCall,
    For,
    ForKind,
    IfThenElse,
    Nested,
    Stmt,
    Store,
    make_buffer,
    map_stmts,
    run_nested,
    seq,
)
from .storage import Names, Storage, flatten_reads, i32, int64

__all__ = ["NestBuilder"]

_KIND = {PARALLEL: ForKind.PARALLEL, VECTORIZE: ForKind.VECTORIZED, UNROLL: ForKind.UNROLLED,
         THREAD: ForKind.THREAD}

# what ``nest`` restores in ``env`` when a nest is done: each tensor an attached stage
# stored, with the storage it had before (None: none)
Undo = list[tuple[Tensor, Storage | None]]


class NestBuilder:
    """Builds the loop nests of ``sch``'s stages. ``storage``: where the arguments live
    (``names`` has their buffers' names); ``scalars``: the scalar arguments."""

    def __init__(self, sch: Schedule, storage: Mapping[Tensor, Storage], names: Names,
                 scalars: AbstractSet[Var]) -> None:
        self.sch = sch
        self.params = dict(storage)  # the arguments' storage
        self.names = names
        self.scalars = scalars
        self.checker = ReadChecker(scalars)
        self.inliner = Inliner(sch, self.checker.wrap_inlined)
        self.bodies: dict[Stage, list[Expr]] = {}
        self.order = {stage: n for n, stage in enumerate(sch.stages)}
        # GPU lowering: loops bound to thread indices are hoisted outermost in each stage,
        # guards on thread indices wrap only the stage's own stores, reductions over a
        # thread-bound axis combine across threads through shared memory
        self.gpu = any(st.bindings for st in sch.stages)
        self.bound = BoundInference(sch, self.body_of, self.gpu)
        self.attached: dict[tuple[int, IterVar], list[Stage]] = {}
        _check_attach_chains(sch.stages)
        # scan stage -> the stages computed at each of its steps, in order
        self.steps: dict[Stage, list[Stage]] = {}
        for st in sch.stages:
            if st.attach_type == "scan":
                assert st.attach_stage is not None
                self.steps.setdefault(st.attach_stage, []).append(st)
            if st.attach_type == "scope":
                parent, iv = st.attach_stage, st.attach_ivar
                assert parent is not None and iv is not None
                if not any(iv is v for v in parent.leaf_iter_vars):
                    raise debug.InternalError(
                        f"lower: '{st.name}' is computed at '{iv.name}', which is no longer a "
                        f"loop of '{parent.name}' (its loops are "
                        f"{', '.join(v.name for v in parent.leaf_iter_vars)})")
                self.bound.check_readers(st)
                self.attached.setdefault((id(parent), iv), []).append(st)

    def body_of(self, st: Stage) -> list[Expr]:
        """The body of ``st`` with the inlined stages expanded (their reads' checks
        around their values)."""
        got = self.bodies.get(st)
        if got is None:
            if isinstance(st.op, (ExternOp, ScanOp)):
                return []
            got = [self.inliner.expand(e) for e in st.op.body]
            self.bodies[st] = got
        return got

    def check_reads(self) -> None:
        """Every stage's reads proven in bounds, refused (``ValueError``) or marked for a
        run-time check (``tex.lower.bounds_check``): every stage on its own body first
        (reads of inlined stages included: their checks wrap the inlined values), then
        the stages that are not inlined on their bodies with the inlined ones expanded."""
        for st in self.sch.stages:
            if not isinstance(st.op, (ExternOp, ScanOp)):
                self.checker.analyze(st.name, list(st.op.body), self.domain(st))
        for st in self.sch.stages:
            if st.attach_type != "inline" and not isinstance(st.op, (ExternOp, ScanOp)):
                self.checker.analyze(st.name, self.body_of(st), self.domain(st))

    def domain(self, st: Stage) -> dict[Var, Any]:
        """Where ``st``'s body is evaluated: its axes' domains, the time axis of a stage
        computed at a scan's steps over those steps only."""
        dom = dom_of([*st.op.axis, *st.op.reduce_axis])
        scan = self.sch.scan_body.get(st) or st.scan  # (a body stage inlined: its scan's)
        if scan is not None and st.op.axis and \
                st.op.axis[0].dom.extent == scan.op.shapes[0][0]:
            # (a body stage, or one a primitive made of it: its time axis first)
            ax = scan.op.scan_axis
            dom[st.op.axis[0].var] = dom_of([ax])[ax.var]
        return dom

    def root_nest(self, st: Stage, env: dict[Tensor, Storage]) -> Stmt:
        """The nest of a root stage over its whole domain."""
        if isinstance(st.op, ExternOp):
            return self.extern_call(st, env)
        if isinstance(st.op, ScanOp):
            return run_nested(self.scan_nest(st, env))
        root_min = {iv: i32(iv.dom.min) for iv in [*st.op.axis, *st.op.reduce_axis]}
        root_ext = {iv: iv.dom.extent for iv in [*st.op.axis, *st.op.reduce_axis]}
        return run_nested(self.nest(st, root_min, root_ext, {}, env))

    def extern_call(self, st: Stage, env: Mapping[Tensor, Storage]) -> ExternCall:
        """The call of the extern stage ``st`` (every input and output stored whole)."""
        op = st.op
        assert isinstance(op, ExternOp)
        index = self.sch.extern_ops().index(op)
        buffers: list[Tensor] = []
        written: list[bool] = []
        for a in op.call.args:
            if not isinstance(a, ExternBuffer):
                continue
            t = op.buffer_tensor(a)
            where = env.get(t)
            if where is None or where.offsets is not None or where.extents != t.shape:
                producer = self.sch.stage_map.get(t.op)
                how = "inlined" if producer is not None and producer.attach_type == "inline" \
                    else "computed at a loop of another stage"
                raise ScheduleError(f"lower: the extern call '{op.name}' reads '{t.name}', "
                                    f"which is {how}; an extern's inputs must be computed in "
                                    f"full (s[{t.name}].compute_root())")
            buffers.append(where.buffer)
            written.append(a.role == "out")
        scalars = tuple(flatten_reads(e, env, self.scalars) for e in op.call.args
                        if isinstance(e, Expr))
        return ExternCall(op, index, tuple(buffers), tuple(written), scalars)

    def scan_nest(self, st: Stage, env: dict[Tensor, Storage]) -> Nested[Stmt]:
        """The scan ``st``: its inits copied into the first rows of its outputs, then at
        each step ``t`` in order the stages of its body over their row ``t`` (each in a
        one-row buffer, its state read from the output) and the updates' row ``t`` copied
        out."""
        op = st.op
        assert isinstance(op, ScanOp)
        ax = op.scan_axis
        n0 = ax.dom.min
        undo: Undo = []
        for state, out in zip(op.state_placeholder, op.outputs):
            undo.append((state, env.get(state)))
            env[state] = env[out]
        try:
            # (an init at the root wrote its rows in place: lower._nests)
            copies = [self.copy_rows(out, init, i32(0), n0, env)
                      for init, out in zip(op.init, op.outputs)
                      if env.get(init) is None or env[init].buffer is not env[out].buffer]
            t = Var(ax.var.name, int32, kind="axis")
            parts: list[Stmt] = []
            buffers: list[tuple[Tensor, str]] = []
            in_place = dict(zip(op.update, op.outputs))
            for child in self.steps.get(st, []):
                shape = child.op.shape
                if all(u in in_place for u in child.op.outputs):
                    # an update writes its row of the output directly
                    for u in child.op.outputs:
                        undo.append((u, env.get(u)))
                        env[u] = env[in_place[u]]
                    root_min: dict[IterVar, Expr] = {iv: i32(iv.dom.min) for iv in
                                                     (*child.op.axis, *child.op.reduce_axis)}
                    root_ext = {iv: iv.dom.extent for iv in
                                (*child.op.axis, *child.op.reduce_axis)}
                    root_min[child.op.axis[0]], root_ext[child.op.axis[0]] = t, 1
                    parts.append((yield self.nest(child, root_min, root_ext, {}, env)))
                    continue
                box = Region((t, *(i32(0) for _ in shape[1:])), (1, *shape[1:]))
                nest, bufs, scope = yield self.build_attached(child, box, env, undo)
                parts.append(nest)
                buffers.extend((b, scope) for b in bufs)
            parts.extend(self.copy_rows(out, upd, t, 1, env)
                         for upd, out in zip(op.update, op.outputs)
                         if env.get(upd) is None or env[upd].buffer is not env[out].buffer)
            body: Stmt = For(t, i32(n0), extent_expr(ax.dom.extent, int32), ForKind.SERIAL,
                             seq(*parts))
            for buf, scope in reversed(buffers):
                body = Allocate(buf, scope, body)
            return seq(*copies, body)
        finally:
            _restore(env, undo)

    def copy_rows(self, dst: Tensor, src: Tensor, row: Expr, count: int,
                  env: Mapping[Tensor, Storage]) -> Stmt:
        """``dst[row + r, ...] = src[row + r, ...]`` for ``r`` in ``[0, count)``."""
        extents = (count, *dst.shape[1:])
        loops_: list[tuple[Var, int]] = []
        point: list[Expr] = []
        for d, n in enumerate(extents):
            if n == 1:
                point.append(row if d == 0 else i32(0))
                continue
            v = Var(f"{dst.name}.{'r' if d == 0 else f'i{d}'}", int32, kind="axis")
            loops_.append((v, n))
            point.append(fold.binary(Op.ADD, row, v) if d == 0 else v)
        if self.gpu and loops_:
            # on a GPU the copy is a kernel of its own: its points over blocks x threads
            total = math.prod(n for _, n in loops_)
            threads = min(256, total)
            bx = Var(f"{dst.name}.bx", int32, kind="axis")
            tx = Var(f"{dst.name}.tx", int32, kind="axis")
            flat = fold.binary(Op.ADD, fold.binary(Op.MUL, bx, i32(threads)), tx)
            sub: dict[Var, Expr] = {}
            for v, n in reversed(loops_):
                sub[v] = fold.binary(Op.FLOORMOD, flat, i32(n))
                flat = fold.binary(Op.FLOORDIV, flat, i32(n))
            point = [substitute(p, sub) for p in point]
        value = flatten_reads(self.inliner.expand(TensorRead(src, point)), env, self.scalars)
        body: Stmt = Store(env[dst].buffer, env[dst].flat_index(point), value)
        if self.gpu and loops_:
            inside = fold.compare(Op.LT, fold.binary(Op.ADD, fold.binary(
                Op.MUL, bx, i32(threads)), tx), i32(total))
            body = For(bx, i32(0), i32(-(-total // threads)), ForKind.THREAD,
                       For(tx, i32(0), i32(threads), ForKind.THREAD,
                           IfThenElse(inside, body) if total % threads else body,
                           "threadIdx.x"), "blockIdx.x")
            return body
        for v, n in reversed(loops_):
            body = For(v, i32(0), i32(n), ForKind.SERIAL, body)
        return body

    def nest(self, st: Stage, root_min: Mapping[IterVar, Expr], root_ext: Mapping[IterVar, int],
             clip: Mapping[IterVar, int], env: dict[Tensor, Storage],
             outer: Sequence[Level] = ()) -> Nested[Stmt]:
        """The loop nest of ``st`` over the given root ranges (``clip``: root axes whose
        values must stay below the given bound, for regions larger than the tensor;
        ``env``: where each tensor is stored, extended by the stages attached inside this
        nest while it is built and restored after; ``outer``: the loops of the stages
        this one is computed inside, one-iteration loops left out). ``Nested`` with
        ``build_attached``: a chain of stages each computed at the next nests as deep as
        the chain is long, so nothing here costs more than the stage's own loops (no copy
        of ``env`` or ``outer`` per stage: that made a chain quadratic)."""
        undo: Undo = []
        try:
            return (yield self.stage_nest(st, root_min, root_ext, clip, env, outer, undo))
        finally:
            _restore(env, undo)

    def stage_nest(self, st: Stage, root_min: Mapping[IterVar, Expr],
                   root_ext: Mapping[IterVar, int], clip: Mapping[IterVar, int],
                   env: dict[Tensor, Storage], outer: Sequence[Level], undo: Undo
                   ) -> Nested[Stmt]:
        """The body of ``nest``: loop levels, guards placed, attached stages (which record
        in ``undo`` what they add to ``env``), then the body of the stage's kind."""
        check_shifted(st)
        ext = leaf_extents(st, root_ext)
        levels, value = _leaf_levels(st, ext)
        guards = root_values(st, ext, value)
        point = _root_point(st, value, root_min, clip, guards)
        if self.gpu:
            # a thread-bound loop is a hardware index: hoisted outermost it changes nothing
            # for the stage, and every loop inside it sees it as fixed
            levels.sort(key=lambda lv: not lv.is_thread)
        top_guards, own_guards = self.place_guards(levels, guards, outer)
        children = [(k, child) for k, lv in enumerate(levels)
                    for child in self.attached.get((id(st), lv.iv), [])]
        yield from self.attach_children(st, levels, children, point, env, outer, undo)
        body = self.body_of(st)
        kind, form = body_kind(st, body, levels, bool(children or outer))
        stage_body = StageBody(st, body, levels, point, env, own_guards, self.names,
                               self.checker, self.scalars, form)
        nest = BODY_BUILDERS[kind](stage_body)
        if st.store_predicate is not None:
            nest = _predicated(nest, {env[t].buffer for t in st.op.outputs},
                               self.store_predicate(st, value, point))
        return wrap_guards(top_guards, nest)

    def store_predicate(self, st: Stage, value: Mapping[IterVar, Expr],
                        point: Mapping[Var, Expr]) -> Expr:
        """``st``'s store predicate over its loops: axis variables by their values, a
        ``ThreadAxis.var`` by the loop bound to its tag."""
        at: dict[Expr, Expr] = {iv.var: v for iv, v in value.items()}
        at.update(point)
        tags = {ta.tag: value[iv] for iv, ta in st.bindings.items()}
        for n in post_order(st.store_predicate):
            if isinstance(n, Var) and n.kind == "thread":
                if n.name not in tags:
                    raise ScheduleError(f"lower: the store predicate of '{st.name}' uses "
                                        f"{n.name}, which no loop of '{st.name}' is bound to")
                at[n] = tags[n.name]
        return substitute(st.store_predicate, at)

    def place_guards(self, levels: list[Level], guards: Sequence[Expr],
                     outer: Sequence[Level]) -> tuple[list[Expr], list[Expr]]:
        """Each guard into the innermost level whose variable it uses; returns the guards
        around the whole nest (no level's variable) and, on a GPU, those on a thread index,
        which wrap only the stage's own stores."""
        depth = {lv.var: k for k, lv in enumerate(levels)}
        thread_vars = {lv.var for lv in [*outer, *levels] if lv.is_thread_index}
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
        return top_guards, own_guards

    def attach_children(self, st: Stage, levels: list[Level],
                        children: Sequence[tuple[int, Stage]], point: Mapping[Var, Expr],
                        env: dict[Tensor, Storage], outer: Sequence[Level], undo: Undo
                        ) -> Nested[None]:
        """The nests of the stages attached at ``levels`` (``children``: level, stage) at
        the start of their levels: regions consumers first (a producer's region covers
        what its attached consumers read), then nests outermost level first, each
        extending the environment inward."""
        regions: dict[Stage, Region] = {}
        for k, child in sorted(children, key=lambda kc: -self.order[kc[1]]):
            regions[child] = self.bound.infer_region(child, st, levels, k, point, children,
                                                     regions, outer)
        for k, child in children:
            # GPU threads of the block that run inside the attach point share the box
            sharing = [lv for lv in levels[k + 1:] if lv.is_thread_index]
            levels[k].attached.append((yield self.build_attached(
                child, regions[child], env, undo, [*outer, *loops(levels[:k + 1])],
                sharing)))

    def build_attached(self, child: Stage, box: Region, env: dict[Tensor, Storage],
                       undo: Undo, enclosing: Sequence[Level] = (),
                       sharing: Sequence[Level] = ()
                       ) -> Nested[tuple[Stmt, list[Tensor], str]]:
        """The nest of ``child`` over its region; registers its buffers in ``env``, each
        with the entry it replaces in ``undo`` (``enclosing``: the loops around the attach
        point, outermost first; ``sharing``: the GPU thread indices inside it, whose
        threads share the box)."""
        root_min: dict[IterVar, Expr] = dict(zip(child.op.axis, box.los))
        root_ext: dict[IterVar, int] = dict(zip(child.op.axis, box.exts))
        for iv in child.op.reduce_axis:
            root_min[iv] = i32(iv.dom.min)
            root_ext[iv] = iv.dom.extent
        if any(t in self.params for t in child.op.outputs):
            box = self.bound.argument_region(child, box, enclosing, sharing)
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
            env[t] = Storage(buf, box.exts, box.los)
        return ((yield self.nest(child, root_min, root_ext, clip, env, enclosing)), buffers,
                self.bound.scope_of(child, enclosing))


def _predicated(root: Stmt, buffers: AbstractSet[Tensor], pred: Expr) -> Stmt:
    """``root`` with each store into one of ``buffers`` done only where ``pred`` holds
    (TVM's store predicate: other stores, a thread's partial sums, run as before)."""
    return map_stmts(root, lambda s: IfThenElse(pred, s)
                     if isinstance(s, Store) and s.buffer in buffers else s)


def _restore(env: dict[Tensor, Storage], undo: Undo) -> None:
    """Put back in ``env`` what ``undo`` recorded, latest first."""
    for t, old in reversed(undo):
        if old is None:
            del env[t]
        else:
            env[t] = old


def _check_attach_chains(stages: Sequence[Stage]) -> None:
    """Every stage reaches a root stage through its attach points: a stage computed at its
    own loop, or in a cycle, would be computed nowhere (its output never written). Each
    stage is walked once (a chain of n compute_at stages costs n, not n**2)."""
    reaches_root: set[Stage] = set()
    for st in stages:
        path: list[Stage] = []
        on_path: set[Stage] = set()
        at: Stage | None = st
        while at is not None and at.attach_type == "scope" and at not in reaches_root:
            if at in on_path:
                chain = " -> ".join(v.name for v in [*path, at])
                raise ScheduleError(f"lower: stage '{st.name}' is computed at a loop of a "
                                    f"stage computed inside it ({chain}); its output would "
                                    "never be written")
            on_path.add(at)
            path.append(at)
            at = at.attach_stage
        reaches_root.update(path)


def _leaf_levels(st: Stage, ext: Mapping[IterVar, int]
                 ) -> tuple[list[Level], dict[IterVar, Expr]]:
    """One level per leaf loop of ``st``, and the value of each leaf variable: its loop
    variable, or 0 for a one-iteration loop (no loop, unless bound to a GPU thread)."""
    levels: list[Level] = []
    value: dict[IterVar, Expr] = {}
    for iv in st.leaf_iter_vars:
        n = ext[iv]
        ann = st.annotations.get(iv, "serial")
        kind = _KIND.get(ann, ForKind.SERIAL)
        # a fused loop over more than 2**31 - 1 points counts in int64
        var = Var(iv.name, int64 if exceeds_int32(n) else int32, "axis")
        tag = st.bindings[iv].tag if iv in st.bindings else ""
        if tag == "vthread":  # a virtual thread: iterations interleaved in one thread
            kind, tag = ForKind.UNROLLED, ""
        levels.append(Level(iv, var, n, kind, tag))
        value[iv] = i32(0) if is_one(n) and kind is not ForKind.THREAD else var
    return levels, value


def _root_point(st: Stage, value: Mapping[IterVar, Expr], root_min: Mapping[IterVar, Expr],
                clip: Mapping[IterVar, int], guards: list[Expr]) -> dict[Var, Expr]:
    """The value of each root axis variable of ``st`` (offset by ``root_min``, narrowed to
    the axis' dtype); appends to ``guards`` the clips of ``clip``'s axes."""
    point: dict[Var, Expr] = {}
    for iv in [*st.op.axis, *st.op.reduce_axis]:
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
    return point
