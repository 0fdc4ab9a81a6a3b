"""``cache_read`` and ``cache_write``: a tensor staged through a copy in another memory
scope (``shared``, ``local``: a GPU block's tile, a thread's registers).

    cache_read(A, "shared", [C]):  A.shared[i] = A[i]; C reads A.shared instead of A
    cache_write(C, "local"):       C.local[i] = <C's computation>; C[i] = C.local[i]

The new stage is inserted before its reader (before ``C`` for ``cache_write``) and
scheduled like any other (``compute_at`` a loop of the reader, usually).
"""
from __future__ import annotations

from collections.abc import Sequence

from ..error import ScheduleError
from ..ir.expr import IterVar, Range, Var
from ..ir.tensor import ComputeOp, Operation, Tensor
from ..ir.visit import substitute
from .schedule import Schedule, Stage, check_scope

__all__ = ["cache_read", "cache_write"]


def cache_read(sch: Schedule, tensor: Tensor, scope: str,
               readers: Sequence[Tensor | Operation]) -> Tensor:
    """See ``Schedule.cache_read``."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"cache_read: expected a Tensor, got {type(tensor).__name__}")
    check_scope(scope, f"cache_read of '{tensor.name}'")
    if isinstance(readers, (Tensor, Operation)):
        readers = [readers]
    if not isinstance(readers, (list, tuple)):
        raise TypeError(f"cache_read of '{tensor.name}': readers must be a list of the "
                        f"tensors that read it, got {type(readers).__name__} {readers!r}")
    reader_stages = [sch[r] for r in readers]
    for st in reader_stages:
        if tensor not in st.op.input_tensors:
            raise ScheduleError(f"cache_read: '{st.name}' does not read '{tensor.name}'")
    axis = [IterVar(Var(f"ax{d}", kind="axis"), Range(0, n))
            for d, n in enumerate(tensor.shape)]
    cache_op = ComputeOp(f"{tensor.name}.{scope}", axis, [tensor[tuple(axis)]],
                         tag="cache_read")
    stage = Stage(cache_op, sch)
    stage.scope = scope
    first = min((sch.stages.index(s) for s in reader_stages), default=None)
    sch.insert_stage(stage, None if first is None else sch.stages[first])
    sch.redirect_reads(reader_stages, tensor, cache_op.output(0))
    return cache_op.output(0)


def cache_write(sch: Schedule, tensor: Tensor, scope: str) -> Tensor:
    """See ``Schedule.cache_write``."""
    stage = sch[tensor]
    check_scope(scope, f"cache_write of '{stage.name}'")
    if stage.relations or stage.attach_type == "inline":
        raise ScheduleError(f"cache_write: stage '{stage.name}' is already split, fused or "
                            "inlined; call cache_write before other primitives")
    op = stage.op
    if op.num_outputs != 1:
        raise ScheduleError(f"cache_write: '{op.name}' has {op.num_outputs} outputs; only "
                            "single-output computations are supported")
    axis = [IterVar(Var(iv.name, kind="axis"), iv.dom) for iv in op.axis]
    mapping = {old.var: new.var for old, new in zip(op.axis, axis)}
    body = [substitute(e, mapping) for e in op.body]
    cache_op = ComputeOp(f"{op.name}.{scope}", axis, body, op.tag, op.attrs)
    cache_stage = Stage(cache_op, sch)
    cache_stage.scope = scope
    sch.insert_stage(cache_stage, stage)
    copy_op = ComputeOp(op.name, op.axis, [cache_op.output(0)[tuple(op.axis)]],
                        tag="cache_write")
    sch.replace_op(stage, copy_op)
    stage.all_iter_vars = list(op.axis)
    stage.leaf_iter_vars = list(op.axis)
    loops = dict(zip(op.axis, axis)) | {iv: iv for iv in op.reduce_axis}
    sch.move_attached(stage, cache_stage, loops)
    return cache_op.output(0)
