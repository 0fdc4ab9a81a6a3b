"""Forward mode: the tangent of a tensor along given input tangents (``jvp``)."""
from __future__ import annotations

from collections.abc import Sequence

from ..ir import fold
from ..ir.expr import Const, Expr, IterVar, Op, Reduce, TensorRead
from ..ir.tensor import ComputeOp, ExternOp, ScanOp, Tensor
from ..ir.verify import check_compute_body
from ..ir.visit import substitute, topo_sort_ops
from .builders import new_axes, zero_tensor
from .derivative import DifferentiationError, tangent
from .jacobian import reduce_tangent
from .scan import scan_tangents
from .tidy import tidy

__all__ = ["jvp"]


def jvp(out: Tensor, inputs: Sequence[Tensor] | Tensor, tangents: Sequence[Tensor] | Tensor
        ) -> Tensor:
    """The directional derivative ``sum_p d out[o] / d inputs[p] * tangents[p]``.

    Parameters
    ----------
    out : Tensor
        A float tensor.
    inputs : list of Tensor
        Tensors ``out`` depends on (usually placeholders).
    tangents : list of Tensor
        One per input, with the input's shape (usually placeholders fed with directions).

    Returns
    -------
    Tensor
        Shape ``out.shape``; zeros when ``out`` does not depend on the inputs.

    Raises
    ------
    TypeError, ValueError
        Not tensors; a tangent whose shape differs from its input's; lengths differ.
    """
    if isinstance(inputs, Tensor):
        inputs = [inputs]
    if isinstance(tangents, Tensor):
        tangents = [tangents]
    for what, seq in (("inputs", inputs), ("tangents", tangents)):
        if not isinstance(seq, (list, tuple)):
            raise TypeError(f"jvp: {what} must be a Tensor or a list of Tensors, got "
                            f"{type(seq).__name__} {seq!r}")
    for what, t in [("out", out), *((f"inputs[{i}]", x) for i, x in enumerate(inputs)),
                    *((f"tangents[{i}]", x) for i, x in enumerate(tangents))]:
        if not isinstance(t, Tensor):
            raise TypeError(f"jvp: {what} must be a Tensor, got {type(t).__name__} {t!r}")
    if len(inputs) != len(tangents):
        raise ValueError(f"jvp: {len(inputs)} inputs but {len(tangents)} tangents")
    if not out.dtype.is_float:
        raise TypeError(f"jvp: '{out.name}' has dtype {out.dtype}; only float tensors are "
                        "differentiable")
    tan: dict[Tensor, Tensor] = {}
    for x, t in zip(inputs, tangents):
        if t.shape != x.shape:
            raise ValueError(f"jvp: tangent '{t.name}' has shape {t.shape}, input "
                             f"'{x.name}' has shape {x.shape}")
        if x.dtype.is_float and not t.dtype.is_float:
            raise TypeError(f"jvp: tangent '{t.name}' has dtype {t.dtype}; the tangent of the "
                            f"float input '{x.name}' must be a float tensor")
        if x.dtype.is_float:
            tan[x] = t
    for op in topo_sort_ops([out]):
        if not isinstance(op, ComputeOp) or any(o in tan for o in op.outputs):
            if isinstance(op, ExternOp) and any(d in tan for d in op.input_tensors):
                raise DifferentiationError(
                    f"jvp: '{op.name}' is an extern call (te.extern) on the path from the "
                    "inputs; forward mode cannot see inside it (reverse mode takes its "
                    f"derivative: tex.differentiate(..., override={{{op.name}: ...}}))")
            if isinstance(op, ScanOp) and any(d in tan for d in op.input_tensors) and \
                    not any(o in tan for o in op.outputs):
                tan.update((o, t) for o, t in zip(op.outputs, scan_tangents(op, tan, jvp))
                           if o.dtype.is_float)
            continue
        if not any(d in tan for d in op.input_tensors):
            continue
        for t in op.outputs:
            if t.dtype.is_float:
                r = _tangent_tensor(t, tan)
                if r is not None:
                    tan[t] = r
    if out in tan:
        created = {t for x, t in tan.items() if x not in inputs}
        result = tan[out]
        return tidy([result], keep=[result], created=created).get(result, result)
    return zero_tensor(out.shape, out.dtype, f"{out.name}_jvp")


def _tangent_tensor(t: Tensor, tan: dict[Tensor, Tensor]) -> Tensor | None:
    op: ComputeOp = t.op  # type: ignore[assignment]
    body = op.body[t.value_index]

    def is_leaf(e: Expr) -> bool:
        return isinstance(e, TensorRead) and e.tensor in tan

    def leaf(e: Expr) -> Expr:
        return fold.cast(e.dtype, TensorRead(tan[e.tensor], e.indices))  # type: ignore

    axis = new_axes([iv.var.name for iv in op.axis], [iv.dom.extent for iv in op.axis])
    m = {old.var: new.var for old, new in zip(op.axis, axis)}
    name = f"{t.name}_jvp"
    if not isinstance(body, Reduce):
        d = tangent(body, leaf, is_leaf)
        if d is None:
            return None
        return _compute(name, axis, [substitute(d, m)], 0)
    src = [tangent(s, leaf, is_leaf) for s in body.source]
    init = [tangent(s, leaf, is_leaf) for s in body.init]
    if all(x is None for x in src + init):
        return None
    if body.combiner.is_single(Op.ADD):
        zero = Const(0, body.dtype)
        new = Reduce(body.combiner, [src[0] if src[0] is not None else zero], body.axis,
                     body.condition, [init[0] if init[0] is not None else zero]
                     if body.init else [])
        return _compute(name, axis, [substitute(new, m)], 0)
    slots = [substitute(s, m) for s in reduce_tangent(body, src, init)]
    n = len(body.source)
    full = [Reduce(slots[0].combiner, slots[0].source, slots[0].axis, slots[0].condition,
                   slots[0].init, i) for i in range(2 * n)]
    return _compute(name, axis, full, n + t.value_index)


def _compute(name: str, axis: list[IterVar], body: list[Expr], index: int) -> Tensor:
    check_compute_body(name, axis, body)
    return ComputeOp(name, axis, body, tag="jvp").output(index)
