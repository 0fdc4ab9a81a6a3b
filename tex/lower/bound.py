"""Bound inference for attached stages: the box of a tensor that a stage computed at a loop
of another stage produces per iteration of that loop (TVM's ``schedule/bound.cc``).

A stage attached at loop ``L`` of a consumer computes only the region the consumer reads
during one iteration of ``L``: each read index is affine in the loops inside ``L``, so its
range is ``[base + Σ min(c*(n-1), 0), ... + Σ |c|*(n-1)]`` with a constant extent.
Non-affine indices, and boxes placed by data (a producer read at ``I[j]``), fall back to
the whole dimension. Other stages computed inside ``L`` may read the producer too: regions
are inferred consumers first, so the producer's box covers their boxes' reads (softmax:
max, exp and sum per row). On a GPU the box also covers the threads that share the
producer's buffer (a shared tile serves every thread of the block).

A stage whose output is an argument is computed in place, in the caller's array: the
boxes of the iterations must cover the tensor (checked on the enclosing loops), else the
box is the whole tensor (serial loops) or the build is refused (parallel or thread loops),
so that every argument ends up fully written.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..arith import Analyzer, range_interval
from ..arith.extent import as_extent, is_one, same_extent
from ..dtype import int32
from ..ir.expr import Binary, Cast, Const, Expr, Range, TensorRead, Unary, Var
from ..ir.semantics import NUMPY_BINARY, NUMPY_UNARY, numpy_cast
from ..ir.visit import evaluate_bottom_up, post_order, substitute
from ..schedule import Schedule, Stage
from .loops import Level, loops
from .stmt import ForKind
from .storage import i32

__all__ = ["BoundInference", "Region"]


@dataclass(frozen=True)
class Region:
    """The box of a tensor a stage computed at a loop produces: ``los + [0, exts)``."""

    los: tuple[Expr, ...]
    exts: tuple[int | Expr, ...]  # (symbolic: over the shape variables)


def _covers(ext: int | Expr, n: int | Expr) -> bool:
    """Whether a region's extent reaches the whole dimension (a symbolic one that is not
    known smaller counts as the whole: the box is then the dimension itself)."""
    if isinstance(ext, int) and isinstance(n, int):
        return ext >= n
    return not isinstance(ext, int) or same_extent(ext, n)


class BoundInference:
    """Regions of the stages attached in ``sch`` (``body_of``: a stage's body with the
    inlined stages expanded; ``gpu``: whether some stage is bound to GPU threads)."""

    def __init__(self, sch: Schedule, body_of: Callable[[Stage], list[Expr]],
                 gpu: bool) -> None:
        self.sch = sch
        self.body_of = body_of
        self.gpu = gpu

    def check_readers(self, child: Stage) -> None:
        """Every stage that reads ``child`` (but its attach stage) must be computed inside
        the same loop nest: attached to the same stage (the level is checked by
        ``infer_region``)."""
        parent = child.attach_stage
        assert parent is not None and child.attach_ivar is not None
        for other in self.sch.consumers(child):
            if other is not parent and other is not child and other.attach_stage is not parent:
                raise _outside_reader(child, parent, child.attach_ivar.name, other)

    def scope_of(self, child: Stage, enclosing: Sequence[Level]) -> str:
        """The memory scope of an attached stage: its own if set; on a GPU, by default
        ``local`` inside a thread index, ``shared`` inside a block index only (as TVM)."""
        if child.scope != "global" or not self.gpu:
            return child.scope
        tags = [lv.tag for lv in enclosing if lv.is_thread]
        if any(t.startswith("threadIdx") for t in tags):
            return "local"
        return "shared" if tags else "global"

    def infer_region(self, child: Stage, parent: Stage, levels: list[Level], k: int,
                     point: Mapping[Var, Expr], children: Sequence[tuple[int, Stage]],
                     regions: Mapping[Stage, Region], outer: Sequence[Level] = ()
                     ) -> Region:
        """The box of ``child`` read during one iteration of loop ``k`` of ``parent``: by
        ``parent`` itself and by the stages attached inside that loop (regions known).
        On a GPU the box also covers the threads that share the child's buffer (a shared
        tile serves every thread of the block)."""
        loop = levels[k].iv.name
        ranging = {lv.var: lv.extent for lv in levels[k + 1:]}
        enclosing = [*outer, *loops(levels[:k + 1])]
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
        an = Analyzer({v: range_interval(Range(0, n)) for v, n in ranging.items()})
        los: list[Expr] = []
        exts: list[int | Expr] = []
        for d, n_d in enumerate(child.op.shape):
            region = Analyzer.union_range([an.affine_range(r.indices[d], ranging) for r in reads])
            if region is not None and any(isinstance(x, TensorRead)
                                          for x in post_order(region[0])):
                region = None  # a box placed by data: the whole dimension
            if region is None or _covers(region[1], n_d):
                los.append(i32(0))
                exts.append(n_d)
            else:
                los.append(region[0])
                exts.append(region[1])
        return Region(tuple(los), tuple(exts))

    def argument_region(self, child: Stage, box: Region, enclosing: Sequence[Level],
                        sharing: Sequence[Level]) -> Region:
        """The box an attached stage whose output is an argument computes per iteration:
        ``box`` (what its readers need) when the boxes of all iterations of the enclosing
        loops cover the whole tensor (without overlap when a loop runs in parallel), else
        the whole tensor when every enclosing loop is serial (each iteration recomputes
        it, in place); otherwise ``ValueError``, as when the threads of a block would
        share it (``sharing``: the GPU thread indices inside the attach point)."""
        assert child.attach_ivar is not None and child.attach_stage is not None
        if sharing or any(lv.is_thread for lv in enclosing) and child.bindings:
            # the threads of a block would exchange the argument's elements through
            # global memory, with no barrier between writes and reads
            where = f"outside {', '.join(repr(lv.tag) for lv in sharing)}" if sharing \
                else "with thread-bound loops of its own"
            raise ValueError(
                f"lower: '{child.name}' is an argument computed at "
                f"'{child.attach_ivar.name}' of '{child.attach_stage.name}' {where}: the "
                "threads of a block would share it through global memory; compute it at "
                "the innermost thread loop, compute_root it, or leave it out of the "
                "arguments (a shared-memory copy is a stage of its own: cache_read)")
        shape = tuple(n if isinstance(n, Expr) else int(n) for n in child.op.shape)
        whole = Region(tuple(i32(0) for _ in shape), shape)
        if all(same_extent(e, n) for e, n in zip(box.exts, shape)) and \
                all(isinstance(lo, Const) and lo.value == 0 for lo in box.los):
            return box
        parallel = [lv for lv in enclosing
                    if lv.kind in (ForKind.PARALLEL, ForKind.THREAD) and not is_one(lv.extent)]
        symbolic = not all(isinstance(n, int) for n in (*shape, *box.exts)) or \
            not all(isinstance(lv.extent, int) for lv in enclosing)
        tiling = _symbolic_tiling(box, shape, enclosing) if symbolic else \
            _tiling(box, shape, enclosing)
        if tiling is not None and (tiling == "disjoint" or not parallel):
            return box
        if not parallel:
            return whole
        loop_names = ", ".join(f"'{lv.iv.name}'" for lv in parallel)
        raise ValueError(
            f"lower: '{child.name}' is an argument (the caller's array must be written in "
            f"full), but it is computed at '{child.attach_ivar.name}' of "
            f"'{child.attach_stage.name}' inside the parallel loop(s) {loop_names}, whose "
            f"iterations compute {'overlapping parts' if tiling else 'only parts'} of it; "
            f"compute_root '{child.name}', or leave it out of the arguments")


def _symbolic_tiling(box: Region, shape: Sequence[int | Expr], enclosing: Sequence[Level]
                     ) -> str | None:
    """``_tiling`` with symbolic extents, for boxes that are a whole dimension or a tile
    ``c*v + k`` of one loop ``v`` per dimension (each loop in one dimension), covering the
    dimension when that is proved (``v`` over ``[0, n)`` with tiles of 1 at ``v``);
    otherwise None (not shown to cover)."""
    extent = {lv.var: lv.extent for lv in enclosing}
    an = Analyzer()
    used: set[Var] = set()
    disjoint = True
    for lo, ext, n in zip(box.los, box.exts, shape):
        lf = an.linear(lo)
        if not lf.terms:
            if lf.const != 0 or not same_extent(ext, n):
                return None
            continue
        if len(lf.terms) != 1:
            return None
        (v, c), = lf.terms.items()
        if not (isinstance(v, Var) and v in extent) or v in used or lf.const > 0 or c <= 0:
            return None
        used.add(v)
        # tiles at c*k + const, k in [0, E): no gap (c <= ext), the last reaches n
        if not isinstance(ext, int) or c > ext:
            return None
        reach = as_extent(c * (extent[v] - 1) + lf.const + ext - n)  # type: ignore[operator]
        if not (isinstance(reach, int) and reach >= 0):
            return None
        disjoint &= c == ext and reach == 0
    return _verdict(disjoint, used, enclosing)


def _verdict(disjoint: bool, used: set[Var], enclosing: Sequence[Level]) -> str:
    """How covering boxes tile: "disjoint" when the lows never overlap and every loop
    moves the box (a loop the box does not move with recomputes it), else "overlapping"."""
    if any(not is_one(lv.extent) and lv.var not in used for lv in enclosing):
        return "overlapping"
    return "disjoint" if disjoint else "overlapping"


def _tiling(box: Region, shape: Sequence[int], enclosing: Sequence[Level]) -> str | None:
    """How the boxes ``box.los + [0, box.exts)`` of all iterations of the enclosing loops
    cover a tensor of ``shape``: "disjoint" (each element once), "overlapping", or None
    when they may leave elements out (or that cannot be shown). Lows affine in loop
    variables no other dimension uses (over at most 2**16 values) are decided per
    dimension; others (a fused loop's ``f // n`` and ``f % n``) by counting what every
    iteration covers (``_counted_tiling``)."""
    affine = _affine_tiling(box, shape, enclosing)
    return affine if affine != "unknown" else _counted_tiling(box, shape, enclosing)


# the most loop iterations and tensor elements _counted_tiling enumerates
_COUNT_ITERATIONS = 1 << 14
_COUNT_ELEMENTS = 1 << 22


def _counted_tiling(box: Region, shape: Sequence[int], enclosing: Sequence[Level]
                    ) -> str | None:
    """``_tiling`` by enumeration: the lows evaluated at every iteration of the enclosing
    loops (NumPy, all at once), each box's elements counted; None when the loops or the
    tensor are too large to count, or a low reads memory."""
    loops = [lv for lv in enclosing if not is_one(lv.extent)]
    iterations = math.prod(lv.extent for lv in loops)
    if iterations > _COUNT_ITERATIONS or math.prod(shape) > _COUNT_ELEMENTS:
        return None
    grids = np.meshgrid(*[np.arange(lv.extent, dtype=np.int64) for lv in loops],
                        indexing="ij") if loops else []
    env: dict[Var, np.ndarray] = {lv.var: g.ravel() for lv, g in zip(loops, grids)}
    env.update((lv.var, np.zeros(1, np.int64)) for lv in enclosing if is_one(lv.extent))
    counts = np.zeros(tuple(shape), np.int32)
    lows = []
    for lo in box.los:
        values = _values(lo, env)
        if values is None:
            return None
        lows.append(np.broadcast_to(values, (max(iterations, 1),)))
    for k in range(max(iterations, 1)):
        index = []
        for d, (low, ext) in enumerate(zip(lows, box.exts)):
            a = int(low[k])
            if a < 0 or a + ext > shape[d]:
                return None
            index.append(slice(a, a + ext))
        counts[tuple(index)] += 1
    if counts.min() == 0:
        return None
    return "disjoint" if counts.max() == 1 else "overlapping"


def _values(e: Expr, env: Mapping[Var, np.ndarray]) -> np.ndarray | None:
    """``e`` (integer arithmetic of the variables in ``env``) at every point of ``env``'s
    arrays; None when it reads anything else."""
    def inputs(n: Expr) -> tuple[Expr, ...]:
        return n.children()

    def compute(n: Expr) -> np.ndarray | None:
        kids = [memo[k] for k in n.children()]
        if any(k is None for k in kids):
            return None
        with np.errstate(all="ignore"):
            if isinstance(n, Const):
                return np.asarray(n.value, dtype=n.dtype.numpy)
            if isinstance(n, Var):
                got = env.get(n)
                return None if got is None else got.astype(n.dtype.numpy)
            if isinstance(n, Binary) and n.op in NUMPY_BINARY:
                return NUMPY_BINARY[n.op](*kids)  # type: ignore[arg-type]
            if isinstance(n, Unary) and n.op in NUMPY_UNARY:
                return NUMPY_UNARY[n.op](kids[0])  # type: ignore[arg-type]
            if isinstance(n, Cast):
                return numpy_cast(kids[0], n.dtype.numpy)  # type: ignore[arg-type]
        return None

    memo: dict[Expr, np.ndarray | None] = {}
    out = evaluate_bottom_up(e, memo, inputs, compute)
    return None if out is None else out.astype(np.int64)


def _affine_tiling(box: Region, shape: Sequence[int], enclosing: Sequence[Level]
                   ) -> str | None:
    """``_tiling`` for lows affine in loop variables no other dimension uses (over at most
    2**16 values); "unknown" when a low is not such."""
    extent = {lv.var: lv.extent for lv in enclosing}
    an = Analyzer()
    used: set[Var] = set()
    disjoint = True
    for lo, ext, n in zip(box.los, box.exts, shape):
        lf = an.linear(lo)
        if any(not (isinstance(v, Var) and v in extent) or v in used for v in lf.terms):
            return "unknown"
        used.update(lf.terms)  # type: ignore[arg-type]
        values = [lf.const]
        for v, c in lf.terms.items():
            if math.prod(extent[w] for w in lf.terms) > 1 << 16:
                return "unknown"
            values = [x + c * k for x in values for k in range(extent[v])]  # type: ignore[index]
        values.sort()
        if values[0] > 0 or values[-1] + ext < n:
            return None
        for a, b in zip(values, values[1:]):
            if b - a > ext:
                return None
            if b - a < ext:
                disjoint = False
    return _verdict(disjoint, used, enclosing)


def _outside_reader(child: Stage, parent: Stage, loop: str, other: Stage) -> ValueError:
    """The error for ``other`` reading ``child`` outside the loop ``child`` is computed at."""
    return ValueError(
        f"lower: '{child.name}' is computed at loop '{loop}' of '{parent.name}', but "
        f"'{other.name}' reads it outside that loop; compute '{other.name}' inside it too "
        f"(at '{loop}' or deeper), or compute_root '{child.name}'")
