"""``auto_schedule(outputs, target="cuda")``: thread bindings and shared tiles for a GPU.

After the CPU scheduler's inlining (element-wise producers are recomputed in their
consumers), every remaining stage becomes one kernel, by the first rule that applies:

1. **Element-wise** (no reduction): the output axes fused, split by 256 threads per
   block; ``blockIdx.x`` takes the outer part.
2. **Tiled reduction** (a reduction with two output axes of at least 8, as ``dense``,
   ``conv2d``, ``batch_matmul`` and their data gradients): a block computes a tile of
   ``16v x 16v`` outputs with 16 x 16 threads, ``v x v`` outputs per thread (v = 4, 2 or 1
   by the axes' extents) accumulated in registers (``cache_write(.., "local")``). The first
   reduction axis is split by ``kt``; for every input whose tile per reduction step is
   affine and small, a shared-memory copy is computed at the step (``cache_read(..,
   "shared")``), fetched cooperatively by the block's threads, with the barriers lowering
   inserts. Output axes before the two tiled ones go to ``blockIdx.z``.
3. **Per-thread reduction** (at least 2048 outputs): one output per thread, the reduction
   serial in a register.
4. **Cross-thread reduction** (few outputs: softmax's row max and sum, layernorm's mean,
   weight gradients with few elements): one block per output, the fused reduction axes
   split over 256 threads (fewer for short reductions), combined in shared memory.
5. **Two-level reduction** (fewer outputs than multiprocessors, at least 65536 terms: a
   loss over a large tensor): the reduction is ``rfactor``-ed into up to 4 partial results
   per multiprocessor, each a cross-thread reduction in its own block; a second kernel
   combines them.

Before these, a **scatter** (a one-hot sum over data-dependent indices, ``tex.ir.scatter``:
the gradient of ``take`` or of a max) with at least a warp of free points binds its free
axes, fused, to blocks x threads and leaves its scatter axes serial: each thread owns one
free point, initializes its elements and runs the indices once (no atomics: distinct
threads write distinct elements). Per thread that is about the gather's latency (one pass
over the indices, plus the init of its elements) without the gather's pass for every
output element. With fewer free points (a 1-D ``take``) the rules above apply (a gather).

Bad fits are refused before they are made: a shared tile that would not be affine or
would exceed the shared-memory budget is not cached (the input is read from global
memory instead).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ..arith import Analyzer
from ..arith.extent import at_hint
from ..ir.expr import IterVar, Reduce, TensorRead, Var
from ..ir.scatter import ScatterForm
from ..ir.tensor import ComputeOp, Tensor
from ..ir.visit import post_order
from ..target import CudaTarget, cpu_info
from .auto import AutoScheduler
from .axes import ThreadAxis
from .schedule import Schedule, Stage, split_parts

__all__ = ["schedule_cuda"]

_THREADS = 256  # threads per block of element-wise and per-thread kernels
_TILE_THREADS = 16  # threads per side of a tiled reduction's block
_KT = 8  # reduction step of a tiled reduction
_PER_THREAD_MIN = 2048  # outputs from which one thread per output fills the GPU
_MAX_GRID_Z = 65535  # CUDA's limit on gridDim.z
_TWO_LEVEL_MIN = 1 << 16  # reductions this long to few outputs use many blocks
_SCATTER_MIN_FREE = 32  # free points from which a scatter runs one thread per point


def _bind(st: Stage, iv: IterVar, tag: str) -> None:
    st.bind(iv, ThreadAxis(tag))


def _threads_for(n: int, cap: int = _THREADS) -> int:
    """Threads per block for ``n`` items: a warp multiple up to ``cap``."""
    return min(cap, max(32, -(-n // 32) * 32))


class _GPUScheduler(AutoScheduler):
    def __init__(self, s: Schedule, cuda: CudaTarget,
                 hint: Mapping[Var, int] | None = None) -> None:
        super().__init__(s, cpu_info("llvm"), hint)
        self.cuda = cuda
        self.analyzer = Analyzer()

    def run(self) -> None:  # type: ignore[override]
        self.inline()
        for st in list(self.s.stages):
            if st.attach_type == "root" and isinstance(st.op, ComputeOp):
                self.schedule_gpu(st)
            elif st.attach_type == "scan" and isinstance(st.op, ComputeOp):
                self.scan_step_gpu(st)

    def scan_step_gpu(self, st: Stage) -> None:
        """A stage of a scan's body computes one row per step (a launch per step): its
        other axes over blocks x threads, a reduction over a block's threads."""
        op = st.op
        rest = list(op.axis[1:])
        if not op.reduce_axis:
            if rest:
                self.flat(st, rest)
            return
        red = list(op.reduce_axis)
        k = st.fuse(*red) if len(red) > 1 else red[0]
        ko, ki = st.split(k, factor=_threads_for(self.ext(k)))
        if rest:
            fused = st.fuse(*rest) if len(rest) > 1 else rest[0]
            st.reorder(op.axis[0], fused, ko, ki)
            _bind(st, fused, "blockIdx.x")
        _bind(st, ki, "threadIdx.x")

    def schedule_gpu(self, st: Stage) -> None:
        op = st.op
        if not op.axis and not op.reduce_axis:
            return  # a 0-d element-wise value: a one-thread kernel
        if not op.reduce_axis:
            self.flat(st, list(op.axis))
            return
        form = self.scatter_of(op)
        if form is not None and \
                math.prod(self.ext(iv) for iv in form.free_axes) >= _SCATTER_MIN_FREE:
            self.scatter_gpu(st, form)
            return
        size = math.prod(self.ext(iv) for iv in op.axis)
        if self.tiled(st):
            return
        if size >= _PER_THREAD_MIN:
            self.per_thread(st)
            return
        n_red = math.prod(self.ext(iv) for iv in op.reduce_axis)
        if size < self.cuda.sm_count and n_red >= _TWO_LEVEL_MIN and op.num_outputs == 1:
            self.two_level(st)
            return
        self.cross_thread(st)

    # -- a scatter: one thread per free point --------------------------------------------
    def scatter_gpu(self, st: Stage, form: ScatterForm) -> None:
        free = list(form.free_axes)
        st.reorder(*free, *form.axes, *st.op.reduce_axis)
        self.flat(st, free)

    # -- 5. a long reduction to few outputs: partial results over many blocks -----------
    def two_level(self, st: Stage) -> None:
        op = st.op
        red = list(op.reduce_axis)
        k = st.fuse(*red) if len(red) > 1 else red[0]
        parts = min(4 * self.cuda.sm_count, self.ext(k) // 1024)
        ko, _ = split_parts(st, k, parts)
        partial = self.s.rfactor(op.output(0), ko)
        self.cross_thread(self.s[partial])
        self.cross_thread(self.s[op.output(0)])

    # -- 1. element-wise ------------------------------------------------------------------
    def flat(self, st: Stage, axes: Sequence[IterVar]) -> tuple[IterVar, IterVar]:
        """Fuse ``axes`` and bind them to blocks x threads; returns (block, thread) axes."""
        fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
        n = self.ext(fused)
        bx, tx = st.split(fused, factor=_threads_for(n))
        _bind(st, bx, "blockIdx.x")
        _bind(st, tx, "threadIdx.x")
        return bx, tx

    # -- 3. one output per thread ---------------------------------------------------------
    def per_thread(self, st: Stage) -> None:
        op = st.op
        if op.num_outputs == 1 and not st.relations:
            local = self.s[self.s.cache_write(op.output(0), "local")]
            _, tx = self.flat(st, list(st.op.axis))
            local.compute_at(st, tx)
            return
        self.flat(st, list(op.axis))

    # -- 4. one block per output ----------------------------------------------------------
    def cross_thread(self, st: Stage) -> None:
        op = st.op
        red = list(op.reduce_axis)
        k = st.fuse(*red) if len(red) > 1 else red[0]
        n = self.ext(k)
        ko, ki = st.split(k, factor=_threads_for(n))
        if op.axis:
            fused = st.fuse(*op.axis) if len(op.axis) > 1 else op.axis[0]
            st.reorder(fused, ko, ki)
            _bind(st, fused, "blockIdx.x")
        _bind(st, ki, "threadIdx.x")

    # -- 2. shared-memory tiles -----------------------------------------------------------
    def tiled(self, st: Stage) -> bool:
        op = st.op
        if len(op.axis) < 2 or op.num_outputs != 1 or st.relations:
            return False
        i_ax, j_ax = op.axis[-2], op.axis[-1]
        ni, nj = self.ext(i_ax), self.ext(j_ax)
        outer = op.axis[:-2]
        n_outer = math.prod(self.ext(iv) for iv in outer)
        if ni < 8 or nj < 8 or n_outer > _MAX_GRID_Z:
            return False
        if math.prod(self.ext(iv) for iv in op.reduce_axis) < 8:
            return False
        vi = 4 if ni >= 64 else 2 if ni >= 32 else 1
        vj = 4 if nj >= 64 else 2 if nj >= 32 else 1
        ti = min(_TILE_THREADS, -(-ni // vi))
        tj = min(_TILE_THREADS, -(-nj // vj))
        first = op.reduce_axis[0]
        kt = min(_KT, self.ext(first))
        # which inputs get a shared tile: affine regions within the budget
        tile = {i_ax.var: ti * vi, j_ax.var: tj * vj, first.var: kt}
        budget = self.cuda.max_shared_bytes // 2  # leave room for larger tiles' padding
        cached: list[Tensor] = []
        used = 0
        for t, nbytes in self.shared_regions(op, tile):
            if nbytes is not None and used + nbytes <= budget:
                cached.append(t)
                used += nbytes
        local = self.s[self.s.cache_write(op.output(0), "local")]
        st = self.s[op.output(0)]
        i_ax, j_ax = st.op.axis[-2], st.op.axis[-1]
        by, yi = st.split(i_ax, factor=ti * vi)
        ty, vy = st.split(yi, factor=vi)
        bx, xi = st.split(j_ax, factor=tj * vj)
        tx, vx = st.split(xi, factor=vj)
        heads: list[IterVar] = []
        if st.op.axis[:-2]:
            bz = st.fuse(*st.op.axis[:-2]) if len(st.op.axis) > 3 else st.op.axis[0]
            heads.append(bz)
            _bind(st, bz, "blockIdx.z")
        st.reorder(*heads, by, bx, ty, tx, vy, vx)
        _bind(st, by, "blockIdx.y")
        _bind(st, bx, "blockIdx.x")
        _bind(st, ty, "threadIdx.y")
        _bind(st, tx, "threadIdx.x")
        local.compute_at(st, tx)
        lop = local.op
        ko, ki = local.split(lop.reduce_axis[0], factor=kt)
        local.reorder(ko, ki, *lop.reduce_axis[1:], *lop.axis)
        for t in cached:
            copy = self.s[self.s.cache_read(t, "shared", [local.op])]
            copy.compute_at(local, ko)
            fused = copy.fuse(*copy.op.axis) if len(copy.op.axis) > 1 else copy.op.axis[0]
            rest, fx = copy.split(fused, factor=tj)
            _, fy = copy.split(rest, factor=ti)
            _bind(copy, fy, "threadIdx.y")
            _bind(copy, fx, "threadIdx.x")
        return True

    def shared_regions(self, op: ComputeOp, tile: dict[Var, int]
                       ) -> list[tuple[Tensor, int | None]]:
        """Each tensor ``op`` reads directly, with the bytes of its region while the vars
        in ``tile`` range over their extents (other reduction axes over their domains,
        other output axes fixed); None when a read is not affine or the tensor is a 0-d or
        tiny one not worth a copy."""
        ranging = dict(tile)
        for iv in op.reduce_axis:
            ranging.setdefault(iv.var, self.ext(iv))
        out: list[tuple[Tensor, int | None]] = []
        seen: dict[Tensor, list[TensorRead]] = {}
        for n in post_order(*op.body):
            if isinstance(n, Reduce):
                continue
            if isinstance(n, TensorRead) and n.indices:
                seen.setdefault(n.tensor, []).append(n)
        for t, reads in seen.items():
            spans: list[int] | None = []
            for d, n_d in enumerate(t.shape):
                # the box lowering will allocate: the union of the reads' ranges
                union = Analyzer.union_range(
                    [self.analyzer.affine_range(r.indices[d], ranging) for r in reads])
                if union is None:
                    spans = None
                    break
                spans.append(min(at_hint(n_d, self.hint), at_hint(union[1], self.hint)))
            size = None
            if spans is not None and math.prod(spans) >= 2:
                size = math.prod(spans) * t.dtype.itemsize
            out.append((t, size))
        return out

def schedule_cuda(s: Schedule, cuda: CudaTarget, hint: Mapping[Var, int] | None = None
                  ) -> None:
    """Bind every root stage of ``s`` to GPU threads (the rules of this module); symbolic
    extents are decided at ``hint``'s sizes."""
    _GPUScheduler(s, cuda, hint).run()
