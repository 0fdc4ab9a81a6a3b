"""Hand-written gradient costs of the topi ops: the reference tex's gradients are held to.

``GRADIENT_COST`` maps every differentiable public topi function to a formula for the
iterations of a careful hand-written backward: given the op's arguments (bound to its
signature, defaults applied) and its result, the iteration points
(``tex.autodiff.iteration_count``'s measure) of a program computing the gradients of
``sum(op(...) * head)`` with respect to every float tensor argument.
``handwritten_gradient_iterations(op, *args, **kwargs)`` evaluates it;
``tests/test_gradient_cost.py`` holds every op's tex gradient to 1.25x of it.

The conventions of the reference:

* the forward's tensors (the op's result and the intermediates topi builds: softmax's
  output, layer_norm's statistics, the pooled maxima) are on a tape, free to read. So tex's
  side is ``iteration_count(*grads, given=[output])``. What a backward needs and the forward
  did not keep is counted: the argmax a max gradient finds again is the forward's count;
* every point written counts once: writing a gradient is one pass over it, a reduction of
  ``r`` points is ``r`` per output point, elementwise arithmetic is fused into the pass that
  needs it. A gradient that is zero (``floor``, ``zeros_like``) is written: one pass;
* a broadcast operand's gradient sums the head over its broadcast axes: one pass over the
  output;
* a window op's input gradient (conv2d, pool2d) is a gather, polyphase: the input points of
  one stride phase read only the kernel taps that reach them (a rectangular domain, as a
  dense convolution per phase, ``benchmarks/workloads.py``; a loop over the windows
  instead where there are fewer windows than taps, as in a global pool); a phase no tap
  reaches is written as zeros, one iteration per point. A pool takes the cheaper of that
  gather and a scatter (zero the gradient, then per window its head to the argmax for
  max, to each of its points for avg), which wins where windows overlap.
"""
from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..ir.tensor import Tensor
from . import broadcast, contract, gather, join, nn, reduce, transform
from .contract import einsum_labels
from .nn.utils import window_padding
from .utils import broadcast_shape, normalize_axis, pair
from .utils import prod as product

__all__ = ["GRADIENT_COST", "Formula", "handwritten_gradient_iterations"]

Args = Mapping[str, Any]  # the op's arguments by parameter name, defaults applied
Formula = Callable[[Args, Any], int]  # (arguments, the op's result) -> iterations


def _size(t: Tensor) -> int:
    return product(t.shape)


def _float_tensors(values: Sequence[Any]) -> list[Tensor]:
    return [v for v in values if isinstance(v, Tensor) and v.dtype.is_float]


# -- elementwise -------------------------------------------------------------------------

def _x(a: Args, out: Any) -> int:
    """One pass over ``x``: an elementwise gradient, a gather of head into x's shape, or
    a zero gradient written once."""
    return _size(a["x"])


def _per_operand(*names: str) -> Formula:
    """Each float tensor operand: the head times its partial, summed over the operand's
    broadcast axes (one pass over the output), or one elementwise pass when it has the
    output's shape."""
    def formula(a: Args, out: Any) -> int:
        return len(_float_tensors([a[n] for n in names])) * _size(out)
    return formula


def _zero_operands(*names: str) -> Formula:
    """A piecewise-constant op: each float tensor operand's zero gradient, written once."""
    def formula(a: Args, out: Any) -> int:
        return sum(_size(t) for t in _float_tensors([a[n] for n in names]))
    return formula


# -- reductions and normalizations -------------------------------------------------------

def _reduced_points(a: Args) -> int:
    """How many input points each output point of a reduction reduces."""
    x = a["x"]
    return product(x.shape[d] for d in normalize_axis(a["axis"], x.ndim, "reference"))


def _select_reduction(a: Args, out: Any) -> int:
    # argmax found again (the forward's count, |x|; none over a single point), then one
    # pass over x sending head to it
    return _size(a["x"]) * (2 if _reduced_points(a) > 1 else 1)


def _product_reduction(a: Args, out: Any) -> int:
    # the count of zero factors and the product of the nonzero ones (one pass over x,
    # two accumulators), then one pass dx = head * (product of the others); a single
    # factor's is a copy
    return _size(a["x"]) * (2 if _reduced_points(a) > 1 else 1)


