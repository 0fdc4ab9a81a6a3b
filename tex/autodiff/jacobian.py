"""Forward mode inside a reduction's combiner, and the literal Jacobian.

A reduction whose combiner is not a sum or a selection (``prod``, a user's
``comm_reducer``) is differentiated by extending its combiner with one derivative slot per
value slot (``extend_combiner``): the reduction then carries (values..., tangents...) and
its tangent slot is the derivative. With the tangent of each read of ``inp`` taken as the
Kronecker delta ``[indices == p]`` this gives the Jacobian ``J[o, p]``
(``generic_jacobian``), which the building block contracts with the head: correct for
every reducer, at ``|out| * |inp| * |k|``. ``literal_jacobian`` builds any Jacobian this
way, without removing zeros (the form TVM starts from).
"""
from __future__ import annotations

from collections.abc import Sequence

from .. import te
from ..dtype import boolean
from ..ir import fold
from ..ir.expr import CommReducer, Const, Expr, Op, Reduce, Var
from ..ir.tensor import ComputeOp, Tensor
from ..ir.verify import check_compute_body
from ..ir.visit import substitute
from .builders import grad_name, make_compute, new_axes, reads_of
from .derivative import tangent

__all__ = ["extend_combiner", "generic_jacobian", "literal_jacobian", "reduce_tangent"]


def extend_combiner(c: CommReducer) -> CommReducer:
    """The combiner carrying (values..., derivatives...): ``d result_i = sum_j
    d result_i/d lhs_j * dlhs_j + d result_i/d rhs_j * drhs_j``; derivative identity 0."""
    n = len(c)
    dl = [Var(f"d{v.name}", v.dtype) for v in c.lhs]
    dr = [Var(f"d{v.name}", v.dtype) for v in c.rhs]
    tans = {**dict(zip(c.lhs, dl)), **dict(zip(c.rhs, dr))}
    leaf = set(tans)
    dres = []
    for r in c.result:
        t = tangent(r, tans, lambda e: e in leaf) if r.dtype.is_float else None
        dres.append(t if t is not None else Const(0, r.dtype))
    ident = [Const(0, d) for d in c.dtypes]
    return CommReducer(f"{c.name}_jvp", [*c.lhs, *dl], [*c.rhs, *dr],
                       [*c.result, *dres], [*c.identity, *ident][: 2 * n])


def reduce_tangent(red: Reduce, source_tangents: Sequence[Expr | None],
                   init_tangents: Sequence[Expr | None]) -> list[Expr]:
    """The slots (values..., tangents...) of ``red`` computed with the extended combiner."""
    ext = extend_combiner(red.combiner)
    zero = [Const(0, s.dtype) for s in red.source]
    src = [*red.source, *(t if t is not None else z for t, z in zip(source_tangents, zero))]
    init: list[Expr] = []
    if red.init:
        init = [*red.init, *(t if t is not None else z for t, z in zip(init_tangents, zero))]
    n = len(red.source)
    return [Reduce(ext, src, red.axis, red.condition, init, n + i) for i in range(n)]


def delta_at(p: Sequence[Expr]):
    """The tangent of a read in the literal Jacobian: ``[indices == p]``."""
    def delta(read: Expr) -> Expr:
        hit: Expr = Const(True, boolean)
        for ix, q in zip(read.indices, p):  # type: ignore[attr-defined]
            hit = fold.binary(Op.AND, hit, fold.compare(Op.EQ, ix, q))
        return fold.select(hit, Const(1.0, read.dtype), Const(0.0, read.dtype))
    return delta


def generic_jacobian(out: Tensor, inp: Tensor, red: Reduce) -> Tensor:
    """``J[o, p]`` of a reduction with any combiner, by forward mode in the combiner."""
    op: ComputeOp = out.op  # type: ignore[assignment]
    o_axes = list(op.axis)
    names = [iv.var.name for iv in o_axes] + [f"p{d}" for d in range(inp.ndim)]
    leaf = reads_of(inp)
    vi = out.value_index

    def body(v: tuple[Expr, ...]) -> Expr:
        o, p = v[:len(o_axes)], v[len(o_axes):]
        delta = delta_at(p)

        src_t = [tangent(s, delta, leaf) for s in red.source]
        init_t = [tangent(s, delta, leaf) for s in red.init]
        slots = reduce_tangent(red, src_t, init_t)
        m = {iv.var: x for iv, x in zip(o_axes, o)}
        return substitute(slots[vi], m)

    return multi_slot_compute(grad_name(f"{out.name}_jacobian_{inp.name}"),
                               out.shape + inp.shape, body, names, len(red.source))


def multi_slot_compute(name: str, shape: Sequence[int], body_fn, names: Sequence[str],
                        n: int) -> Tensor:
    """A compute of the extended reduction: all 2n slots are outputs (a tuple reduction
    must list all of them); returns the requested tangent slot."""
    axis = new_axes(names, shape)
    slot: Reduce = body_fn(tuple(iv.var for iv in axis))
    full = [Reduce(slot.combiner, slot.source, slot.axis, slot.condition, slot.init, i)
            for i in range(2 * n)]
    check_compute_body(name, axis, full)
    op = ComputeOp(name, axis, full, tag="jacobian")
    return op.output(slot.value_index)


def literal_jacobian(out: Tensor, inp: Tensor) -> Tensor:
    """``J[o, p] = d out[o] / d inp[p]`` with every read of ``inp`` a Kronecker delta
    ``[g(o, k) == p]`` and nothing removed (checked arguments: ``Jacobian``)."""
    op: ComputeOp = out.op  # type: ignore[assignment]
    body = op.body[out.value_index]
    if isinstance(body, Reduce) and not body.combiner.is_single(Op.ADD):
        return generic_jacobian(out, inp, body)
    o_axes = list(op.axis)
    names = [iv.var.name for iv in o_axes] + [f"p{d}" for d in range(inp.ndim)]

    def fbody(v: tuple[Expr, ...]) -> Expr:
        o, p = v[:len(o_axes)], v[len(o_axes):]
        delta = delta_at(p)

        m = {iv.var: x for iv, x in zip(o_axes, o)}
        leaf = reads_of(inp)
        if isinstance(body, Reduce):
            t = tangent(body.source[0], delta, leaf)
            value = te.sum(t if t is not None else Const(0.0, out.dtype), axis=list(body.axis),
                           where=body.condition)
            if body.init:
                ti = tangent(body.init[0], delta, leaf)
                if ti is not None:
                    value = Reduce(value.combiner, value.source, value.axis, value.condition,
                                   [ti])
            return substitute(value, m)
        t = tangent(body, delta, leaf)
        return substitute(t if t is not None else Const(0.0, out.dtype), m)

    return make_compute(grad_name(f"{out.name}_jacobian_{inp.name}"), out.shape + inp.shape,
                        fbody, names, tag="jacobian")
