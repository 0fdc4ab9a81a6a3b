"""Relayout: a reduction computed with a chosen output axis innermost, over transposed copies
of the inputs that read it along a strided dimension.

A convolution's weight gradient on a small image, ``dW[p, q, r, s] = sum(H[n, p, h, w] *
X[n, q, h + r, w + s])``, has no axis to vectorize in place: its last axes ``r, s`` are the
kernel's (3), its contiguous reduction axis ``w`` is the image's width (7), and its long
axes ``p, q`` are 49 floats apart in the inputs. ``transpose_vector_axis`` computes it as

    X.T[n, h, w, q] = X[n, q, h, w]                  (one pass over X)
    dW.T[p, r, s, q] = sum(H[n, p, h, w] * X.T[n, h + r, w + s, q])
    dW[p, q, r, s] = dW.T[p, r, s, q]                (one pass over dW)

where ``q`` is contiguous in every read that uses it: the middle stage is an ordinary
spatial-vector reduction (``auto.py``), the copies are element-wise.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ..arith import Analyzer, range_interval
from ..arith.extent import at_hint
from ..ir.expr import Expr, IterVar, Range, Reduce, TensorRead, Var
from ..ir.tensor import ComputeOp, Tensor
from ..ir.visit import collect_vars, post_order, rewrite, substitute
from .schedule import Schedule, Stage

__all__ = ["transpose_reused_operand", "transpose_to_output_axis", "transpose_vector_axis"]

# bytes: a row at least this long makes a reduction that steps across rows jump cache
# lines far enough apart that no prefetcher follows (``transpose_reused_operand``)
_LONG_ROW = 1024


def transpose_vector_axis(s: Schedule, stage: Stage, body: Expr, lanes: int,
                          min_reuse: int = 0, min_copy_reuse: int = 0,
                          hint: Mapping[Var, int] | None = None) -> list[Stage] | None:
    """Rewrite root ``stage`` (its reduction ``body``, inlined producers expanded) so that
    an output axis of at least ``lanes`` points that is not its last is computed innermost
    (see the module doc), when the stage visits each element of the copies at least
    ``min_reuse`` times in all, and each element of the largest copy at least
    ``min_copy_reuse`` times. Returns the new stages to schedule, producers first (the
    transposed copies, the permuted reduction, then ``stage`` itself, now the copy back),
    or None when no axis qualifies."""
    op = stage.op
    if op.num_outputs != 1 or stage.relations or not isinstance(body, Reduce) or \
            len(op.axis) < 2:
        return None
    an = Analyzer()
    best: tuple[int, int, IterVar, dict[Tensor, int]] | None = None
    for pos, a in enumerate(op.axis[:-1]):
        if at_hint(a.dom.extent, hint) < lanes:
            continue
        moves = _moves(body, a.var, an)
        if moves is None:
            continue
        size = sum(math.prod(at_hint(n, hint) for n in t.shape) for t in moves)
        key = (size, -pos)
        if best is None or key < best[:2]:
            best = (size, -pos, a, moves)
    if best is None:
        return None
    visits = math.prod(at_hint(iv.dom.extent, hint) for iv in (*op.axis, *body.axis))
    largest = max(math.prod(at_hint(n, hint) for n in t.shape) for t in best[3])
    if visits < max(min_reuse * best[0], min_copy_reuse * largest):
        return None
    _, _, a, moves = best
    return _rewrite(s, stage, body, a, moves)


def _moves(body: Expr, v: Var, an: Analyzer) -> dict[Tensor, int] | None:
    """For each tensor read with ``v`` in a dimension that is not its last, that dimension
    (``v`` must be there with coefficient 1, alone of the dimensions); None when some read
    does not allow it, or when nothing would be contiguous along ``v`` afterwards."""
    moves: dict[Tensor, int] = {}
    contiguous = 0
    for node in post_order(body):
        if not isinstance(node, TensorRead) or not node.indices:
            continue
        dims = [d for d, i in enumerate(node.indices) if v in collect_vars(i)]
        if not dims:
            continue
        if len(dims) > 1:
            return None
        d = dims[0]
        lin = an.try_linear(node.indices[d])
        if lin is None or lin.terms.get(v) != 1:
            return None
        contiguous += 1
        if d == len(node.indices) - 1:
            continue
        if moves.get(node.tensor, d) != d:
            return None  # read along two different dimensions
        moves[node.tensor] = d
    return moves if moves and contiguous else None


def _rewrite(s: Schedule, stage: Stage, body: Expr, a: IterVar, moves: dict[Tensor, int]
             ) -> list[Stage]:
    op = stage.op
    new, body = _copy_moved(s, stage, body, moves, last=True)
    # the reduction with ``a`` last, on fresh axes
    fresh = [IterVar(Var(iv.var.name, iv.var.dtype, "axis"), iv.dom) for iv in op.axis]
    mapping: dict[Expr, Expr] = {old.var: f.var for old, f in zip(op.axis, fresh)}
    pos = list(op.axis).index(a)
    moved = ComputeOp(f"{op.name}.T", _move(fresh, pos, True),  # type: ignore[arg-type]
                      [substitute(body, mapping)], op.tag, op.attrs)
    st = Stage(moved, s)
    s.insert_stage(st, stage)
    new.append(st)
    # the stage itself copies the result back into its layout
    idx = _move([iv.var for iv in op.axis], pos, True)
    s.replace_op(stage, ComputeOp(op.name, op.axis, [TensorRead(moved.output(0), idx)],
                                  tag="relayout"))
    stage.all_iter_vars = list(op.axis)
    stage.leaf_iter_vars = list(op.axis)
    new.append(stage)
    return new


def transpose_to_output_axis(s: Schedule, stage: Stage, body: Expr, v: Var, min_reuse: int,
                             hint: Mapping[Var, int] | None = None) -> list[Stage]:
    """Give each input that root ``stage`` (its reduction ``body``, inlined producers
    expanded) reads with its output variable ``v`` in a dimension that is not the last a
    copy with that dimension last, when the stage visits each copied element at least
    ``min_reuse`` times: ``Y[i, j] = sum(X[i, k] * W[j, k])`` (a dense layer) then reads
    ``W.T[k, j]``, contiguous along ``j``, and is computed as outer products of ``X``'s
    broadcast values with vectors of ``W.T``'s rows instead of as dot products along ``k``
    (whose partial sums need adding up per output point and whose register tile is
    smaller). Returns the copies' stages (to schedule; none when nothing was rewritten)."""
    op = stage.op
    if op.num_outputs != 1 or stage.relations or not isinstance(body, Reduce):
        return []
    moves = _moves(body, v, Analyzer())
    if not moves:
        return []
    size = sum(math.prod(at_hint(n, hint) for n in t.shape) for t in moves)
    visits = math.prod(at_hint(iv.dom.extent, hint) for iv in (*op.axis, *body.axis))
    if visits < min_reuse * size:
        return []
    new, body = _copy_moved(s, stage, body, moves, last=True)
    s.replace_op(stage, ComputeOp(op.name, op.axis, [body], op.tag, op.attrs))
    return new