def _normalize(a: Args, out: Any) -> int:
    # softmax: s = sum(head * y) along the axis, dx = y * (head - s); log_softmax:
    # s = sum(head), dx = head - exp(y) * s: two passes. Over a single point the result
    # is constant (1, or 0): its zero gradient, one pass
    x = a["x"]
    return _size(x) * (2 if x.shape[a["axis"]] > 1 else 1)


# -- gathers and contractions ----------------------------------------------------------

def _take(a: Args, out: Any) -> int:
    # zeros, then head scattered through the indices: |a| + |out|; or, for few indices, a
    # gather: each point of a sums head over the index positions that name it,
    # |a| * |indices|
    indices = a["indices"]
    count = _size(indices) if isinstance(indices, Tensor) else 1
    return min(_size(a["a"]) + _size(out), _size(a["a"]) * count)


def _einsum(a: Args, out: Any) -> int:
    # operand X: the transposed einsum into X's shape, a gather over the labels X lacks
    # (or holds with extent 1 where they broadcast): |X| * prod(extents of those labels)
    operands = a["operands"]
    terms, _, extent = einsum_labels(a["subscripts"], operands)
    total = 0
    for term, t in zip(terms, operands):
        held = {c for c, e in zip(term, t.shape) if e == extent[c]}
        if t.dtype.is_float:
            total += _size(t) * product(e for c, e in extent.items() if c not in held)
    return total


