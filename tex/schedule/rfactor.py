"""``rfactor``: turn one reduction loop into a data-parallel axis of partial results.

    C[i] = sum(A[i, k], k in [0, 64)),  k split into k.outer (8) and k.inner (8)
    rfactor(C, k.inner) ->
    C.rf[ki, i] = sum(A[i, k.outer*8 + ki], k.outer in [0, 8))
    C[i]        = sum(C.rf[r, i], r in [0, 8))

The partial results can then be computed in parallel (or vectorized) over ``ki``, and the
short final reduction runs afterwards: the standard way to parallelize a long reduction
with a small output.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..arith.extent import extent_product, same_extent
from ..error import ScheduleError
from ..ir import fold
from ..ir.expr import IterVar, Range, Reduce, Var
from ..ir.tensor import ComputeOp, Tensor
from ..ir.visit import substitute
from .axes import Fuse, Split
from .schedule import Stage

if TYPE_CHECKING:
    from .schedule import Schedule

__all__ = ["rfactor"]


def rfactor(sch: Schedule, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
    """See ``Schedule.rfactor``."""
    stage = sch[tensor]
    op = stage.op
    name = op.name
    body = op.body
    if not isinstance(body[0], Reduce):
        raise ScheduleError(f"rfactor: '{name}' is not a reduction")
    if len(body) != 1:
        raise ScheduleError(f"rfactor: '{name}' has {len(body)} outputs; only single-output "
                            "reductions can be factored")
    if stage.attach_type == "inline":
        raise ScheduleError(f"rfactor: '{name}' is inlined")
    axis = stage.check_leaf(axis, "rfactor")
    if axis.kind != "reduce":
        raise ScheduleError(f"rfactor on '{name}': '{axis.name}' is not a reduction axis")
    if isinstance(factor_axis, bool) or not isinstance(factor_axis, int) or \
            not 0 <= factor_axis <= len(op.axis):
        raise ScheduleError(f"rfactor on '{name}': factor_axis must be an int in "
                            f"[0, {len(op.axis)}], got {factor_axis!r}")
    red = body[0]

    # the reduce leaves, and each root reduce axis as an expression of them
    reduce_leaves = [iv for iv in stage.leaf_iter_vars if iv.kind == "reduce"]
    # as TVM: the root reduction axes no split or fuse touched stay themselves, first; the
    # other leaves become axes of their own over the same variables
    untouched = [iv for iv in red.axis if iv is not axis and
                 any(iv is leaf for leaf in reduce_leaves)]
    rest = untouched + [iv for iv in reduce_leaves if iv is not axis and
                        not any(iv is u for u in untouched)]
    factor_iv = IterVar(Var(f"{axis.name}.v", kind="axis"), Range(0, axis.dom.extent))
    new_reduce = {iv: iv if any(iv is u for u in untouched) else
                  IterVar(iv.var, Range(0, iv.dom.extent)) for iv in rest}
    value: dict[IterVar, object] = {axis: factor_iv.var}
    value.update({iv: new.var for iv, new in new_reduce.items()})
    guards = []
    for rel in reversed(stage.relations):
        if isinstance(rel, Split) and rel.parent.kind == "reduce":
            v = value[rel.outer] * rel.factor + value[rel.inner]  # type: ignore[operator]
            value[rel.parent] = v
            if not same_extent(extent_product([rel.outer.dom.extent, rel.factor]),
                               rel.parent.dom.extent):
                guards.append(v < rel.parent.dom.extent)
        elif isinstance(rel, Fuse) and rel.fused.kind == "reduce":
            n = rel.inner.dom.extent
            value[rel.outer] = value[rel.fused] // n  # type: ignore[operator]
            value[rel.inner] = value[rel.fused] % n  # type: ignore[operator]
    mapping = {iv.var: (value[iv] + iv.dom.min if iv.dom.min else value[iv])
               for iv in red.axis}

    # the partial results: spatial axes with the factored axis inserted
    spatial = [IterVar(Var(iv.name, kind="axis"), iv.dom) for iv in op.axis]
    mapping.update({old.var: new.var for old, new in zip(op.axis, spatial)})
    rf_axes = list(spatial)
    rf_axes.insert(factor_axis, factor_iv)
    # the split guards first: the condition may read tensors at the reduction index, and a
    # read is in bounds only under the guards to its left
    cond = fold.conjoin([*guards, substitute(red.condition, mapping)])
    sources = [substitute(s, mapping) for s in red.source]
    rf_body = Reduce(red.combiner, sources, [new_reduce[iv] for iv in rest] or
                     [IterVar(Var("rf.unit", kind="reduce"), Range(0, 1))], cond)
    rf_op = ComputeOp(f"{name}.rf", rf_axes, [rf_body], tag="rfactor")

    # the final reduction over the factored axis
    r = IterVar(Var(f"{axis.name}.r", kind="reduce"), Range(0, axis.dom.extent))
    idx = [iv.var for iv in op.axis]
    idx.insert(factor_axis, r.var)
    final = Reduce(red.combiner, [rf_op.output(0)[tuple(idx)]], [r], fold.const(True),
                   red.init)
    new_op = ComputeOp(name, op.axis, [final], op.tag, op.attrs)

    rf_stage = Stage(rf_op, sch)
    sch.insert_stage(rf_stage, stage)
    sch.replace_op(stage, new_op)
    # the stages computed at a reduction loop (or an unsplit spatial axis) of the
    # reduction follow the partial results, which now read them
    loops: dict[IterVar, IterVar] = {axis: factor_iv, **new_reduce}
    loops.update((iv, new) for iv, new in zip(op.axis, spatial) if iv in stage.leaf_iter_vars)
    sch.move_attached(stage, rf_stage, loops)
    keep = [iv for iv in stage.leaf_iter_vars if iv.kind != "reduce"]
    stage.leaf_iter_vars = [*keep, r]
    # the old reduction axes are the partial results' now (TVM's all_iter_vars: no stale
    # entries)
    stage.all_iter_vars = [iv for iv in stage.all_iter_vars if iv.kind != "reduce"] + [r]
    stage.relations = [rel for rel in stage.relations
                       if not (isinstance(rel, Split) and rel.parent.kind == "reduce")
                       and not (isinstance(rel, Fuse) and rel.fused.kind == "reduce")]
    return rf_op.output(0)
