"""Row fusion: reductions along a tensor's trailing axes computed inside the loop over the
rows of the element-wise stage that consumes them.

A softmax is three passes over each row: its maximum, the sum of ``exp(x - max)``, and
``exp(x - max) / sum``. Scheduled one root stage at a time, each pass is a parallel loop of
its own over all rows: three fork/joins, the input read three times, and the exponential
(inlined into both of its readers) evaluated twice. ``fuse_rows`` moves such reductions
(and the stages attached to them: their vectorized partial sums) into the consumer's loop
over the rows, so that one parallel loop does every pass over a row while the row is in L1,
and stores an expensive element-wise producer that several of the fused stages read (the
exponential) in a row buffer, computed once, instead of inlining it into each.

A reduction ``R`` joins the group of a consumer ``C`` (element-wise, not a reduction) when:

* ``R``'s output has the shape of ``C``'s first ``m`` axes, and every stage reading it
  (through inlined stages too) is ``C``, another member, or a stage attached to a member,
  and reads ``R[a_0, ..., a_{m-1}]`` with its own first ``m`` axes (one row, the same row);
* ``C``'s leading loops are exactly its first ``m`` axes (each one loop, or fused into one
  loop, in order), and ``C`` has no parallel loop inside them (a consumer parallel over
  its columns, rows being few, would run the fused passes serially);
* the stages attached to ``R`` (its partial sums) are attached at loops over its spatial
  axes, which the attachment turns into single iterations.

Results do not change: every stage computes what it computed before, in the same order
within a row (the tests compare the programs bit for bit).
"""
from __future__ import annotations

from collections.abc import Callable

from ..arith.extent import at_hint
from ..ir.expr import Expr, IterVar, Reduce, TensorRead, Var
from ..ir.tensor import ComputeOp
from ..ir.visit import post_order
from ..target import CPUInfo
from .axes import PARALLEL, VECTORIZE, Fuse
from .schedule import Schedule, Stage

__all__ = ["fuse_rows", "MATERIALIZE_MIN_COST"]

# an inlined producer read by several fused stages is stored in a row buffer when one
# evaluation costs at least this (in multiply-adds: an exponential is 12)
MATERIALIZE_MIN_COST = 12


def fuse_rows(s: Schedule, info: CPUInfo, expand: Callable[[Expr], Expr],
              cost: Callable[[Expr], int], lanes: Callable[[Stage], int]) -> None:
    """Fuse the row reductions of ``s`` into their consumers (see the module docstring).
    ``expand``: a body with the inlined stages substituted; ``cost``: an expression's cost
    in multiply-adds; ``lanes``: a stage's vector lanes."""
    stages = list(s.stages)
    for c in reversed(stages):
        if c.attach_type != "root" or not isinstance(c.op, ComputeOp) or \
                c.op.reduce_axis or c.op.num_outputs != 1:
            continue
        row = _row_loop(c)
        if row is None:
            continue
        loop, m = row
        members = _members(s, stages, c, m, expand)
        if not members:
            continue
        group = {c, *members}
        # consumers first: ``compute_at`` asks that the parent read a stage (directly, or
        # through stages already computed at its loops)
        for r in reversed(members):
            children = [x for x in stages if x.attach_stage is r]
            r.compute_at(c, loop)
            for x in reversed(children):
                x.compute_at(c, loop)
        for e in _shared_producers(s, stages, c, m, group, expand, cost, info):
            e.compute_at(c, loop)
            last = e.op.axis[-1]
            n = lanes(e)
            if at_hint(last.dom.extent) >= n:
                _, inner = e.split(last, factor=n, tail="shift")
                e.vectorize(inner)