def transpose_reused_operand(s: Schedule, stage: Stage, body: Expr, i: Var,
                             reduce: Sequence[Var], min_size: int,
                             hint: Mapping[Var, int] | None = None) -> list[Stage]:
    """Before ``stage`` (a root reduction, ``body`` expanded) is blocked over the output
    axis ``i`` (its unrolled rows), give each input of at least ``min_size`` elements that
    is read with ``i`` in one dimension, not its last, and reduction variables in earlier
    ones a copy with that dimension first: ``W[c, q, ry, rx]`` read across ``c`` for 8
    rows ``q`` jumps a whole ``q`` plane per step (a page, for a 512-channel kernel);
    ``W.T[q, c, ry, rx]`` streams the 8 rows (a convolution's data gradient reads its
    kernel so). A read whose flat address is ``i`` plus long steps of the reduction (a
    weight gradient's ``H[n, p]``, or the same through a reshape, ``H[n // 128, n % 128,
    p // 64, p % 64]``) gets a copy ``H.T[p, n]`` of what it reads. Returns the copies'
    stages (to schedule; none when nothing was rewritten)."""
    rvars = set(reduce)
    moves: dict[Tensor, int] = {}
    gathers: dict[tuple, tuple[TensorRead, list[tuple[Var, Range]]]] = {}
    doms = {iv.var: iv.dom for iv in stage.op.axis}
    if isinstance(body, Reduce):
        doms.update({iv.var: iv.dom for iv in body.axis})
    an = Analyzer({v: range_interval(d) for v, d in doms.items()})
    for node in post_order(body):
        if not isinstance(node, TensorRead) or len(node.indices) < 2 or \
                math.prod(at_hint(n, hint) for n in node.tensor.shape) < min_size:
            continue
        dims = [d for d, x in enumerate(node.indices) if i in collect_vars(x)]
        if not dims:
            continue
        d = dims[0]
        lin = an.try_linear(node.indices[d]) if len(dims) == 1 else None
        if lin is None or lin.terms.get(i) != 1:
            order = _flat_steps(node, i, reduce, doms, an)
            if order is not None:
                gathers[(node.tensor, tuple(an.key(x) for x in node.indices))] = (node, order)
            continue
        if not any(rvars & set(collect_vars(x)) for x in node.indices[:d]):
            continue
        # along the last dimension, a tile's rows share a cache line at every step: worth
        # a copy only when a step of the reduction jumps a long row (a weight gradient's
        # ``A[n, p]``, ``n`` reduced: each step a new line, pages apart, never prefetched)
        row = at_hint(node.tensor.shape[d], hint) * max(1, node.tensor.dtype.bits // 8)
        if d == len(node.indices) - 1 and row < _LONG_ROW:
            continue
        if moves.get(node.tensor, d) != d:
            return []
        moves[node.tensor] = d
    if not moves and not gathers:
        return []
    new, body = _copy_moved(s, stage, body, moves, last=False)
    if gathers:
        more, body = _copy_gathered(s, stage, body, gathers, an)
        new += more
    op = stage.op
    s.replace_op(stage, ComputeOp(op.name, op.axis, [body], op.tag, op.attrs))
    return new


def _flat_steps(node: TensorRead, i: Var, reduce: Sequence[Var], doms: dict[Var, Range],
                an: Analyzer) -> list[tuple[Var, Range]] | None:
    """The axes ``[i, r...]`` of a copy of what ``node`` reads, when its flat address is
    linear with ``i`` contiguous and every reduction step at least ``_LONG_ROW`` bytes
    apart, and the copy is no larger than the tensor; else None."""
    if not all(isinstance(n, int) for n in node.tensor.shape):
        return None  # (a copy of a symbolic tensor's gathered rows: not attempted)
    shape = [int(n) for n in node.tensor.shape]
    flat: Expr | None = None
    stride = 1
    for x, n in zip(reversed(node.indices), reversed(shape)):
        term = x * stride if stride != 1 else x
        flat = term if flat is None else term + flat
        stride *= n
    lf = an.try_linear(an.rewrite(flat)) if flat is not None else None
    if lf is None or lf.terms.get(i) != 1 or \
            any(not isinstance(v, Var) or v not in doms for v in lf.terms):
        return None
    steps = [abs(c) for v, c in lf.terms.items() if v is not i]
    nbytes = max(1, node.tensor.dtype.bits // 8)
    if not steps or set(lf.terms) - {i} - set(reduce) or min(steps) * nbytes < _LONG_ROW:
        return None
    used = [i, *(r for r in reduce if r in lf.terms)]
    if math.prod(doms[v].extent for v in used) > math.prod(shape):
        return None
    return [(v, doms[v]) for v in used]


def _copy_gathered(s: Schedule, stage: Stage, body: Expr,
                   gathers: dict[tuple, tuple[TensorRead, list[tuple[Var, Range]]]],
                   an: Analyzer) -> tuple[list[Stage], Expr]:
    """For each read of ``gathers``, a copy of what it reads over its variables (in that
    order, its stage inserted before ``stage``); and ``body`` reading the copies instead."""
    new: list[Stage] = []
    copies: dict[tuple, tuple[Tensor, list[tuple[Var, Range]]]] = {}
    for key, (node, order) in gathers.items():
        axes = [IterVar(Var(f"ax{k}", kind="axis"), Range(0, dom.extent))
                for k, (_, dom) in enumerate(order)]
        mapping: dict[Expr, Expr] = {v: x.var + dom.min if dom.min else x.var
                                     for (v, dom), x in zip(order, axes)}
        copy = ComputeOp(f"{node.tensor.name}.T", axes, [substitute(node, mapping)],
                         tag="relayout")
        copies[key] = (copy.output(0), order)
        new.append(Stage(copy, s))
        s.insert_stage(new[-1], stage)

    def reread(e: Expr) -> Expr | None:
        if not isinstance(e, TensorRead):
            return None
        hit = copies.get((e.tensor, tuple(an.key(x) for x in e.indices)))
        if hit is None:
            return None
        t, order = hit
        return TensorRead(t, [v - dom.min if dom.min else v for v, dom in order])

    return new, rewrite(body, reread)


def _earlier_copy(s: Schedule, stage: Stage, t: Tensor, order: list[int]) -> Tensor | None:
    """A relayout copy of ``t`` whose dimension ``k`` is ``t``'s ``order[k]``, computed
    before ``stage``: the batch-norm gradients of a ResNet block read the same
    activations transposed in up to three stages, each of which had made its own copy
    (resnet_28: 10 copies of 8 x 128 x 28 x 28 a call where 6 sources)."""
    for other in s.stages:
        if other is stage:
            return None
        op = other.op
        if not isinstance(op, ComputeOp) or op.tag != "relayout":
            continue
        read = op.body[0]
        if not isinstance(read, TensorRead) or read.tensor is not t:
            continue
        dims = [next((k for k, e in enumerate(read.indices) if e is a.var), -1)
                for a in op.axis]
        if dims == order:
            return op.output(0)
    return None


def _move(order: Sequence[Expr], d: int, last: bool) -> list[Expr]:
    """``order`` with its item ``d`` moved last (or first)."""
    rest = [x for k, x in enumerate(order) if k != d]
    return [*rest, order[d]] if last else [order[d], *rest]


def _copy_moved(s: Schedule, stage: Stage, body: Expr, moves: dict[Tensor, int], last: bool
                ) -> tuple[list[Stage], Expr]:
    """For each tensor of ``moves``, a copy with that dimension moved last (or first), its
    stage inserted before ``stage``; and ``body`` reading the copies instead."""
    new: list[Stage] = []
    copies: dict[Tensor, Tensor] = {}
    for t, d in moves.items():
        earlier = _earlier_copy(s, stage, t, _move(list(range(len(t.shape))), d, last))
        if earlier is not None:  # another reader's copy, computed before this stage
            copies[t] = earlier
            continue
        axes = [IterVar(Var(f"ax{k}", kind="axis"), Range(0, n))
                for k, n in enumerate(t.shape)]
        copy = ComputeOp(f"{t.name}.T", _move(axes, d, last),  # type: ignore[arg-type]
                         [TensorRead(t, [x.var for x in axes])], tag="relayout")
        copies[t] = copy.output(0)
        new.append(Stage(copy, s))
        s.insert_stage(new[-1], stage)

    def reread(e: Expr) -> Expr | None:
        if isinstance(e, TensorRead) and e.tensor in copies:
            return TensorRead(copies[e.tensor], _move(e.indices, moves[e.tensor], last))
        return None

    return new, rewrite(body, reread)
