"""Phase splitting: strided sums computed per stride phase, before scheduling.

``polyphase`` splits a sum whose indices divide an output axis by a stride (a transposed
convolution or a strided upsampling written as a gather, ``X[(y + pad - ky) // s]`` where
``(y + pad - ky) % s == 0``) into one dense sum per residue class of its output axes, each
over just the taps its phase uses (``tex.arith.phases``; the same split ``differentiate``
gives strided gradients), and a merge that selects the phase of each point: 16 taps visited
per point of a stride-2 4x4 transposed convolution become the 4 that hit it, and no parity
test is left in the vector loop. Used when it saves a tenth of the iterations.

Otherwise ``split_phases`` splits the last axis only (the vector axis):

The zero elimination writes the data gradient of a stride-2 convolution with the output
column's parity in its indices::

    dD[n, c, y, x] = sum(H[n, o, .., w + (x + 1) // 2 - 1] * K[o, c, .., (x + 1) % 2 - 2*w + 3],
                         where=w * 2 < (x + 1) % 2 + 4 && ...)

Vectorized along ``x``, the kernel index changes from lane to lane (a gather) and so does
the guard. Computing the even and the odd columns separately (``x = 2*x2 + phase``) makes
every phase a dense convolution: the kernel read is the same for all lanes of ``x2``, ``H``
is read contiguously, and the guard no longer varies across the lanes. The phases are
computed into ``T.phases[.., phase, x2]`` and interleaved into ``T`` by a copy.
"""
from __future__ import annotations

import math

from ..arith import Analyzer, Interval
from ..arith.phases import Phase
from ..arith.phases import split_phases as phase_split
from ..ir import fold
from ..ir.expr import Binary, Const, Expr, IterVar, Op, Range, Reduce, Select, Var
from ..ir.tensor import ComputeOp, Tensor
from ..ir.visit import post_order, substitute
from .inline import Inliner
from .schedule import Schedule, Stage

__all__ = ["polyphase", "split_phases"]


def polyphase(s: Schedule, stage: Stage) -> list[Tensor] | None:
    """Split the sum of root ``stage`` by stride phase (see the module doc) when that saves
    a tenth of its iterations (the merge pass counted). Returns the phases' tensors (new
    stages, to be scheduled; ``stage`` becomes the merge), or None."""
    op = stage.op
    if op.num_outputs != 1 or stage.relations or not op.axis or \
            not isinstance(op, ComputeOp):
        return None
    body = Inliner(s).expand(op.body[0])
    if not isinstance(body, Reduce) or body.combiner.name != "sum" or body.init or \
            len(body.source) != 1:
        return None
    value, cond = body.source[0], body.condition
    zero = Const(0.0 if value.dtype.is_float else 0, value.dtype)
    # sum(select(c, v, 0)) is sum(v, where=c)
    while isinstance(value, Select) and isinstance(value.b, Const) and value.b.value == 0:
        cond = fold.binary(Op.AND, cond, value.cond)
        value = value.a
    split = phase_split(op.axis, body.axis, value, cond, taps=True)
    if split is None:
        return None
    size = math.prod(iv.dom.extent for iv in op.axis)
    single = size * math.prod(iv.dom.extent for iv in body.axis)
    if 10 * (split.iterations() + size) > 9 * single:
        return None

    def make(ph: Phase) -> Tensor:
        phase_op = ComputeOp(f"{op.name}.phase{split.suffix(ph)}", list(ph.grid),
                             [Reduce(body.combiner, [ph.value], list(ph.reduce), ph.cond)],
                             op.tag, op.attrs)
        s.insert_stage(Stage(phase_op, s), stage)
        return phase_op.output(0)

    term, tensors = split.merge(op.axis, zero, make)
    if not tensors:
        return None  # (only gathers: nothing for the scheduler to split)
    s.replace_op(stage, ComputeOp(op.name, op.axis, [term], tag="phase_merge"))
    stage.all_iter_vars = list(op.axis)
    stage.leaf_iter_vars = list(op.axis)
    return tensors


def split_phases(s: Schedule, stage: Stage, lanes: int) -> Tensor | None:
    """Compute the reduction of ``stage`` per phase of its last axis (see the module doc)
    when that axis appears as ``(x + a) % m`` or ``(x + a) // m`` with a constant ``m``
    dividing its extent and shorter than a vector of ``lanes``: a vector then spans several
    phases. (A longer ``m`` is a layout, as a head merge's ``x // 64``, ``x % 64``: vectors
    within one run of ``m`` are contiguous already, and the phases would put the vector on
    the axis of the runs.) Returns the phases' tensor (a new stage, to be scheduled; the
    stage of ``stage`` becomes the interleaving copy), or None."""
    op = stage.op
    if op.num_outputs != 1 or stage.relations or not op.axis or \
            not isinstance(op, ComputeOp):
        return None
    body = Inliner(s).expand(op.body[0])
    if not isinstance(body, Reduce):
        return None
    x = op.axis[-1]
    dom = {iv.var: Interval(iv.dom.min, iv.dom.stop - 1) for iv in (*op.axis, *body.axis)}
    m = _modulus(body, x.var, Analyzer(dom))
    if m is None or m >= lanes or x.dom.min != 0 or x.dom.extent % m or \
            x.dom.extent // m < 2:
        return None
    axes = [IterVar(Var(iv.var.name, iv.var.dtype, iv.var.kind), iv.dom) for iv in op.axis[:-1]]
    phase = IterVar(Var(f"{x.var.name}.phase", x.var.dtype, "axis"), Range(0, m))
    x2 = IterVar(Var(f"{x.var.name}.{m}", x.var.dtype, "axis"), Range(0, x.dom.extent // m))
    mapping: dict[Expr, Expr] = {old.var: new.var for old, new in zip(op.axis[:-1], axes)}
    mapping[x.var] = fold.binary(Op.ADD, fold.binary(Op.MUL, x2.var, fold.const(m, x.var.dtype)),
                                 phase.var)
    new_dom = {iv.var: Interval(iv.dom.min, iv.dom.stop - 1)
               for iv in (*axes, phase, x2, *body.axis)}
    new_body = Analyzer(new_dom).rewrite(substitute(body, mapping))
    phases = ComputeOp(f"{op.name}.phases", [*axes, phase, x2], [new_body], op.tag, op.attrs)
    idx = [iv.var for iv in op.axis[:-1]]
    merge = phases.output(0)[(*idx, fold.binary(Op.FLOORMOD, x.var, fold.const(m, x.var.dtype)),
                              fold.binary(Op.FLOORDIV, x.var, fold.const(m, x.var.dtype)))]
    s.insert_stage(Stage(phases, s), stage)
    s.replace_op(stage, ComputeOp(op.name, op.axis, [merge], tag="phase_merge"))
    stage.all_iter_vars = list(op.axis)  # the reduction moved to the phases
    stage.leaf_iter_vars = list(op.axis)
    return phases.output(0)


def _modulus(body: Expr, x: Var, an: Analyzer) -> int | None:
    """The constant ``m`` of a ``(x + ..) % m`` or ``(x + ..) // m`` in ``body`` where ``x``
    has coefficient 1 (the largest, if several)."""
    found: int | None = None
    for node in post_order(body):
        if not (isinstance(node, Binary) and node.op in (Op.FLOORMOD, Op.FLOORDIV)
                and isinstance(node.b, Const) and node.a.dtype.is_int):
            continue
        m = int(node.b.value)
        if m < 2:
            continue
        lf = an.linear(an.rewrite(node.a))  # an integer operand: always a linear form
        if lf.terms.get(x) == 1:
            found = m if found is None else max(found, m)
    return found
