"""Hand schedules for some workloads (``HAND``) and PyTorch formulations of all of them
(``TORCH``), used by ``run.py``.

A hand schedule is what a user would write after reading the lowered loop nest: inline the
element-wise producers, parallelize the outer loops over the cores, keep the innermost loop
contiguous and vectorized, and block the loops of matrix products so the accumulators stay
in registers.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tex.ir.expr import IterVar, TensorRead
from tex.ir.tensor import ComputeOp, Tensor
from tex.ir.visit import collect_vars, post_order
from tex.schedule import Schedule, Stage, create_schedule

VECTOR = 8  # float32 lanes of a 256-bit vector


def _inline_elementwise(s: Schedule) -> None:
    """Inline every non-output, single-output element-wise stage (pads, broadcasts)."""
    for st in s.stages:
        if st.is_output or st.op.reduce_axis or st.op.num_outputs != 1:
            continue
        st.compute_inline()


def _parallel_outer(st: Stage, axes: list[IterVar]) -> IterVar:
    """Fuse the given outer spatial axes and run them in parallel."""
    fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
    st.parallel(fused)
    return fused


def block(s: Schedule, t: Tensor, i: IterVar, j: IterVar, bi: int = 4,
          bj: int = 2 * VECTOR) -> None:
    """Register-block a reduction ``t[.., i, .., j] = sum_k ...`` whose last axis ``j`` is
    contiguous in the inputs: a local ``bi x bj`` tile of accumulators (``cache_write``)
    updated once per reduction point with ``i`` unrolled and ``j`` vectorized; the other
    spatial axes and the tiles of ``i`` run in parallel."""
    local = s.cache_write(t, "local")
    st = s[t]
    outer = [a for a in t.op.axis if a is not i and a is not j]
    io, ii = st.split(i, factor=bi)
    jo, ji = st.split(j, factor=bj)
    st.reorder(*outer, io, jo, ii, ji)
    _parallel_outer(st, [*outer, io])
    st.vectorize(ji)
    s[local].compute_at(st, jo)
    lst = s[local]
    pos = list(t.op.axis).index(i), list(t.op.axis).index(j)
    li, lj = local.op.axis[pos[0]], local.op.axis[pos[1]]
    lst.reorder(*local.op.reduce_axis, li, lj)
    lst.unroll(li)
    lst.vectorize(lj)


def dot_block(s: Schedule, t: Tensor, bi: int = 4, bj: int = 4) -> None:
    """Register-block ``t[i, j] = sum_k A[i, k] * B[j, k]`` (both contiguous in k): split k
    by the vector width and ``rfactor`` the lanes, so a bi x bj tile keeps bi*bj vector
    accumulators; each k step loads bi + bj vectors. Lanes are summed at the end."""
    st = s[t]
    i, j = t.op.axis
    (k,) = t.op.reduce_axis
    _, kv = st.split(k, factor=VECTOR)
    part = s.rfactor(t, kv, factor_axis=2)
    io, ii = st.split(i, factor=bi)
    jo, ji = st.split(j, factor=bj)
    st.reorder(io, jo, ii, ji)
    st.parallel(io)
    s[part].compute_at(st, jo)
    pi, pj, pv = part.op.axis
    (pk,) = part.op.reduce_axis
    s[part].reorder(pk, pi, pj, pv)
    s[part].unroll(pi)
    s[part].unroll(pj)
    s[part].vectorize(pv)


def elementwise(st: Stage) -> None:
    """Parallel outer loop, vectorized contiguous inner loop."""
    axes = list(st.op.axis)
    if not axes:
        return
    last = axes[-1]
    if last.dom.extent >= VECTOR:
        lo, li = st.split(last, factor=VECTOR)
        axes = axes[:-1] + [lo]
        st.reorder(*axes, *st.op.reduce_axis, li)
        st.vectorize(li)
    if axes:
        _parallel_outer(st, axes[:1])


def _dense_forward(w: Any) -> Schedule:
    s = create_schedule(w.forward.op)
    dense = next(st for st in s.stages if st.op.reduce_axis)
    _inline_elementwise(s)
    dot_block(s, dense.op.output(0))
    elementwise(s[w.forward])
    return s


def _generic_gradient(w: Any, grads: list[Tensor]) -> Schedule:
    """Inline element-wise stages; block the reductions with two or more spatial axes on
    their last axis (contiguous in these gradients); vectorize the rest."""
    outs = [w.loss, *grads]
    s = create_schedule([t.op for t in outs])
    _inline_elementwise(s)
    for st in list(s.stages):
        op = st.op
        if st.attach_type != "root" or not isinstance(op, ComputeOp):
            continue
        if _dot_like(op):
            dot_block(s, op.output(0))
        elif op.reduce_axis and len(op.axis) >= 2 and op.axis[-1].dom.extent >= VECTOR:
            block(s, op.output(0), op.axis[-2], op.axis[-1])
        elif op.axis:
            elementwise(st)
    return s


def _dot_like(op: ComputeOp) -> bool:
    """``C[i, j] = sum_k A[i, k] * B[j, k]``: one reduction axis, contiguous (last index) in
    a read that also depends on ``j``, so vectorizing ``j`` would gather."""
    if len(op.axis) != 2 or len(op.reduce_axis) != 1:
        return False
    k, j = op.reduce_axis[0].var, op.axis[1].var
    for node in post_order(*op.body):
        if isinstance(node, TensorRead) and node.indices and node.indices[-1] is k and any(
                j in collect_vars(ix) for ix in node.indices[:-1]):
            return True
    return False


def _conv_forward(w: Any) -> Schedule:
    s = create_schedule(w.forward.op)
    _inline_elementwise(s)
    out = w.forward
    n, c, h, x = out.op.axis
    block(s, out, c, x)
    return s


@dataclass(frozen=True)
class Hand:
    forward: Callable[[Any], Schedule]
    gradient: Callable[[Any, list[Tensor]], Schedule]


HAND: dict[str, Hand] = {
    "dense": Hand(_dense_forward, _generic_gradient),
    "conv2d": Hand(_conv_forward, _generic_gradient),
}


# --------------------------------------------------------------------------------------
# PyTorch formulations (imported lazily by run.py only when torch is installed)
# --------------------------------------------------------------------------------------

def _t_dense(w: Any, t: dict) -> Any:
    return t["X"] @ t["W"].T + t["B"]


def _t_conv(stride: int, pad: int) -> Callable[[Any, dict], Any]:
    def f(w: Any, t: dict) -> Any:
        import torch.nn.functional as F
        return F.conv2d(t["data"], t["kernel"], stride=stride, padding=pad)
    return f


def _t_maxpool(w: Any, t: dict) -> Any:
    import torch.nn.functional as F
    return F.max_pool2d(t["data"], 2, 2)


def _t_softmax(w: Any, t: dict) -> Any:
    return t["x"].softmax(-1)


def _t_layernorm(w: Any, t: dict) -> Any:
    import torch.nn.functional as F
    x = t["x"]
    return F.layer_norm(x, x.shape[-1:], t["gamma"], t["beta"], eps=1e-5)


def _t_elementwise(w: Any, t: dict) -> Any:
    return (t["x"] * t["y"] + t["z"]).tanh() * t["x"].sigmoid()


def _t_bmm(w: Any, t: dict) -> Any:
    return t["A"] @ t["B"]


def _t_sumsq(w: Any, t: dict) -> Any:
    return (t["x"] * t["x"]).sum(1)


TORCH: dict[str, Callable[[Any, dict], Any]] = {
    "dense": _t_dense, "conv2d": _t_conv(1, 1), "maxpool2d": _t_maxpool,
    "softmax": _t_softmax, "layernorm": _t_layernorm, "elementwise": _t_elementwise,
    "batch_matmul": _t_bmm, "sumsq": _t_sumsq, "conv2d_strided": _t_conv(2, 2),
}

__all__ = ["HAND", "TORCH", "Hand", "block", "dot_block", "elementwise"]
