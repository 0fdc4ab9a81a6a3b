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

The forward of a strided convolution has the opposite problem: its output column ``w`` is
dense but reads ``X[.., 2*w + rx]``, every other element, which a vector gathers with a
shuffle per lane or two. ``deinterleave`` gives it a copy of ``X`` split by phase
(``X.deint[.., p, j] = X[.., 2*j + p]``) and sums over ``rx = 2*r2 + p`` instead: every
read is contiguous along ``w`` (a stride-2 5 x 5 convolution: 3.1 -> 2.0 ms; a stride-2
3 x 3 one at 56 x 56: 13.6 -> 10.8 ms).
"""
from __future__ import annotations

import math

from ..arith import Analyzer, range_interval
from ..arith.extent import at_hint
from ..arith.phases import Phase
from ..arith.phases import split_phases as phase_split
from ..ir import fold
from ..ir.expr import Binary, Const, Expr, IterVar, Op, Range, Reduce, Select, TensorRead, Var
from ..ir.tensor import ComputeOp, Tensor
from ..ir.visit import collect_vars, post_order, rewrite, substitute
from .inline import Inliner
from .schedule import Schedule, Stage

__all__ = ["polyphase", "split_phases", "deinterleave", "DEINTERLEAVE_MIN_REUSE"]

# the reads per element of the input for which ``deinterleave`` copies it by phase
DEINTERLEAVE_MIN_REUSE = 8


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
    size = math.prod(at_hint(iv.dom.extent) for iv in op.axis)
    single = size * math.prod(at_hint(iv.dom.extent) for iv in body.axis)
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
    dom = {iv.var: range_interval(iv.dom) for iv in (*op.axis, *body.axis)}
    m = _modulus(body, x.var, Analyzer(dom))
    if m is None or m >= lanes or x.dom.min != 0 or not isinstance(x.dom.extent, int) or \
            x.dom.extent % m or x.dom.extent // m < 2:
        return None
    axes = [IterVar(Var(iv.var.name, iv.var.dtype, iv.var.kind), iv.dom) for iv in op.axis[:-1]]
    phase = IterVar(Var(f"{x.var.name}.phase", x.var.dtype, "axis"), Range(0, m))
    x2 = IterVar(Var(f"{x.var.name}.{m}", x.var.dtype, "axis"), Range(0, x.dom.extent // m))
    mapping: dict[Expr, Expr] = {old.var: new.var for old, new in zip(op.axis[:-1], axes)}
    mapping[x.var] = fold.binary(Op.ADD, fold.binary(Op.MUL, x2.var, fold.const(m, x.var.dtype)),
                                 phase.var)
    new_dom = {iv.var: range_interval(iv.dom)
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


def deinterleave(s: Schedule, stage: Stage, lanes: int) -> list[Stage]:
    """Read the input of a strided sum along its vector axis de-interleaved by phase: a
    stride-``k`` convolution reads ``X[.., k*w + rx]`` along its last output axis ``w``, a
    vector of which gathers every ``k``-th element (shuffles per lane on AVX2). With
    ``rx = k*r2 + p`` the read is ``X.deint[.., p, w + r2]`` of a copy ``X.deint[.., p, j]
    = X[.., k*j + p]``, contiguous along ``w``; the taps ``k*r2 + p`` past the window are
    left out by the sum's condition. Applies when every read using ``w`` has it in its last
    index only, as ``k*w + rx + c`` with one stride ``k >= 2``, one reduction variable
    ``rx`` (from 0, coefficient 1, at least ``k`` taps) and a constant ``c``, all of one
    tensor, read at least ``DEINTERLEAVE_MIN_REUSE`` times per element. Returns the
    copy's stage (inserted before ``stage``, to be scheduled), or an empty list."""
    op = stage.op
    if op.num_outputs != 1 or stage.relations or not op.axis or \
            not isinstance(op, ComputeOp) or not isinstance(op.axis[-1].dom.extent, int) or \
            op.axis[-1].dom.extent < lanes:
        return []
    body = Inliner(s).expand(op.body[0])
    if not isinstance(body, Reduce) or len(body.source) != 1:
        return []
    w = op.axis[-1].var
    reduce = {iv.var: iv for iv in body.axis}
    an = Analyzer({iv.var: range_interval(iv.dom)
                   for iv in (*op.axis, *body.axis)})
    found: dict[TensorRead, int] = {}  # a strided read -> its constant offset
    form: tuple[Tensor, int, Var] | None = None
    for node in post_order(body):
        if not isinstance(node, TensorRead) or not node.indices:
            continue
        uses = [d for d, e in enumerate(node.indices) if w in collect_vars(e)]
        if not uses:
            continue
        if uses != [len(node.indices) - 1]:
            return []
        lin = an.try_linear(node.indices[-1])
        if lin is None:
            return []
        k = lin.terms.get(w)
        if k == 1:
            continue  # contiguous already
        others = [(v, c) for v, c in lin.terms.items() if v is not w and c]
        if k is None or k < 2 or len(others) != 1 or others[0][1] != 1 or \
                others[0][0] not in reduce or reduce[others[0][0]].dom.min != 0:
            return []
        key = (node.tensor, k, others[0][0])
        if form is not None and form != key:
            return []
        form = key
        found[node] = int(lin.const)
    if form is None:
        return []
    x, k, rv = form
    if not isinstance(reduce[rv].dom.extent, int) or not isinstance(x.shape[-1], int) or \
            reduce[rv].dom.extent < k:
        return []  # (a 1 x 1 window: some phases would be copied for no tap; measured even)
    # the copy is a pass over X of its own: it pays where the sum reads each element many
    # times (a convolution: once per output channel and tap), not for a pooling window's
    # single read
    visits = math.prod(at_hint(iv.dom.extent) for iv in (*op.axis, *body.axis))
    if visits < DEINTERLEAVE_MIN_REUSE * math.prod(at_hint(n) for n in x.shape):
        return []
    rx = reduce[rv]
    taps = rx.dom.extent
    length = int(x.shape[-1])
    dtype = w.dtype
    # the copy: X.deint[.., p, j] = X[.., min(k*j + p, length - 1)] (entries past the end
    # are never read: a valid point reads k*(w + r2) + p + c < length)
    lead = [IterVar(Var(f"ax{d}", dtype, "axis"), Range(0, n))
            for d, n in enumerate(x.shape[:-1])]
    pax = IterVar(Var("p", dtype, "axis"), Range(0, k))
    jax = IterVar(Var("j", dtype, "axis"), Range(0, -(-length // k)))
    kc = fold.const(k, dtype)
    flat = fold.binary(Op.ADD, fold.binary(Op.MUL, jax.var, kc), pax.var)
    flat = fold.binary(Op.MIN, flat, fold.const(length - 1, dtype))
    copy = ComputeOp(f"{x.op.name}.deint", [*lead, pax, jax],
                     [x[(*[iv.var for iv in lead], flat)]], tag="deinterleave")
    s.insert_stage(Stage(copy, s), stage)
    # the sum over rx = k*r2 + p
    r2 = IterVar(Var(f"{rv.name}.{k}", rv.dtype, "reduce"), Range(0, -(-taps // k)))
    p = IterVar(Var(f"{rv.name}.phase", rv.dtype, "reduce"), Range(0, k))
    tap = fold.binary(Op.ADD, fold.binary(Op.MUL, r2.var, kc), p.var)

    def read(node: Expr) -> Expr | None:
        c = found.get(node)  # type: ignore[call-overload]
        if c is None:
            return None
        shifted = fold.binary(Op.ADD, p.var, fold.const(c, dtype))
        j = fold.binary(Op.ADD, fold.binary(Op.ADD, w, r2.var),
                        fold.binary(Op.FLOORDIV, shifted, kc))
        idx = node.indices  # type: ignore[attr-defined]
        return copy.output(0)[(*idx[:-1], fold.binary(Op.FLOORMOD, shifted, kc), j)]

    value = substitute(rewrite(body.source[0], read), {rv: tap})
    cond = substitute(body.condition, {rv: tap})
    if taps % k:
        cond = fold.binary(Op.AND, cond, fold.compare(Op.LT, tap, fold.const(taps, dtype)))
    axes = [a for iv in body.axis for a in ((r2, p) if iv is rx else (iv,))]
    new = Reduce(body.combiner, [value], axes, cond, body.init)
    s.replace_op(stage, ComputeOp(op.name, op.axis, [new], op.tag, op.attrs))
    return [s[copy.output(0)]]