def _row_loop(c: Stage) -> tuple[IterVar, int] | None:
    """``C``'s innermost loop over its first ``m`` axes, when its leading loops are exactly
    those axes (each a loop, or fused, in order) and no loop inside them runs in parallel;
    None otherwise (or when ``m`` would leave no axis for the row)."""
    axes = list(c.op.axis)
    leaves = list(c.leaf_iter_vars)
    fused_of = {rel.fused: rel for rel in c.relations if isinstance(rel, Fuse)}

    def covered(iv: IterVar) -> list[IterVar] | None:
        """The original axes a leaf runs over, in order, when it is one or a fusion."""
        if iv in axes:
            return [iv]
        rel = fused_of.get(iv)
        if rel is None:
            return None
        a, b = covered(rel.outer), covered(rel.inner)
        return None if a is None or b is None else a + b

    m, k = 0, 0
    while k < len(leaves):
        got = covered(leaves[k])
        if got is None or got != axes[m:m + len(got)]:
            break
        m += len(got)
        k += 1
    if m == 0 or m >= len(axes):
        return None
    if any(c.annotations.get(iv) == PARALLEL for iv in leaves[k:]):
        return None
    return leaves[k - 1], m


def _reads_row(x: Stage, t: object, m: int, expand: Callable[[Expr], Expr]) -> bool:
    """Whether every read of tensor ``t`` in ``x``'s body (inlined stages substituted) is
    ``t[a_0, ..., a_{m-1}]`` with ``x``'s own first ``m`` axes."""
    if len(x.op.axis) < m:
        return False
    own = [iv.var for iv in x.op.axis[:m]]
    for e in x.op.body:
        for node in post_order(expand(e)):
            if isinstance(node, TensorRead) and node.tensor is t:
                if len(node.indices) != m or \
                        any(not (isinstance(i, Var) and i is v) for i, v in zip(node.indices, own)):
                    return False
    return True


def _members(s: Schedule, stages: list[Stage], c: Stage, m: int,
             expand: Callable[[Expr], Expr]) -> list[Stage]:
    """The reductions that join ``C``'s group, in dataflow order."""
    shape = [iv.dom.extent for iv in c.op.axis[:m]]
    group: set[Stage] = {c}
    found: list[Stage] = []
    for r in reversed(stages[:stages.index(c)]):
        op = r.op
        if r.attach_type != "root" or not isinstance(op, ComputeOp) or r.is_output or \
                op.num_outputs != 1 or not isinstance(op.body[0], Reduce) or \
                [iv.dom.extent for iv in op.axis] != shape:
            continue
        if any(r.annotations.get(iv) == VECTORIZE for iv in r.leaf_iter_vars):
            continue  # (a spatial axis in vector lanes: not a row reduction)
        readers = s.consumers(r)
        t = op.output(0)
        if not readers or any(
                not (x in group or x.attach_stage in group) or
                not _reads_row(x, t, m, expand) for x in readers):
            continue
        children = [x for x in stages if x.attach_stage is r]
        if any(x.attach_ivar is None or not _over(r, x.attach_ivar) for x in children):
            continue
        group.add(r)
        found.append(r)
    found.reverse()
    return found


def _over(r: Stage, iv: IterVar) -> bool:
    """Whether leaf ``iv`` of ``r`` and every leaf outside it run over spatial axes only."""
    for leaf in r.leaf_iter_vars:
        if leaf.kind == "reduce":
            return False
        if leaf is iv:
            return True
    return False


def _shared_producers(s: Schedule, stages: list[Stage], c: Stage, m: int,
                      group: set[Stage], expand: Callable[[Expr], Expr],
                      cost: Callable[[Expr], int], info: CPUInfo) -> list[Stage]:
    """The inlined element-wise stages of ``C``'s shape that two or more stages of the
    group read (directly or through inlined stages), costly enough to store once per row
    in a buffer that fits the L2 with room to spare."""
    out = []
    shape = [iv.dom.extent for iv in c.op.axis]
    row = 1
    for n in shape[m:]:
        row *= n
    for e in stages:
        op = e.op
        if e.attach_type != "inline" or not isinstance(op, ComputeOp) or \
                [iv.dom.extent for iv in op.axis] != shape:
            continue
        nbytes = max(1, op.output(0).dtype.bits // 8)
        if row * nbytes > info.l2_bytes // 4:
            continue
        readers = s.consumers(e)
        inside = [x for x in readers if x in group or x.attach_stage in group]
        if len(inside) < 2 or len(inside) != len(readers):
            continue
        if cost(expand(op.body[0])) < MATERIALIZE_MIN_COST:
            continue
        out.append(e)
    return out
