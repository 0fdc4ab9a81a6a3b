"""``auto_schedule``: a schedule for any DAG, gradients included, from a few rules.

The rules are the ones a performance engineer applies by hand after reading a loop nest,
decided from the index maps of each stage's reads (no search, no timing):

1. **Inline** element-wise producers (pads, broadcasts, transposes, the arithmetic of
   gradients) into their consumers, unless recomputing them would cost more than storing
   them: an expensive body (``exp``, ``tanh``...) evaluated many times per element.
2. **Classify** each remaining stage by the read that matters for the vector unit:

   * *spatial-vector*: the last output axis is contiguous in the inputs (``C = A @ B``,
     column sums, element-wise maps). The inner ``2 x lanes`` of it are vectorized; a
     second output axis that some input does not depend on (the rows of ``A @ B``) is
     unrolled so each loaded vector is reused (as many rows as pay for their broadcast
     against the overlap of a shifted last tile); a tile one vector wide (a 7 or 14 pixel
     image row), or one that two-vector tiles would overlap (56 = 7 vectors), also blocks
     a third axis that the broadcast input skips (the image's rows: ``row_block``), so
     each broadcast feeds several accumulators; the accumulators live in a local tile
     (``cache_write``) computed at the tile loop. The other input's panel for one vector
     tile is packed contiguously, the output axes it does not use run inside the panel
     loop, and a reduction too long for the panel to stay in L2 is summed in blocks
     (``rfactor`` of its outer axis, then the partials added). An input whose rows the
     tile reads a page apart per reduction step gets a transposed copy first. A column
     sum with no second axis to unroll (a bias gradient) is summed in blocks of whole
     rows in parallel, each into a partial row kept in L1 (``column_blocks``), instead of
     column tiles that read a short run of every row.
   * *reduce-vector*: a reduction axis is the contiguous one (``A @ B.T``, row sums,
     softmax's max). It is split by the lanes and ``rfactor``-ed into vector partial sums
     (float addition is not reassociated otherwise), blocked over two output axes that
     different inputs skip, and the lanes are added at the end. A dense layer with many
     rows per weight element becomes spatial-vector over a transposed weight instead.
   * *full reduction* (a scalar, such as the loss): the outer reduction axis becomes a
     parallel axis of partial results (two-level reduction), then the partials are
     scheduled as row reductions.
   * *scatter* (a one-hot sum over data-dependent indices, ``tex.ir.scatter``: the
     gradient of ``take`` or of a max): the scatter axes stay plain serial loops, so
     lowering runs the sum once over its indices; the free axes carry the vectors (the
     last output axis, when the indices do not depend on it) and the parallel loop (or
     chunks of rows, for a scatter into the first axis: each thread fills its rows), and
     sit inside the reduction loops when the reads are contiguous along them. No rfactor:
     it would change the order in which each element is summed.
   * *relayout* (no axis to vectorize in place: a weight gradient over a 7 x 7 image;
     or a last axis shorter than a vector with a long one elsewhere, when the copies are
     reused enough): the reduction is computed with a long output axis innermost over
     transposed copies of its inputs, then copied back (``relayout.py``). Transposing
     copies run in tiles that keep the lines they gather from (or write) in L1.
3. **Parallelize** the fused outer output axes over the cores when the stage is big
   enough to pay for a parallel region.

Tiles that do not divide their extent are shifted inwards (``split(..., tail="shift")``:
the last tile ends at the extent, its overlap computed twice), so no tile of a spatial
axis is guarded; reduction remainders are peeled and run as narrower vectors. Strided sums
(transposed convolutions) are split by stride phase first (``phase.py``); an element-wise
stage that takes an outer axis ``% k`` (the merge of those phases, an upsampling) splits
that axis by ``k`` with the phase unrolled, so that each phase reads only its own input.

Gradient guards that only check a factor's window bounds, and zero pads inlined into a
forward's sum of products, are replaced by reads of a zero-padded copy (``pad.py``: what the
forward's padding computed). Other guards (strides)
stay where lowering puts them; guards and blended updates in or around vectorized loops
are peeled by ``partition_loops``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..arith import range_interval
from ..arith.extent import at_hint, same_extent
from ..arith.rules import Analyzer
from ..debug import timed
from ..ir.expr import Binary, Compare, Const, Expr, IterVar, Op, Reduce, TensorRead, Unary, Var
from ..ir.saved import SavedCall
from ..ir.scatter import ScatterForm, scatter_form_of
from ..ir.tensor import ComputeOp, ExternOp, ScanOp, Tensor
from ..ir.visit import collect_vars, post_order
from ..target import (
    CPUInfo,
    CudaTarget,
    Target,
    cpu_info,
    parse_cuda_target,
    resolve_target,
    target_kind,
)
from ..te.specialize import check_binding
from .axes import CODECS, Fuse
from .inline import Inliner
from .pad import PadCache, existing_pads, pad_guarded_reads
from .phase import deinterleave, polyphase, split_phases
from .relayout import transpose_reused_operand, transpose_to_output_axis, transpose_vector_axis
from .rows import fuse_rows
from .schedule import Schedule, Stage, create_schedule, split_parts

__all__ = ["auto_schedule", "PARALLEL_MIN_WORK"]

# work (iterations x body cost) below which a stage runs serially: about 12 us of one core
# here (2.4 GHz Zen 2; a simple element-wise body costs 3, so about PyTorch's 32 768-element
# grain). Waking a sleeping worker and joining it costs about 20 us, 40-100 us when
# another process holds a core (benchmarks/contention.py), which a smaller stage cannot
# win back.
PARALLEL_MIN_WORK = 1 << 17
# reductions with no axis to vectorize in place worth transposed copies of their inputs
_RELAYOUT_MIN_WORK = 1 << 20
# inputs read across pages by the rows of a register tile worth a transposed copy
_RELAYOUT_MIN_SIZE = 1 << 16
# visits per copied element for which a dot-product reduction is computed as outer
# products over a transposed copy instead (a dense layer's batch: below it, the copy costs
# more than the faster loop saves)
_OUTER_PRODUCT_MIN_REUSE = 512
# a contiguous reduction of at most this many vector steps (128 floats on AVX2) is a short
# dot product, for which outer products pay from this reuse on (12 x 197 x k x 197 batch
# matmuls: k = 32-128 1.3-2x faster over the copy, even at k = 256, 20% slower at k = 768)
_SHORT_DOT_STEPS = 16
_SHORT_DOT_MIN_REUSE = 128
# visits per copied element for which a reduction whose last axis is shorter than a vector
# is computed over transposed copies with a long axis innermost (a 7 x 7 convolution of a
# batch of 8: 50 -> 67 GFLOP/s; of 1 or 2 images, copying the weight every call loses)
_SHORT_ROW_MIN_REUSE = 256
# short contiguous rows are summed in place rather than over transposed copies unless the
# reduction reads each copied element at least this often: a copy is a pass of its own (a
# read and a write), which a sum reading each element once (a batch norm's per-channel
# sums over 28 x 28 images) never earns back (its gradient at 8 x 64 x 28 x 28: 0.54 ->
# 0.39 ms in place); the copy is written, then read back: a reduction reading each element
# twice or so (a stride-2 depthwise convolution's weight gradient: 9 taps over 4 points per
# element, 2.25 reads) is still faster in place (5.0 -> 2.3 ms at 8 x 96 x 57 x 57, with
# the input copied twice over)
_SHORT_ROW_COPY_REUSE = 3
# partial results of a reduction summed in blocks (``reduction_blocks``) at most this big
_PARTIALS_MAX_BYTES = 16 << 20
# column sums summed in blocks of whole rows (``column_blocks``): at least this many rows,
# rows of at least this many vector tiles, and a row of partial sums small enough to stay
# in the L1 (32 KiB on every x86 core) while a block streams its rows past it
_COLUMN_MIN_ROWS = 64
_COLUMN_MIN_TILES = 4
_COLUMN_ROW_MAX_BYTES = 16 << 10
# the times a reduce-vector tile's rows must be streamed before they are summed in blocks
_BLOCK_MIN_STREAMS = 64
# full reductions shorter than this stay one serial (vectorized) loop
_TWO_LEVEL_MIN = 1 << 14
# expensive ops: roughly their cost in multiply-adds when vectorized
OP_COST: dict[Op, int] = {
    Op.EXP: 12, Op.LOG: 12, Op.TANH: 16, Op.SIGMOID: 14, Op.POW: 24, Op.ERF: 16, Op.SIN: 16,
    Op.COS: 16, Op.TAN: 20, Op.SQRT: 4, Op.RSQRT: 4, Op.LOG2: 12, Op.LOG10: 12, Op.DIV: 4,
}
# recomputation an inlined element may add (in multiply-adds) before storing it wins
_INLINE_BUDGET = 24
_SCAN_BLOCK_VECTORS = 8  # vectors of a row a scan step's transposed product keeps in flight


@timed("auto_schedule")
def auto_schedule(outputs: Tensor | Sequence[Tensor],
                  target: str | Target | CPUInfo | None = None,
                  hint: Mapping[Var, int] | None = None) -> Schedule:
    """A schedule computing ``outputs`` fast on ``target``: the host CPU for ``"llvm"``,
    an NVIDIA GPU for ``"cuda"`` (see ``tex.schedule.auto_gpu``), or the CPU a
    ``tex.target.CPUInfo`` describes (to schedule for another machine, or for one fixed
    machine whatever the host). ``target`` may be a ``tex.target.Target``; without one,
    the target of the enclosing ``with Target(...)`` block, else ``"llvm"``.

    Works on any DAG built with ``tex.compute``/``tex.topi``, gradients from
    ``tex.differentiate`` included; the result is an ordinary ``Schedule`` that can be
    inspected (``tex.lower(s, args)``), adjusted by hand, and built.

    With symbolic shapes, tiles and parallel loops are chosen at ``hint``'s sizes
    (``{n: 128}``; a shape variable it leaves out counts as ``DEFAULT_HINT``), and the
    schedule serves every size: tiles that do not divide an extent are guarded, and the
    guards peeled off vectorized loops.

    Example
    -------
    >>> s = tex.schedule.auto_schedule([loss, dW, dX])
    >>> f = tex.build(s, [X, W, H, loss, dW, dX])
    """
    if isinstance(outputs, Tensor):
        outs = [outputs]
    elif isinstance(outputs, (list, tuple)) and outputs and \
            all(isinstance(t, Tensor) for t in outputs):
        outs = list(outputs)
    else:
        raise TypeError("auto_schedule: expected a Tensor or a non-empty list of Tensors, got "
                        f"{type(outputs).__name__} {outputs!r}")
    if isinstance(target, CPUInfo):
        machine: CPUInfo | CudaTarget = target
    elif target is None or isinstance(target, (str, Target)):
        text = resolve_target(target, "auto_schedule")
        machine = parse_cuda_target(text) \
            if target_kind(text, "auto_schedule") == "cuda" else cpu_info(text)
    else:
        raise TypeError(f"auto_schedule: target must be a string such as 'llvm', a "
                        f"tex.target.Target or a CPUInfo, got {type(target).__name__} "
                        f"{target!r}")
    # a second process finds the schedule on disk (tex.ir.saved), by the DAG's structure
    # and the machine it was made for
    values = check_binding(hint or {}, "auto_schedule: hint")
    key: tuple[Any, ...] = (outs, repr(machine))
    if values:
        key += (tuple(sorted((v.name, n) for v, n in values.items())),)
    saved = SavedCall.open("auto_schedule", key, CODECS)
    packed = saved.load() if saved is not None else None
    if packed is not None:
        s = Schedule.restored(*packed)
        s.saved = saved
        return s
    s = create_schedule([t.op for t in outs])
    if isinstance(machine, CudaTarget):
        from .auto_gpu import schedule_cuda  # the GPU rules build on this module's
        schedule_cuda(s, machine, values)
    else:
        with s.deferred_rewrites():
            AutoScheduler(s, machine, values).run()
    if saved is not None:
        saved.save(s.snapshot())
        s.saved = saved if saved.full is not None else None
    return s


# --------------------------------------------------------------------------------------
# Analysis helpers
# --------------------------------------------------------------------------------------

def _cost(e: Expr, limit: float | None = None) -> int:
    """Rough cost of evaluating ``e`` once, in multiply-adds (reads count 1). With a
    ``limit``, the count stops once above it (the walk of a deep inlined body is then
    bounded by the limit, not by the body)."""
    total = 0
    for node in post_order(e):
        if isinstance(node, (Unary, Binary)):
            total += OP_COST.get(node.op, 1)
        elif isinstance(node, TensorRead):
            total += 1
        if limit is not None and total > limit:
            break
    return total


@dataclass
class _Read:
    """One tensor read of a stage's (inlined) body: which loop variables it uses, and the
    coefficient of each in its last (contiguous) index (None: not affine there)."""

    tensor: Tensor
    uses: frozenset[Var]
    last: dict[Var, int | None]


class AutoScheduler:
    """The rules of ``auto_schedule`` applied to one schedule for one CPU (``auto_gpu.py``
    extends them for GPUs)."""

    def __init__(self, s: Schedule, info: CPUInfo, hint: Mapping[Var, int] | None = None
                 ) -> None:
        self.s = s
        self.info = info
        self.hint: Mapping[Var, int] = hint or {}
        self.cores = info.cores
        self.analyzer = Analyzer()
        self.regs = 32 if info.vector_bits >= 512 else 16  # x86: AVX-512 doubles them
        self.inliner = Inliner(s)
        # the stages that add up block partials (``block_partials``; rfactor keeps the
        # stage, with a new op): never blocked again (a sum of many partials qualifies as
        # a long sum itself)
        self.blocked: set[Stage] = set()

    # -- sizes, at the hint for symbolic extents ------------------------------------------
    def ext(self, iv: IterVar) -> int:
        """The extent of an axis, as the rules decide with (symbolic: at the hint)."""
        e = iv.dom.extent
        return e if isinstance(e, int) else at_hint(e, self.hint)

    def size(self, op: ComputeOp) -> int:
        """The output points of ``op``."""
        return math.prod(self.ext(iv) for iv in op.axis)

    def reduction_points(self, op: ComputeOp) -> int:
        """Points of ``op``'s reduction per output point (1 without one)."""
        return math.prod(self.ext(iv) for iv in op.reduce_axis)

    def iterations(self, op: ComputeOp) -> int:
        return self.size(op) * self.reduction_points(op)

    def work(self, op: ComputeOp) -> int:
        """Iterations times the cost of one: what a parallel region would share."""
        return self.iterations(op) * max(1, _cost(op.body[0]))

    def dot_tiles(self, ea: int, eb: int) -> tuple[tuple[int, int], float]:
        """The register tile ``ta x tb`` of a reduce-vector block over extents ``ea``, ``eb``:
        ``ta * tb`` accumulators plus ``min(ta, tb) + 1`` loaded vectors fit the registers
        (the block unrolls the longer side outermost: the shorter side's vectors stay
        loaded across it, and one vector of the longer side at a time); the
        most accumulators per load wins; a tile that does not divide the extent is
        discounted by the points it computes twice (its last tile is shifted inwards) and
        a quarter more. Returns the tile and its score (useful accumulators per loaded
        vector)."""
        best, score = (1, 1), 0.0
        for ta in range(1, min(ea, 8) + 1):
            for tb in range(1, min(eb, 8) + 1):
                if ta * tb + min(ta, tb) + 1 > self.regs:
                    continue
                value = ta * tb / (ta + tb)
                if ea % ta or eb % tb:
                    # the last tiles are shifted inwards (the overlap computed twice) and
                    # read unaligned: a dividing tile wins unless clearly worse
                    value *= 0.75 * _tile_use(ea, ta) * _tile_use(eb, tb)
                if value > score:
                    best, score = (ta, tb), value
        return best, score

    # -- the effective body of a stage, with inlined producers substituted ----------------
    def expanded(self, op: ComputeOp) -> list[Expr]:
        # one Inliner for the whole run (its memo keeps this linear in the program): the
        # set of inlined stages only grows, in producer-first order (``inline`` tells it)
        return [self.inliner.expand(e) for e in op.body]

    def reads(self, op: ComputeOp) -> list[_Read]:
        found: list[_Read] = []
        run = 2 * self.info.lanes(32)  # the widest vector tile (``_vector_tile``)
        # indices through a reshape divide a flat offset: (j*1024 + l*32 + m) % 32 is m on
        # the axes' domains, which decides the contiguous axis (a group norm's statistics)
        an = Analyzer({iv.var: range_interval(iv.dom)
                       for iv in (*op.axis, *op.reduce_axis)})
        for node in post_order(*self.expanded(op)):
            if not isinstance(node, TensorRead) or not node.indices:
                continue
            indices = [an.rewrite(i) if _divides(i) else i for i in node.indices]
            uses = frozenset(collect_vars(*indices))
            last: dict[Var, int | None] = {}
            inner = indices[-1]
            # x % m with m a whole number of vector tiles (a head split's q % 64): runs of m
            # contiguous points, which aligned vector tiles never straddle
            if isinstance(inner, Binary) and inner.op is Op.FLOORMOD and \
                    isinstance(inner.b, Const) and int(inner.b.value) % run == 0:
                inner = inner.a
            lin = self.analyzer.try_linear(inner)
            for v in collect_vars(inner):
                c = lin.terms.get(v) if lin is not None else None
                last[v] = c if c is not None and c != 0 else None
            found.append(_Read(node.tensor, uses, last))
        return found

    def affine_reads(self, op: ComputeOp) -> set[Tensor]:
        """The tensors every read of which in ``op``'s (inlined) body has affine indices,
        or quotients and remainders of affine ones by constants (a reshape's ``n // 128``,
        ``n % 128``: bound inference gives their exact box over whole periods)."""
        ok: dict[Tensor, bool] = {}
        for node in post_order(*self.expanded(op)):
            if isinstance(node, TensorRead) and node.indices:
                ok[node.tensor] = ok.get(node.tensor, True) and \
                    all(self.reshape_affine(i) for i in node.indices)
        return {t for t, good in ok.items() if good}

    def reshape_affine(self, e: Expr) -> bool:
        """Whether ``e`` is affine in variables, or such an expression ``// c`` or ``% c``
        for a positive constant ``c``."""
        if isinstance(e, Binary) and e.op in (Op.FLOORDIV, Op.FLOORMOD) and \
                isinstance(e.b, Const) and int(e.b.value) > 0:
            e = e.a
        f = self.analyzer.try_linear(e)
        return f is not None and all(isinstance(a, Var) for a in f.terms)

    # -- driver --------------------------------------------------------------------------
    def run(self) -> None:
        self.inline()
        # one padded copy per tensor, shared by the stages that read it (and by the
        # program's own, a convolution's input)
        pads: PadCache = existing_pads(self.s)
        for st in list(self.s.stages):
            if st.attach_type == "root" and isinstance(st.op, ComputeOp) and \
                    st.op.reduce_axis and self.scatter_of(st.op) is None:
                # a strided sum (a transposed convolution): one dense sum per stride phase;
                # else a strided convolution's data gradient per phase of its vector axis
                phases = polyphase(self.s, st)
                if phases is None:
                    last = split_phases(self.s, st, self.stage_lanes(st))
                    phases = None if last is None else [last]
                # window-bound guards: read zero-padded copies instead (scheduled below as
                # element-wise stages)
                for target in [st] if phases is None else [self.s[t] for t in phases]:
                    pad_guarded_reads(self.s, target, self.vector_var(target), pads)
                    # a strided read along the vector axis: read a copy by phase instead
                    deinterleave(self.s, target, self.stage_lanes(target))
        for st in list(self.s.stages):
            if st.attach_type == "scan" and isinstance(st.op, ComputeOp):
                self.scan_step(st)
            if st.attach_type != "root" or not isinstance(st.op, ComputeOp):
                continue
            self.schedule_stage(st)
        # the passes over one row in one loop (softmax, layer norm)
        fuse_rows(self.s, self.info, self.inliner.expand, _cost, self.stage_lanes)

    # -- 1. inlining ---------------------------------------------------------------------
    def inline(self) -> None:
        stages = self.s.stages
        # who reads each tensor, and how many distinct reads per point (bodies do not
        # change while inlining): one pass instead of one per candidate
        readers: dict[Tensor, list[tuple[Stage, int]]] = {}
        stored: set[Tensor] = set()  # read by extern calls, which need them in memory
        for reader in stages:
            if isinstance(reader.op, (ExternOp, ScanOp)):
                stored.update(reader.op.input_tensors)  # (a scan copies its inits' rows)
                if isinstance(reader.op, ScanOp):  # its updates write the output in place
                    stored.update(reader.op.update)
                continue
            counts: dict[Tensor, int] = {}
            for n in post_order(*reader.op.body):
                if isinstance(n, TensorRead):
                    counts[n.tensor] = counts.get(n.tensor, 0) + 1
            for t, c in counts.items():
                readers.setdefault(t, []).append((reader, c))
        for st in stages:
            op = st.op
            if isinstance(op, (ExternOp, ScanOp)) or op.output(0) in stored:
                continue
            if st.is_output or op.reduce_axis or op.num_outputs != 1 or \
                    any(isinstance(n, Reduce) for n in post_order(*op.body)):
                continue
            if not op.axis:
                continue
            if self.recompute_cost(st, readers.get(op.output(0), [])) <= _INLINE_BUDGET:
                st.compute_inline()
                self.inliner.add(st)

    def recompute_cost(self, st: Stage, readers: list[tuple[Stage, int]]) -> float:
        """Extra work per element of ``st`` if it is inlined: its cost times how many more
        times than once its consumers (through inlined stages) evaluate it. ``readers``:
        the stages reading ``st`` with their distinct reads of it per point."""
        op = st.op
        size = max(1, self.size(op))
        evals = 0.0
        for reader, per_point in readers:
            if reader is not st:
                evals += per_point * self.iterations(reader.op) / size
        if evals <= 1.0:
            return 0.0  # evaluated once anyway: its cost does not matter (nor is computed)
        # counted only up to what decides against inlining
        limit = _INLINE_BUDGET / (evals - 1.0)
        return _cost(self.expanded(op)[0], limit) * (evals - 1.0)

    # -- 2. one root stage -----------------------------------------------------------------
    def stage_lanes(self, st: Stage) -> int:
        """The vector lanes of ``st``'s output type on this CPU."""
        bits = st.op.output(0).dtype.bits
        return self.info.lanes(bits if bits else 32)

    def schedule_stage(self, st: Stage) -> None:
        op = st.op
        lanes = self.stage_lanes(st)
        if not op.reduce_axis:
            self.elementwise(st, lanes)
            return
        form = self.scatter_of(op)
        if form is not None:
            self.scatter(st, form, lanes)
            return
        reads = self.reads(op)
        spatial = list(op.axis)
        reduce = list(op.reduce_axis)
        single = op.num_outputs == 1 and isinstance(op.body[0], Reduce)
        if not spatial:
            if single and self.iterations(op) >= _TWO_LEVEL_MIN and len(reduce) >= 1:
                self.two_level(st)
            elif single:
                self.row_reduce(st, reads, lanes)
            return
        last = spatial[-1]
        vred = self.reduce_vector_axis(op, reads, lanes)
        if op.num_outputs > 1 and vred is None and any(last.var in r.last for r in reads) \
                and (self.ext(last) >= lanes or 2 * self.ext(last) >= lanes and
                     self.work(op) >= PARALLEL_MIN_WORK):
            # (a last axis shorter than a vector, big enough: one narrower vector, as
            # spatial_vector's; a 7 x 7 pool's argmax ran scalar, 4.4x its max's time)
            self.lanes_over_outputs(st, min(lanes, self.ext(last)))
            return
        if single and vred is not None and self.ext(vred) < 4 * lanes and \
                self.ext(last) < lanes and self.work(op) >= _RELAYOUT_MIN_WORK and \
                self.relayout(st, lanes, min_copy_reuse=_SHORT_ROW_COPY_REUSE):
            # short contiguous rows (a 14 x 14 or 28 x 28 image's: the partial sums waste
            # lanes and are added up per output point) and no long last axis: a long output
            # axis innermost, over transposed copies (measured on ResNet's weight gradients:
            # 3x faster at 14, 1.5x at 28, even at 56), when the copies are read more than
            # once per element
            return
        if single and vred is not None and self.ext(last) >= 2 * lanes and \
                self.work(op) >= _RELAYOUT_MIN_WORK:
            # dot products along a contiguous reduction (a dense layer's X[i, k] * W[j, k]):
            # outer products over a copy of W contiguous along j instead, when the copy is
            # reused enough (measured on BERT's dense layers: 50-65 -> 80 GFLOP/s per core);
            # short dot products pay sooner: each output's partial sums are added across
            # the lanes after only a few vector steps (attention's Q @ K.T over 64-wide
            # heads at 197 tokens: 62 -> 90-118 GFLOP/s)
            short = self.ext(vred) <= _SHORT_DOT_STEPS * lanes
            copies = transpose_to_output_axis(
                self.s, st, self.expanded(op)[0], last.var,
                _SHORT_DOT_MIN_REUSE if short else _OUTER_PRODUCT_MIN_REUSE, hint=self.hint)
            if copies:
                for copy in copies:
                    self.elementwise(copy, lanes)
                op = st.op
                reads = self.reads(op)
                vred = self.reduce_vector_axis(op, reads, lanes)
        if single and vred is not None:
            self.reduce_vector(st, reads, vred, lanes)
        elif single and self.ext(last) < lanes and self.work(op) >= _RELAYOUT_MIN_WORK and \
                self.relayout(st, lanes, _SHORT_ROW_MIN_REUSE):
            # a last axis shorter than a vector (a 7 x 7 image's rows) and a long one
            # elsewhere (its channels): the long one innermost over transposed copies
            # (ResNet's 7 x 7 x 512 convolution: 51 -> 67 GFLOP/s against 7 of 8 lanes)
            return
        elif op.num_outputs == 1 and (self.ext(last) >= lanes or 2 * self.ext(last) >= lanes
                                      and self.work(op) >= PARALLEL_MIN_WORK):
            # (a short last axis without a long one to move: one narrower vector, when the
            # stage is big enough for the vector tile's set-up to pay)
            self.spatial_vector(st, reads, lanes)
        elif single and self.work(op) >= _RELAYOUT_MIN_WORK and \
                self.relayout(st, lanes):
            return
        else:
            self.parallel_outer(st, [a for a in st.leaf_iter_vars if a.kind != "reduce"])

    def scan_step(self, st: Stage) -> None:
        """A stage of a scan's body, computed one row per step: its row vectorized (a dot
        product along a contiguous reduction, an RNN's matrix-vector product, as partial
        sums per lane then added across them), serial (a step is too short for a parallel
        region's fork and join to pay, and the steps run in order)."""
        op = st.op
        rest = list(op.axis[1:])
        if not rest or op.num_outputs != 1:
            return
        lanes = self.stage_lanes(st)
        if not op.reduce_axis:
            if self.ext(rest[-1]) >= lanes:
                _, li = st.split(rest[-1], factor=lanes, tail="shift")
                st.vectorize(li)
            return
        if not isinstance(op.body[0], Reduce) or self.scatter_of(op) is not None:
            return
        k = self.reduce_vector_axis(op, self.reads(op), lanes)
        if k is None or self.ext(k) < 2 * lanes:
            if self.ext(rest[-1]) >= lanes:
                # lanes over the row in blocks of a few vectors, the reduction around each
                # block (a transposed matrix-vector product streams whole rows of the
                # matrix), the blocks in parallel when a step is long enough
                block = min(self.ext(rest[-1]) // lanes, _SCAN_BLOCK_VECTORS) * lanes
                bo, bi = st.split(rest[-1], factor=block, tail="shift")
                vo, vi = st.split(bi, factor=lanes)  # (inside the reduction: guarded)
                st.reorder(*op.axis[:-1], bo, *op.reduce_axis, vo, vi)
                st.vectorize(vi)
                if self.cores >= 2 and self.work(op) // self.ext(op.axis[0]) >= PARALLEL_MIN_WORK:
                    st.parallel(bo)
            return
        t = op.output(0)
        _, kv = st.split(k, factor=lanes)
        part = self.s[self.s.rfactor(t, kv, factor_axis=len(op.axis))]
        st = self.s[t]
        part.compute_at(st, st.op.axis[-1])
        if self.cores >= 2 and self.work(op) // self.ext(op.axis[0]) >= PARALLEL_MIN_WORK:
            st.parallel(st.op.axis[-1])
        lane = part.op.axis[-1]
        part.reorder(*part.op.axis[:-1], *part.op.reduce_axis, lane)
        part.vectorize(lane)

    def lanes_over_outputs(self, st: Stage, lanes: int) -> None:
        """A reduction with several outputs (an argmax's index and value: a tuple combiner,
        no rfactor): each lane reduces one point of the last output axis, the reduction
        loops around the vector (a 3 x 3 max pool's argsel: 3x faster than scalar)."""
        op = st.op
        lo, li = st.split(op.axis[-1], factor=lanes, tail="shift")
        st.reorder(*op.axis[:-1], lo, *op.reduce_axis, li)
        st.vectorize(li)
        self.parallel_outer(st, [*op.axis[:-1], lo])

    def relayout(self, st: Stage, lanes: int, min_reuse: int = 0,
                 min_copy_reuse: int = 0) -> bool:
        """No axis to vectorize in place (a weight gradient over a small image): compute
        the reduction with a long output axis innermost, over transposed copies of the
        inputs that read it along a strided dimension (``relayout.py``)."""
        new = transpose_vector_axis(self.s, st, self.expanded(st.op)[0], lanes, min_reuse,
                                    min_copy_reuse, hint=self.hint)
        if new is None:
            return False
        for stage in new:
            self.schedule_stage(stage)
        return True

    # scatter: A[p, q] = sum(H[i, q], i, where=p == I[i]) -----------------------------------
    def scatter_of(self, op: ComputeOp) -> ScatterForm | None:
        """The scatter form of ``op``'s body with inlined producers substituted (what
        lowering sees), or None."""
        if op.num_outputs != 1:
            return None
        return scatter_form_of(op.axis, self.expanded(op)[0])

    def scatter(self, st: Stage, form: ScatterForm, lanes: int) -> None:
        """Leave the scatter axes alone (lowering computes them from the indices); order
        the free axes inside the reduction loops when the reads are contiguous along the
        last one (vectorized when the indices do not depend on it), outside otherwise. In
        parallel, each thread owns its elements (no atomics): a chunk of the rows when
        the first output axis is scattered and long enough (``tex.lower.body``'s row
        chunks: the zero fill stays contiguous), else the outer free axes."""
        op = st.op
        free = list(form.free_axes)
        reduce = list(op.reduce_axis)
        if not free:
            st.reorder(*form.axes, *reduce)
            return
        index_vars = set(collect_vars(*form.indices))
        reads = self.reads(op)
        last = free[-1]
        free_inner = _contiguous_count(reads, last.var) > 0 and \
            _contiguous_count(reads, last.var) >= _contiguous_count(reads, reduce[-1].var)
        outer, inner = free, []
        if free_inner:
            outer, inner = free[:-1], [last]
            if last is op.axis[-1] and self.ext(last) >= lanes and last.var not in index_vars:
                lo, li = st.split(last, factor=lanes)
                st.vectorize(li)
                outer, inner = [*outer, lo], [li]
        work = math.prod(self.ext(a) for a in free) * \
            math.prod(self.ext(r) for r in reduce) * max(1, _cost(form.reduce.source[0]))
        want = self.cores >= 2 and work >= PARALLEL_MIN_WORK
        rows = form.axes[0]
        if want and rows is op.axis[0] and self.ext(rows) >= 8 * self.cores:
            # partition the rows: each thread zero-fills its rows in one contiguous pass,
            # then scans every index and adds those in its rows (in order: the same bits)
            po, pi = split_parts(st, rows, self.cores)
            st.reorder(po, pi, *form.axes[1:], *reduce, *outer, *inner)
            st.parallel(po)
            return
        if want and free_inner and math.prod(self.ext(a) for a in outer) < 4 * self.cores \
                and inner[0] is last and self.ext(last) >= 2:
            # too few outer points to share: columns of the last free axis in chunks
            lo, li = split_parts(st, last, 4 * self.cores)
            outer, inner = [*outer, lo], [li]
        take: list[IterVar] = []
        if want:
            n = 1
            for a in outer:
                take.append(a)
                n *= self.ext(a)
                if n >= 4 * self.cores:
                    break
            if n < 2:
                take = []
        rest = outer[len(take):]
        if free_inner:
            st.reorder(*take, *form.axes, *reduce, *rest, *inner)
        else:
            st.reorder(*take, *rest, *form.axes, *reduce)
        if take:
            st.parallel(st.fuse(*take) if len(take) > 1 else take[0])

    def reduce_vector_axis(self, op: ComputeOp, reads: list[_Read], lanes: int
                           ) -> IterVar | None:
        """The reduction axis to carry the vectors, or None (the last output axis does):
        a contiguous one, when more reads are contiguous along it than along the last output
        axis, or when that axis is too short to fill a vector (a conv kernel's)."""
        last = op.axis[-1]
        # only reads that move with the reduction matter: the others are loop-invariant
        rvars = {r.var for r in op.reduce_axis}
        inner = [r for r in reads if r.uses & rvars]
        vred = self.vector_reduce_axis(inner, list(op.reduce_axis), lanes)
        if vred is not None and (
                _contiguous_count(inner, vred.var) > _contiguous_count(inner, last.var)
                or self.ext(last) < lanes):
            return vred
        return None

    def vector_var(self, st: Stage) -> Var | None:
        """The variable ``schedule_stage`` will vectorize a reduction stage along (None for
        a stage without output or reduction axes)."""
        op = st.op
        if not op.axis or not op.reduce_axis or self.scatter_of(op) is not None:
            return None
        lanes = self.stage_lanes(st)
        vred = self.reduce_vector_axis(op, self.reads(op), lanes)
        return op.axis[-1].var if vred is None else vred.var

    def vector_reduce_axis(self, reads: list[_Read], reduce: list[IterVar], lanes: int
                           ) -> IterVar | None:
        """The innermost reduction axis contiguous in some read, long enough to vectorize."""
        for r in reversed(reduce):
            if self.ext(r) >= lanes and _contiguous_count(reads, r.var) > 0:
                return r
        return None

    def parallel_outer(self, st: Stage, axes: list[IterVar], work: int | None = None
                       ) -> IterVar | None:
        """Fuse the leading data-parallel ``axes`` until there is enough work to share, and
        run the fused loop in parallel (when the stage pays for a parallel region)."""
        axes = [a for a in axes if a.kind != "reduce"]
        if not axes or self.cores < 2:
            return None
        if work is None:
            work = self.work(st.op)
        if work < PARALLEL_MIN_WORK:
            return None
        take, n = [], 1
        for a in axes:
            take.append(a)
            n *= self.ext(a)
            if n >= 4 * self.cores:
                break
        leaves = st.leaf_iter_vars
        idx = [leaves.index(a) for a in take]
        if idx != list(range(idx[0], idx[0] + len(idx))):
            take = take[:1]
        fused = st.fuse(*take) if len(take) > 1 else take[0]
        if self.ext(fused) < 2:
            return None
        st.parallel(fused)
        return fused

    # element-wise ------------------------------------------------------------------------
    def elementwise(self, st: Stage, lanes: int) -> None:
        axes = list(st.op.axis)
        if not axes:
            return
        across = self.transposed_axis(st.op)
        if across is not None:
            # runs of axes contiguous on both sides are one axis: a conv kernel's (512, 3,
            # 3) block of rows is one of 4,608 elements (its 3 x 3 alone was too short to
            # vectorize or to tile)
            lead, tail = self.contiguous_runs(st.op, across)
            across = st.fuse(*lead) if len(lead) > 1 else across
            if len(tail) > 1:
                st.fuse(*tail)
            axes = list(st.leaf_iter_vars)
        last = axes[-1]
        outer = axes[:-1]
        if across is not None and self.ext(last) >= lanes and self.ext(across) >= lanes:
            # a transposing copy: square tiles, so that the rows a tile's vectors gather
            # from stay in L1 while the tile walks along them (untiled, every gathered
            # element came from L2: 6 ns per element); the tiles of one band of output
            # columns follow one another along the input's rows: 2 x lanes streams the
            # prefetcher follows, where a band of rows at a time read one line of every
            # input row per step (resnet_28's activation copy: 12.8 -> 8.4 ms)
            t = 2 * lanes
            ao, ai = st.split(across, factor=t, tail="shift")
            lo, li = st.split(last, factor=t, tail="shift")
            rest = [a for a in outer if a is not across]
            st.reorder(*rest, lo, ao, ai, li)
            st.vectorize(li)
            self.parallel_outer(st, [*rest, lo, ao])
            return
        if across is not None and self.ext(across) >= 2 * lanes:
            # the last axis too short to vectorize (a 3 x 3 kernel's): rows of the input
            # innermost, a tile of them at a time, so that the lines the tile writes stay in
            # L1 while the loops around it fill them (untiled: 5 ns per element)
            ao, ai = st.split(across, factor=2 * lanes, tail="shift")
            order = [ao if a is across else a for a in axes]
            st.reorder(*order, ai)
            self.parallel_outer(st, order)
            return
        if self.ext(last) >= lanes:
            lo, li = st.split(last, factor=lanes, tail="shift")
            st.vectorize(li)
            phased = self.phase_axes(st.op, outer)
            splits = []
            for a, k in phased:
                # ``a % k`` / ``a // k`` in the body (a merge of stride phases, an
                # upsampling): ``a = k*a2 + p`` with ``p`` unrolled decides each test on
                # ``a``'s phase and drops the phases not taken, whose reads would overrun
                # their buffers at ``a``'s last values (every read masked, gathered
                # otherwise: a merge of four stride-2 phases took 6 ms)
                a2, ap = st.split(a, factor=k)
                st.unroll(ap)
                splits.append(a2)
            if phased:
                # the loops above the first phase axis in parallel, if they are enough to
                # share (then its guarded last value is peeled: a serial loop), else with
                # its outer part
                lead = outer[:outer.index(phased[0][0])]
                if math.prod(self.ext(a) for a in lead) < 4 * self.cores:
                    lead = [*lead, splits[0]]
                self.parallel_outer(st, lead)
                return
            outer = [*outer, lo]
        else:
            outer = axes
        self.parallel_outer(st, outer)

    def phase_axes(self, op: ComputeOp, axes: list[IterVar]) -> list[tuple[IterVar, int]]:
        """The ``axes`` longer than ``k`` that ``op``'s (inlined) body takes ``% k`` of
        (``k`` a constant from 2 to 4; an axis taken modulo two different constants is
        left out), with ``k``: the phase axes of an element-wise merge."""
        found: dict[IterVar, int] = {}
        by_var = {a.var: a for a in axes}
        for n in post_order(*self.expanded(op)):
            if isinstance(n, Binary) and n.op is Op.FLOORMOD and isinstance(n.b, Const) \
                    and n.a in by_var and 2 <= int(n.b.value) <= 4:
                a = by_var[n.a]
                if found.setdefault(a, int(n.b.value)) != int(n.b.value):
                    found[a] = 0  # two moduli: no one phase split
        return [(a, k) for a in axes if (k := found.get(a, 0)) and self.ext(a) > k]

    def contiguous_runs(self, op: ComputeOp, across: IterVar
                        ) -> tuple[list[IterVar], list[IterVar]]:
        """For a transposing copy ``T[.., a, b, c, ..] = X[.., a, b, c]`` (``across`` the
        output axis indexing ``X``'s last dimension), the output axes ending at ``across``,
        and those ending at the last output axis, that index consecutive dimensions of
        ``X`` of their own extents, in order: fused, each run is one axis, contiguous in
        the output and in ``X`` alike."""
        body = self.expanded(op)[0]
        assert isinstance(body, TensorRead)
        idx, shape, axes = body.indices, body.tensor.shape, list(op.axis)

        def ending_at(j: int, d: int) -> list[IterVar]:  # output axis j, X's dim d
            if not same_extent(shape[d], axes[j].dom.extent):
                return []
            k = j
            while d > 0 and k > 0 and idx[d - 1] is axes[k - 1].var and \
                    same_extent(shape[d - 1], axes[k - 1].dom.extent):
                d, k = d - 1, k - 1
            return axes[k:j + 1]

        lead = ending_at(axes.index(across), len(idx) - 1) if idx[-1] is across.var else []
        dims = [d for d, e in enumerate(idx[:-1]) if e is axes[-1].var]
        tail = ending_at(len(axes) - 1, dims[0]) if len(dims) == 1 else []
        return lead, tail

    def transposed_axis(self, op: ComputeOp) -> IterVar | None:
        """For a copy ``T[.., a, .., b] = X[.., b, .., a]`` (its body one read, the last
        output axis ``b`` in a dimension of ``X`` before the last), the output axis ``a``
        that indexes ``X``'s last dimension; else None."""
        body = self.expanded(op)[0] if op.num_outputs == 1 else None
        if not isinstance(body, TensorRead) or len(body.indices) < 2 or len(op.axis) < 2:
            return None
        last = op.axis[-1].var
        if last in collect_vars(body.indices[-1]) or \
                not any(last in collect_vars(i) for i in body.indices[:-1]):
            return None
        inner = collect_vars(body.indices[-1])
        for a in op.axis[:-1]:
            if a.var in inner:
                return a
        return None

    # spatial-vector: C[.., i, j] = sum_k .. with j contiguous ------------------------------
    def spatial_vector(self, st: Stage, reads: list[_Read], lanes: int) -> None:
        op = st.op
        spatial = list(op.axis)
        j = spatial[-1]
        # a second axis to unroll: one that the reads carrying j do not use (reuse)
        carriers = [r for r in reads if j.var in r.uses]
        cand = [a for a in spatial[:-1]
                if carriers and any(a.var not in r.uses for r in carriers)
                and any(a.var in r.uses for r in reads)]
        # the innermost such axis, unless it is too short to fill the register tile
        long = [a for a in cand if self.ext(a) >= 4]
        i = long[-1] if long else cand[-1] if cand else None
        bj = _vector_tile(self.ext(j), lanes)
        # accumulators bi x (bj / lanes), plus bj / lanes loaded vectors and a broadcast,
        # must fit the vector registers
        nvec = -(-bj // lanes)
        bi = _row_tile(self.ext(i), max(1, min(8, (self.regs - nvec - 2) // nvec)), nvec) \
            if i is not None else 1
        # a tile one vector wide (an axis shorter than two vectors: a 14 x 14 image) blocks
        # a third axis h too, one the broadcast operand does not use (the image's rows):
        # each broadcast then feeds bh accumulators (bi + bh loads per bi x bh
        # multiply-adds, not bi + 1 per bi)
        h, bh = None, 1
        if i is not None and nvec <= 2:
            # (a tile two vectors wide gives way to one vector and rows when the rows fit
            # better, with as many accumulators to hide the multiply-adds' latency: a
            # 56 x 56 image's 56 columns fill 7 vectors, 3.5 pairs)
            b1 = _row_tile(self.ext(i), max(1, min(8, self.regs - 3)), 1) if nvec == 2 \
                else bi  # (the rows of a one-vector tile: its vector and a broadcast)
            rows, rows_score = self.row_block(op, i, j, reads, b1,
                                              bi * nvec if nvec == 2 else 0)
            wide = bi * nvec / (bi + nvec) * _tile_use(self.ext(i), bi) * \
                _tile_use(self.ext(j), bj)
            if rows[0] is not None and (nvec == 1 or (
                    rows[1] * rows[2] >= bi * nvec and
                    rows_score * _tile_use(self.ext(j), lanes) > wide)):
                h, bh, bi = rows
                bj, nvec = min(lanes, self.ext(j)), 1
        work = self.work(op)
        if i is not None and self.reduction_blocks(st, bj):
            return
        if i is None and self.column_blocks(st, j, reads, lanes, work):
            return
        if i is not None and op.reduce_axis and isinstance(op.body[0], Reduce):
            copies = transpose_reused_operand(self.s, st, self.expanded(op)[0], i.var,
                                              [r.var for r in op.reduce_axis],
                                              _RELAYOUT_MIN_SIZE, hint=self.hint)
            for copy in copies:
                self.elementwise(copy, lanes)
            op = st.op
        local = self.s.cache_write(op.output(0), "local")
        st = self.s[op.output(0)]
        jo, ji = st.split(j, factor=bj, tail="shift")
        outer = [a for a in op.axis if a is not j and a is not i]
        attach = jo
        hi = outer_h = None
        if h is not None:
            outer_h, hi = st.split(h, factor=bh, tail="shift")
            outer = [outer_h if a is h else a for a in outer]
        if i is not None:
            io, ii = st.split(i, factor=bi, tail="shift")
            # one j panel at a time: its tiles of every i stream past a packed copy of the
            # j-side input (reduction x bj, contiguous: rows of the original may be 4 KiB
            # apart and thrash the L1's sets); the outer axes that input does not use go
            # inside the panel loop too (a relayouted 7 x 7 convolution's n and h: its
            # weight panel was packed again for every image row)
            panel = [r for r in self.reads(op) if i.var not in r.uses and j.var in r.uses]
            used = set().union(*(r.uses for r in panel))
            # (h's outer part counts as h: the panel input uses it)
            free = [a for a in outer if panel and a.var not in used and a is not outer_h]
            outer = [a for a in outer if a not in free]
            st.reorder(*outer, jo, *free, io, ii, *([hi] if hi is not None else []), ji)
            share = [*outer, jo, *free]
            chunks = math.prod(self.ext(a) for a in share)
            if self.cores >= 2 and work >= PARALLEL_MIN_WORK and \
                    chunks < 4 * self.cores and self.ext(io) >= 2:
                # too few panels to share: the tiles of each panel in a few chunks (each
                # packs its panel once), not one chunk per tile (one packing per tile:
                # a 100 x 100 matmul ran at 60% of a 128 x 128's speed)
                ioo, io = split_parts(st, io, -(-4 * self.cores // chunks))
                share.append(ioo)
            self.parallel_outer(st, share, work)
            attach = io
        else:
            st.reorder(*outer, jo, ji)
            self.parallel_outer(st, [*outer, jo], work)
        st.vectorize(ji)
        lst = self.s[local]
        lst.compute_at(st, _current(st, attach))
        lop = lst.op
        if i is not None:
            self.pack_panel(st, lst, jo, i.var, bj)
        pos_j = list(op.axis).index(j)
        lj = lop.axis[pos_j]
        order = list(lop.reduce_axis)
        if i is not None:
            li = lop.axis[list(op.axis).index(i)]
            lh = [lop.axis[list(op.axis).index(h)]] if h is not None else []
            order += [li, *lh, lj]
            lst.reorder(*order)
            for axis in (li, *lh):
                lst.unroll(axis)
        else:
            order += [lj]
            lst.reorder(*order)
        lst.vectorize(lj)

    def row_block(self, op: ComputeOp, i: IterVar, j: IterVar, reads: list[_Read],
                  bi: int, min_acc: int = 0) -> tuple[tuple[IterVar | None, int, int], float]:
        """For a spatial-vector tile of ``op`` one vector wide: the axis ``h`` to block
        besides ``i`` (the innermost one the reads using ``i`` skip and the others use, in
        no condition: a guard on a blocked axis would sit in the vector body, where
        ``partition_loops`` peels it off an outer loop), its block ``bh`` and the new
        ``bi``: the best ``bi x bh`` in multiply-adds per load (``bi * bh / (bi + bh)``),
        counting the overlap of shifted last tiles, with the accumulators, ``bh`` loaded
        vectors and a broadcast in the registers, and that score. ``(None, 1, bi)`` when
        no axis qualifies or blocking one does not pay."""
        broadcast = [r for r in reads if i.var in r.uses]
        loaded = [r for r in reads if j.var in r.uses]
        guarded = {v for n in post_order(*self.expanded(op)) if isinstance(n, Compare)
                   for v in post_order(n) if isinstance(v, Var)}
        cands = [a for a in op.axis if a is not i and a is not j and self.ext(a) >= 2
                 and a.var not in guarded and broadcast and loaded
                 and all(a.var not in r.uses for r in broadcast)
                 and all(a.var in r.uses for r in loaded)]
        best: tuple[IterVar | None, int, int] = (None, 1, bi)
        score = bi / (bi + 1) * _tile_use(self.ext(i), bi)
        if not cands:
            return best, score
        h = cands[-1]
        for bh in range(2, min(4, self.ext(h)) + 1):
            most = (self.regs - bh - 2) // bh
            if most < 1:
                break
            b = _row_tile(self.ext(i), min(8, most), bh)
            if b * bh < min_acc:
                continue
            value = b * bh / (b + bh) * _tile_use(self.ext(i), b) * \
                _tile_use(self.ext(h), bh)
            if value > score:
                best, score = (h, bh, b), value
        return best, score

    def reduction_blocks(self, st: Stage, bj: int) -> bool:
        """A reduction too long for its ``bj``-wide panel to stay in L2 (a weight gradient
        over a batch of 28 x 28 images: 6,272 points, 400 KB a panel, streamed from L3 by
        every register tile): sum it in blocks of its outer reduction axis, each a partial
        result (rfactor, scheduled as a reduction of its own, its panels packed), then add
        up the partials. Returns whether it did (and scheduled both stages)."""
        op = st.op
        if op.num_outputs != 1 or not isinstance(op.body[0], Reduce) or \
                op.body[0].combiner.name != "sum" or st.relations:
            return False
        nbytes = max(1, op.output(0).dtype.bits // 8)
        k = self.reduction_points(op)
        panel = k * bj * nbytes
        r0 = op.reduce_axis[0]
        if panel <= self.info.l2_bytes // 2 or self.ext(r0) < 2:
            return False
        part = self.block_partials(st, -(-panel // (self.info.l2_bytes // 4)))
        if part is None:
            return False
        self.schedule_stage(self.s[part])
        self.schedule_stage(self.s[op.output(0)])
        return True

    def block_partials(self, st: Stage, least: int) -> Tensor | None:
        """``rfactor`` of ``st``'s outer reduction axis into at least ``least`` blocks
        (at most the axis's extent): the fewest of equal size up to four times ``least``
        (no guard in the sum; 7 blocks of one image each kept two cores busier than 3
        uneven ones), else ``least`` blocks, the last shorter (its guard lands in a
        remainder loop that ``partition_loops`` peels: 394 or a prime number of rows must
        not turn into one block per row or two). Returns the partial results, or None (and
        ``st`` untouched) when they would take more than ``_PARTIALS_MAX_BYTES`` or ``st``
        adds up partials already."""
        op = st.op
        out = op.output(0)
        r0 = op.reduce_axis[0]
        n = self.ext(r0)
        least = min(least, n)
        blocks = next((b for b in range(least, min(4 * least, n) + 1) if n % b == 0), least)
        if st in self.blocked or \
                blocks * self.size(op) * max(1, out.dtype.bits // 8) > _PARTIALS_MAX_BYTES:
            return None
        ko, _ = split_parts(st, r0, blocks)
        self.blocked.add(st)
        return self.s.rfactor(out, ko, factor_axis=0)

    def column_blocks(self, st: Stage, j: IterVar, reads: list[_Read], lanes: int,
                      work: int) -> bool:
        """Column sums (``dbeta = sum_i H[i, :]``, a bias gradient): a long reduction
        whose inputs carry the vector axis ``j`` in their contiguous index and the outer
        reduction axis in another one. Split over column tiles, each thread read one tile
        of every row, a short run a whole row apart (4 KiB for 1,024 floats): every access
        missed, at a quarter of the memory's bandwidth. Instead the rows are summed in
        blocks (rfactor of the outer reduction axis, blocks in parallel): each block walks
        its rows whole, adding each into its partial row (in L1), and the partials are
        added at the end. Returns whether it did (and scheduled both stages)."""
        op = st.op
        if op.num_outputs != 1 or not isinstance(op.body[0], Reduce) or \
                op.body[0].combiner.name != "sum" or st.relations or not op.reduce_axis:
            return False
        r0 = op.reduce_axis[0]
        nbytes = max(1, op.output(0).dtype.bits // 8)
        carriers = [r for r in reads if r.last.get(j.var) == 1]
        if not carriers or work < PARALLEL_MIN_WORK or self.ext(r0) < _COLUMN_MIN_ROWS or \
                self.ext(j) % lanes or self.ext(j) < _COLUMN_MIN_TILES * lanes or \
                self.size(op) * nbytes > _COLUMN_ROW_MAX_BYTES or \
                any(r0.var not in r.uses or r0.var in r.last for r in carriers):
            return False
        # enough blocks to share among the cores
        part = self.block_partials(st, max(2, 2 * self.cores))
        if part is None:
            return False
        pst = self.s[part]
        pop = pst.op
        pj = pop.axis[1 + list(op.axis).index(j)]
        jo, ji = pst.split(pj, factor=lanes)
        spatial = [a for a in pop.axis[1:] if a is not pj]
        pst.reorder(pop.axis[0], *pop.reduce_axis, *spatial, jo, ji)
        pst.vectorize(ji)
        self.parallel_outer(pst, [pop.axis[0]], work)
        self.schedule_stage(self.s[op.output(0)])
        return True

    def pack_panel(self, st: Stage, local: Stage, jo: IterVar, ivar: Var, bj: int) -> None:
        """Copy, once per ``jo`` iteration, the inputs that ``local`` reads without ``ivar``
        (reused by every i tile) into a contiguous buffer, when it fits in L2."""
        k = self.reduction_points(local.op)
        nbytes = max(1, local.op.output(0).dtype.bits // 8)
        if k * bj * nbytes > self.info.l2_bytes // 2:
            return
        by_tensor: dict[Tensor, list[_Read]] = {}
        for r in self.reads(local.op):
            by_tensor.setdefault(r.tensor, []).append(r)
        rvars = {r.var for r in local.op.reduce_axis}
        jvar = local.op.axis[-1].var
        affine = self.affine_reads(local.op)
        for t, rs in by_tensor.items():
            if t not in local.op.input_tensors:
                continue  # read through an inlined producer: copying would not help
            if t not in affine:
                continue  # a clamped or data-placed index: the copy would be the whole tensor
            if any(_ivar_of(local, ivar) in r.uses for r in rs):
                continue
            if not all(jvar in r.uses and r.uses & rvars for r in rs):
                continue
            cache = self.s.cache_read(t, "local", [local.op.output(0)])
            self.s[cache].compute_at(st, _current(st, jo))
            cst = self.s[cache]
            last = cst.op.axis[-1]
            if self.ext(last) >= bj:
                lo, li = cst.split(last, factor=bj, tail="shift")
                cst.vectorize(li)

    # reduce-vector: C[i, j] = sum_k A[i, k] B[j, k] -----------------------------------------
    def reduce_vector(self, st: Stage, reads: list[_Read], k: IterVar, lanes: int) -> None:
        op = st.op
        # a reduction so long that a register tile's rows of the first operand do not stay
        # in L2 (a weight gradient over a batch of 56 x 56 images: 4 channels x 25,088
        # points, 400 KB), streamed again for every tile of the other side, many times: sum
        # it in blocks of its outer reduction axis first (a 3 x 3 convolution's, streamed
        # 192-384 times: unet_up's weight gradient 62 -> 43 ms; a 1 x 1 convolution's, 8-48
        # times, gained nothing measurable and its extra stages cost 5% of the compile)
        blocked = self.block_axes(list(op.axis), reads)
        if len(blocked) == 2:
            (ta, tb), _ = self.dot_tiles(*(self.ext(a) for a in blocked))
            streams = self.size(op) // self.ext(blocked[0]) // min(tb, self.ext(blocked[1]))
            if streams >= _BLOCK_MIN_STREAMS and \
                    self.reduction_blocks(st, min(ta, self.ext(blocked[0]))):
                return
        t = op.output(0)
        work = self.work(op)
        _, kv = st.split(k, factor=lanes)
        part = self.s.rfactor(t, kv, factor_axis=len(op.axis))
        st = self.s[t]
        spatial = list(st.op.axis)
        blocked = self.block_axes(spatial, reads)
        tiles: dict[IterVar, int] = {}
        # ta x tb vector accumulators plus ta + 1 loaded vectors fit the registers
        ta, tb = self.dot_tiles(*(self.ext(a) for a in blocked))[0] if len(blocked) == 2 \
            else (1, self.dot_tiles(1, self.ext(blocked[0]))[0][1] if blocked else 1)
        for a, want in zip(blocked, (ta, tb) if len(blocked) == 2 else (tb,)):
            tiles[a] = min(self.ext(a), want)
        outer = [a for a in spatial if a not in tiles]
        inner_o, inner_i = [], []
        for a in blocked:
            ao, ai = st.split(a, factor=tiles[a], tail="shift")
            inner_o.append(ao)
            inner_i.append(ai)
        reduce_leaves = [a for a in st.leaf_iter_vars if a.kind == "reduce"]
        attach = inner_o[-1] if inner_o else (outer[-1] if outer else None)
        # the horizontal sums' tile loops, the longer side outermost as in the partial sums
        if len(blocked) == 2 and tiles[blocked[0]] < tiles[blocked[1]]:
            inner_i.reverse()
        if len(blocked) == 2:
            # the second operand's few rows stay in L1 while a block of the first one's
            # tiles (sized for half the L2) streams past them
            k_points = self.reduction_points(op)
            nbytes = max(1, t.dtype.bits // 8)
            per_tile = tiles[blocked[0]] * k_points * nbytes
            nblock = max(1, (self.info.l2_bytes // 2) // max(1, per_tile))
            ao = inner_o[0]
            if nblock < self.ext(ao):
                # blocks of equal size, the last one shifted inwards: no guard in the loops
                nblock = -(-self.ext(ao) // -(-self.ext(ao) // nblock))
                aoo, aoi = st.split(ao, factor=nblock, tail="shift")
                st.reorder(*outer, aoo, inner_o[1], aoi, *inner_i, *reduce_leaves)
                self.parallel_outer(st, [*outer, aoo, inner_o[1]], work)
                attach = aoi
            else:
                st.reorder(*outer, inner_o[1], ao, *inner_i, *reduce_leaves)
                self.parallel_outer(st, [*outer, inner_o[1], ao], work)
                attach = ao
        else:
            st.reorder(*outer, *inner_o, *inner_i, *reduce_leaves)
            self.parallel_outer(st, [*outer, *inner_o], work)
        # the tile's horizontal sums, one per accumulator: straight code, as the partial
        # sums' loops are (LLVM unrolls only innermost loops of scheduled nests)
        for a in inner_i:
            st.unroll(a)
        pst = self.s[part]
        if attach is not None:
            pst.compute_at(st, _current(st, attach))
        pop = pst.op
        pv = pop.axis[-1]
        p_block = [pop.axis[spatial.index(a)] for a in blocked]
        p_rest = [pop.axis[idx] for idx, a in enumerate(spatial) if a not in tiles]
        # the longer tile side unrolled outermost: the shorter side's loaded vectors stay in
        # registers across it (``dot_tiles`` counts them)
        if len(blocked) == 2 and tiles[blocked[0]] < tiles[blocked[1]]:
            p_block.reverse()
        pst.reorder(*p_rest, *pop.reduce_axis, *p_block, pv)
        for a in p_block:
            pst.unroll(a)
        pst.vectorize(pv)

    def block_axes(self, spatial: list[IterVar], reads: list[_Read]) -> list[IterVar]:
        """Up to two output axes to block in registers. A pair is worth blocking when one
        read skips the first and uses the second and another read the other way round
        (``A[i, k] * B[j, k]``: a tile reuses each loaded vector of both); the best tile
        for the registers wins, the inner pair on ties. Without such a pair, the innermost
        axis some read skips (its loaded vector is reused along it)."""
        cand = [a for a in spatial if any(a.var not in r.uses for r in reads)
                and any(a.var in r.uses for r in reads)]

        def crossed(a: IterVar, b: IterVar) -> bool:
            return any(a.var not in r.uses and b.var in r.uses for r in reads) and \
                any(b.var not in r.uses and a.var in r.uses for r in reads)

        best: list[IterVar] = []
        score = 0.0
        for x in range(len(cand)):
            for y in range(x + 1, len(cand)):
                a, b = cand[x], cand[y]
                if not crossed(a, b):
                    continue
                value = self.dot_tiles(self.ext(a), self.ext(b))[1]
                if value >= score:
                    best, score = [a, b], value
        if best:
            return best
        return cand[-1:]

    # row reductions without spatial axes (short) --------------------------------------------
    def row_reduce(self, st: Stage, reads: list[_Read], lanes: int) -> None:
        op = st.op
        k = self.vector_reduce_axis(reads, list(op.reduce_axis), lanes)
        if k is None:
            return
        _, kv = st.split(k, factor=lanes)
        part = self.s.rfactor(op.output(0), kv, factor_axis=0)
        pst = self.s[part]
        pop = pst.op
        pst.reorder(*pop.reduce_axis, pop.axis[0])
        pst.vectorize(pop.axis[0])

    # full reductions: two levels ---------------------------------------------------------
    def two_level(self, st: Stage) -> None:
        """``L = sum(X[k0, k1, ...])``: partials over the outer reduction axis in parallel
        (each scheduled as a row reduction), then a short serial sum of the partials."""
        op = st.op
        t = op.output(0)
        red = list(op.reduce_axis)
        outer = red[0]
        if len(red) == 1:
            n = self.ext(outer)
            chunks = max(1, min(64 * self.cores, n // 4096))
            if chunks < 2:
                self.row_reduce(st, self.reads(op), self.info.lanes())
                return
            outer, _ = split_parts(st, outer, chunks)
        part = self.s.rfactor(t, outer, factor_axis=0)
        pst = self.s[part]
        self.schedule_stage(pst)


def _current(st: Stage, iv: IterVar) -> IterVar:
    """The leaf loop that now runs ``iv``: itself, or the loop it was fused into."""
    while iv not in st.leaf_iter_vars:
        for rel in st.relations:
            if isinstance(rel, Fuse) and iv in (rel.outer, rel.inner):
                iv = rel.fused
                break
        else:
            return iv
    return iv


def _ivar_of(local: Stage, ivar: Var) -> Var:
    """The variable of ``local``'s copy of the spatial axis ``ivar`` of its parent."""
    for iv in local.op.axis:
        if iv.var.name == ivar.name:
            return iv.var
    return ivar


def _divides(e: Expr) -> bool:
    """Whether the index ``e`` holds an integer division or remainder."""
    return any(isinstance(n, Binary) and n.op in (Op.FLOORDIV, Op.FLOORMOD)
               for n in post_order(e))


def _tile_use(n: int, t: int) -> float:
    """The useful fraction of the points that tiles of ``t`` compute over an extent ``n``
    (the last tile shifted inwards, its overlap with the one before computed twice)."""
    return n / (-(-n // t) * t)


def _vector_tile(n: int, lanes: int) -> int:
    """The width of the vectorized tile along an output axis of extent ``n``: two vectors or
    one (the whole axis when it is shorter than a vector). The cheapest in vector
    instructions wins, counting half an instruction per tile for what each tile reloads
    (its broadcast operand, the loop). Widths between multiples of ``lanes`` would leave a
    narrower vector in every tile: a shifted whole vector costs no more."""
    cand = [t for t in (2 * lanes, lanes) if t <= n] or [n]

    def cost(t: int) -> float:
        return -(-n // t) * (-(-t // lanes) + 0.5)

    return min(cand, key=lambda t: (cost(t), -t))


def _row_tile(n: int, most: int, nvec: int) -> int:
    """The unrolled rows of a spatial-vector tile over an axis of extent ``n``, at most
    ``most``: each row's ``nvec`` accumulators cost one broadcast per ``nvec`` loaded
    vectors shared by the rows (more rows, more multiply-adds per load), and a last tile
    shifted inwards recomputes what overlaps (6 rows for a 7 x 7 image's 7 compute 12
    points; 4 compute 8). The best product of the two wins, the larger on ties."""
    if n <= most:
        return n
    best, score = 1, 0.0
    for b in range(1, most + 1):
        value = b / (b + nvec) * n / (-(-n // b) * b)
        if value >= score:
            best, score = b, value
    return best


def _contiguous_count(reads: list[_Read], v: Var) -> int:
    """How many reads have ``v`` with coefficient 1 in their last index."""
    return sum(1 for r in reads if r.last.get(v) == 1)
