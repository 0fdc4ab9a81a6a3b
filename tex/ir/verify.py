"""Well-formedness of compute bodies.

A body is well formed when:
- a reduction is the whole body (or, for a tuple reducer, every element of the body is a
  slot of the same reduction) and never appears inside arithmetic or another reduction;
- every data-parallel axis variable it reads belongs to this compute;
- every reduction-axis variable it reads is bound by the enclosing reduction, and no
  reduction lists the same axis twice.

``check_compute_body`` raises ``ValueError`` naming the compute and the culprit; the
builders in ``tex.te`` call it, and passes may call it again as an internal check.
"""
from __future__ import annotations

from collections.abc import Sequence

from .expr import Expr, IterVar, Reduce, Var
from .visit import post_order

__all__ = ["check_compute_body"]


def check_compute_body(name: str, axis: Sequence[IterVar], body: Sequence[Expr]) -> None:
    """Raise ValueError if ``body`` (one expression per output) is not a valid compute body."""
    own_axes = {iv.var for iv in axis}
    reduces = [b for b in body if isinstance(b, Reduce)]
    if reduces and len(reduces) != len(body):
        raise ValueError(f"compute '{name}': a multi-output body must be all reductions "
                         "(slots of one tuple reducer) or contain no reduction")
    if reduces:
        first = reduces[0]
        for r in reduces[1:]:
            if (r.combiner is not first.combiner or not _same(r.axis, first.axis)
                    or r.condition is not first.condition
                    or not _same(r.source, first.source) or not _same(r.init, first.init)):
                raise ValueError(f"compute '{name}': the outputs' reductions differ; a "
                                 "multi-output reduction must use one tuple reducer call")
        _check_reduce(name, first, own_axes)
        roots: list[Expr] = []
    else:
        roots = list(body)
    nodes = list(post_order(*roots))
    for node in nodes:  # nesting is reported before the axes it leaves unbound
        if isinstance(node, Reduce):
            raise ValueError(
                f"compute '{name}': a reduction ({node.combiner.name} over "
                f"{', '.join(iv.name for iv in node.axis)}) is nested inside an "
                "expression; a reduction must be the whole body of a compute. Compute it "
                "as its own tensor, then use that tensor")
    for node in nodes:
        if isinstance(node, Var):
            _check_var(name, node, own_axes, bound=set())


def _same(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _check_reduce(name: str, r: Reduce, own_axes: set[Var]) -> None:
    bound: set[Var] = set()
    for iv in r.axis:
        if iv.var.kind != "reduce":
            raise ValueError(f"compute '{name}': '{iv.name}' is not a reduce axis; create "
                             "reduction axes with tex.reduce_axis((lo, hi))")
        if iv.var in bound:
            raise ValueError(f"compute '{name}': reduce axis '{iv.name}' is listed twice "
                             "in one reduction")
        bound.add(iv.var)
    nodes = list(post_order(*r.source, r.condition))
    for node in nodes:
        if isinstance(node, Reduce):
            names = ", ".join(iv.name for iv in node.axis)
            raise ValueError(f"compute '{name}': reduction over {names} is nested inside "
                             "another reduction; reduce axis used in two nested reductions. "
                             "Compute the inner reduction as its own tensor")
    for node in nodes:
        if isinstance(node, Var):
            _check_var(name, node, own_axes, bound)
    for node in post_order(*r.init):
        if isinstance(node, Reduce):
            raise ValueError(f"compute '{name}': init of a reduction contains a reduction")
        if isinstance(node, Var):
            if node.kind == "reduce":
                raise ValueError(f"compute '{name}': init of a reduction uses the reduce axis "
                                 f"'{node.name}'; init may depend on the output axes only")
            _check_var(name, node, own_axes, set())


def _check_var(name: str, v: Var, own_axes: set[Var], bound: set[Var]) -> None:
    if v.kind == "axis" and v not in own_axes:
        raise ValueError(f"compute '{name}': variable '{v.name}' is an axis of another "
                         "compute; use the index arguments of this compute's fcompute")
    if v.kind == "reduce" and v not in bound:
        raise ValueError(f"compute '{name}': reduce axis '{v.name}' is used outside a "
                         "reduction over it; wrap the expression in tex.sum(..., axis="
                         f"{v.name}) (or another reducer)")