def _tensordot(a: Args, out: Any) -> int:
    # each operand's gradient contracts head with the other operand over that one's free
    # axes: |out| * K, the forward's count (K, the contracted extent: |A| |B| = |out| K^2)
    x, y = a["a"], a["b"]
    k = math.isqrt(_size(x) * _size(y) // _size(out))
    return len(_float_tensors([x, y])) * _size(out) * k


def _matmul(a: Args, out: Any) -> int:
    # NumPy's matmul (1-D operands promoted): dA = head B^T, |A| * N summed over the batch
    # A broadcasts over; dB = A^T head, |B| * M likewise
    x, y = a["a"], a["b"]
    m = x.shape[-2] if x.ndim >= 2 else 1
    n = y.shape[-1] if y.ndim >= 2 else 1
    batch = product(broadcast_shape(x.shape[:-2], y.shape[:-2]))
    total = 0
    if x.dtype.is_float:
        total += _size(x) * n * batch // product(x.shape[:-2])
    if y.dtype.is_float:
        total += _size(y) * m * batch // product(y.shape[:-2])
    return total


def _dense(a: Args, out: Any) -> int:
    # dX = head W: n*k*m; dW = head^T X: m*k*n; dB = the column sums of head: n*m
    (n, k), m = a["data"].shape, a["weight"].shape[0]
    return 2 * n * k * m + (n * m if a["bias"] is not None else 0)


def _batch_matmul(a: Args, out: Any) -> int:
    # dA = head B^T over the batch: |A| * N * (batch / A's batch); dB likewise with M
    x, y = a["tensor_a"], a["tensor_b"]
    batch, m, n = out.shape
    return _size(x) * n * batch // x.shape[0] + _size(y) * m * batch // y.shape[0]


# -- windows: conv2d, pool2d -------------------------------------------------------------

def _phases(size: int, kernel: int, stride: int, dilation: int, pad_before: int,
            windows: int) -> list[tuple[int, int]]:
    """(input points, reads per point) of each stride phase of one spatial dimension:
    input point ``y`` is read by tap ``r`` of some window only if ``(y + pad_before) %
    stride == (r * dilation) % stride``; each point of a phase loops over the phase's taps,
    or over the ``windows`` when there are fewer (a point is read once per window at most:
    a global pool's point, once)."""
    return [(sum(1 for y in range(size) if (y + pad_before) % stride == phase),
             min(sum(1 for r in range(kernel) if r * dilation % stride == phase), windows))
            for phase in range(stride)]


def _window_gather(rows: list[tuple[int, int]], cols: list[tuple[int, int]],
                   per_tap: int) -> int:
    """Iterations of a polyphase gather over a 2-D window for one (n, c) plane: each phase
    pair's points times its reads (``per_tap`` iterations each), or one zero write per
    point of a phase no tap reaches."""
    total = 0
    for (py, ty), (px, tx) in itertools.product(rows, cols):
        taps = ty * tx
        total += py * px * (taps * per_tap if taps else 1)
    return total


def _geometry(data: Tensor, layout: str, a: Args, kernel: tuple[int, int], out: Tensor,
              op: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The phases of the rows and of the columns of a window op's input (``data`` in
    ``layout``: the positions of H and W)."""
    hd, wd = layout.index("H"), layout.index("W")
    sh, sw = pair(a["stride"], op, "stride")
    dh, dw = pair(a.get("dilation", 1), op, "dilation")
    top, left, _, _ = window_padding(a["padding"], (dh * (kernel[0] - 1) + 1,
                                                    dw * (kernel[1] - 1) + 1), op)
    return (_phases(data.shape[hd], kernel[0], sh, dh, top, out.shape[hd]),
            _phases(data.shape[wd], kernel[1], sw, dw, left, out.shape[wd]))


def _conv(data: Tensor, kernel: Tensor, layout: str, kernel_layout: str) -> Formula:
    """The gradient cost of a convolution of ``data`` in ``layout`` with ``kernel`` in
    ``kernel_layout``:

    dkernel[o,c,ky,kx] = sum over n, h, w of head * data: the forward's count,
    |out| * C*KH*KW; ddata: a polyphase gather over the output channels and taps,
    N*C * sum over phase pairs of points * O*taps."""
    def formula(a: Args, out: Any) -> int:
        k = dict(zip(kernel_layout, kernel.shape))
        o, c, kh, kw = k["O"], k["I"], k["H"], k["W"]
        rows, cols = _geometry(data, layout, a, (kh, kw), out, "reference conv2d")
        batch = data.shape[layout.index("N")]
        return _size(out) * c * kh * kw + batch * c * _window_gather(rows, cols, o)
    return formula


def _conv2d(a: Args, out: Any) -> int:
    layout = a["data_layout"] or a["layout"]
    kernel_layout = a["kernel_layout"] or (
        "OIHW" if layout.index("C") < min(layout.index("H"), layout.index("W")) else "HWIO")
    return _conv(a["data"], a["kernel"], layout, kernel_layout)(a, out)


def _conv_in(layout: str, kernel_layout: str) -> Formula:
    """``_conv`` for TVM's fixed-layout convolutions (arguments ``Input``, ``Filter``)."""
    def formula(a: Args, out: Any) -> int:
        return _conv(a["Input"], a["Filter"], layout, kernel_layout)(a, out)
    return formula


def _pool2d(a: Args, out: Any) -> int:
    # ddata: a polyphase gather of head (avg: divided by the window's count, inlined) over
    # the windows reading each point, N*C * sum over phase pairs of points * taps, or a
    # scatter when cheaper: zero ddata, then per window its head to the argmax (max: one
    # update) or to every point (avg: KH*KW updates); max first finds each window's argmax
    # again (the forward's count, |out| * KH*KW; none for a single-point window)
    data = a["data"]
    layout = "".join(c for c in a["layout"] if c.isalpha())  # "NCHW16c": N, C, H, W, c
    kh, kw = pair(a["kernel"], "reference pool2d", "kernel")
    rows, cols = _geometry(data, layout, a, (kh, kw), out, "reference pool2d")
    planes = _size(data) // (data.shape[layout.index("H")] * data.shape[layout.index("W")])
    gather_ = planes * _window_gather(rows, cols, 1)
    single = kh * kw == 1
    is_max = a["pool_type"] == "max"
    scatter = _size(data) + _size(out) * (1 if is_max else kh * kw)
    argmax = _size(out) * kh * kw if is_max and not single else 0
    return argmax + min(gather_, scatter)


# -- the table ---------------------------------------------------------------------------

GRADIENT_COST: dict[Callable[..., Any], Formula] = {
    # elementwise unary: dx = head * f'(x), one pass
    **{getattr(broadcast, name): _x for name in (
        "negative", "exp", "log", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan",
        "tanh", "sigmoid", "erf", "abs")},
    # piecewise constant: the zero gradient, written once
    **{getattr(broadcast, name): _x for name in ("floor", "ceil", "round", "trunc")},
    # a float cast: dx = head cast back, one pass
    broadcast.cast: _x,  # astype is cast
    # binary with broadcasting: per float tensor operand one pass over the output
    **{getattr(broadcast, name): _per_operand("a", "b") for name in (
        "add", "subtract", "multiply", "divide", "power", "maximum", "minimum",
        "floor_mod")},
    broadcast.floor_divide: _zero_operands("a", "b"),
    broadcast.clip: _per_operand("x", "a_min", "a_max"),
    # each float operand's gradient is head itself: one pass over the output per operand
    broadcast.elemwise_sum: lambda a, out: len(_float_tensors(a["xs"])) * _size(out),
    broadcast.where: _per_operand("x", "y"),  # the condition is data
    broadcast.broadcast_to: lambda a, out: _size(out),  # head summed over the new axes
    **{getattr(broadcast, name): _x for name in ("full_like", "zeros_like", "ones_like")},
    # reductions
    reduce.sum: _x,  # head broadcast back: one pass over x
    reduce.mean: _x,  # head / count broadcast back: one pass
    reduce.logsumexp: _x,  # dx = head * exp(x - lse), lse on the tape: one pass
    reduce.max: _select_reduction,
    reduce.min: _select_reduction,
    reduce.prod: _product_reduction,
    # shape transforms: a gather of head, one pass over the input(s)
    transform.reshape: _x,
    transform.transpose: _x,
    transform.expand_dims: _x,
    transform.squeeze: _x,
    transform.flip: _x,
    join.split: _x,  # head of the piece, zeros elsewhere: one pass over x
    join.concatenate: lambda a, out: sum(_size(t) for t in _float_tensors(a["tensors"])),
    join.stack: lambda a, out: sum(_size(t) for t in _float_tensors(a["tensors"])),
    gather.take: _take,
    # contractions
    contract.einsum: _einsum,
    contract.tensordot: _tensordot,
    contract.matmul: _matmul,
    nn.dense: _dense,
    nn.batch_matmul: _batch_matmul,
    nn.conv2d: _conv2d,
    nn.conv2d_nchw: _conv_in("NCHW", "OIHW"),
    nn.conv2d_nhwc: _conv_in("NHWC", "HWIO"),
    nn.conv2d_hwcn: _conv_in("HWCN", "HWIO"),
    nn.pool2d: _pool2d,
    nn.pool: _pool2d,  # pool2d with dilation 1
    # activations: one pass
    nn.relu: _x,
    nn.leaky_relu: _x,
    nn.softmax: _normalize,
    nn.log_softmax: _normalize,
    # layer_norm, statistics on the tape: dbeta = sum(head), dgamma = sum(head * xhat),
    # the row sums of g = head*gamma and g*xhat, dx = rstd*(g - mean(g) - xhat*mean(g*xhat)):
    # five passes
    nn.layer_norm: lambda a, out: 5 * _size(a["data"]),
    # batch_norm: S0 = sum(head) (= dbeta), S1 = sum(head * (x - mean)) and
    # dx = head * gamma * rstd (three passes), then per channel dgamma = S1 * rstd,
    # dmean = -S0 * gamma * rstd, dvar = S1 * gamma * d(rstd)/dvar
    nn.batch_norm: lambda a, out: 3 * _size(a["data"]) + 3 * a["gamma"].shape[0],
    nn.flatten: lambda a, out: _size(a["data"]),  # a gather of head
    nn.pad: lambda a, out: _size(a["data"]),  # the interior of head
    # cross_entropy: dp = -head * t / (p * batch), dt = -head * log(p) / batch: two passes
    nn.cross_entropy: lambda a, out: 2 * _size(a["predictions"]),
    # with logits, log_softmax on the tape: the row sums T of t, dz = -head *
    # (t - exp(log_softmax) * T) / batch, dt = -head * log_softmax / batch: three passes
    nn.cross_entropy_with_logits: lambda a, out: 3 * _size(a["logits"]),
}


def handwritten_gradient_iterations(op: Callable[..., Any], *args: Any, **kwargs: Any
                                    ) -> int:
    """The iterations of a careful hand-written gradient of ``op(*args, **kwargs)`` with
    respect to every float tensor argument, from ``GRADIENT_COST`` (module docstring). The
    op is called once, for its result's shape.

    Example
    -------
    >>> data = tex.placeholder((8, 16, 32, 32), name="data")
    >>> kernel = tex.placeholder((32, 16, 3, 3), name="kernel")
    >>> handwritten_gradient_iterations(topi.nn.conv2d, data, kernel, 1, 1)
    75497472
    """
    formula = GRADIENT_COST.get(op)
    if formula is None:
        name = getattr(op, "__name__", repr(op))
        raise ValueError(f"handwritten_gradient_iterations: no hand-written reference for "
                         f"{name!r}; the ops with one are the keys of GRADIENT_COST")
    bound = inspect.signature(op).bind(*args, **kwargs)
    bound.apply_defaults()
    return formula(bound.arguments, op(*args, **kwargs))
